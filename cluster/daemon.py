"""The background process behind `novaberg up`: stores, Ray, the Serve app and the workers, held
until SIGTERM (`novaberg down`)."""
from __future__ import annotations

import json
import logging
import os
import signal
import threading
from pathlib import Path

from cluster import runtime
from core import logsafe
from core.settings import load_settings


def state_file(home: Path) -> Path:
    return home / "daemon.json"


def keys_dir(home: Path) -> Path:
    return home / "keys"


def _write_secret(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")


def main() -> None:
    os.umask(0o077)  # the stores' files, the logs and the keys under the home are the owner's alone
    settings = load_settings()
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logsafe.install()  # the project's records written with control characters escaped, one record one line
    rt = runtime.start(settings)
    kd = keys_dir(settings.home)
    first_start = not (kd / "operator.key").exists()
    if first_start:
        _write_secret(kd / "operator.key", runtime.create_key(None, operator=True, label="local operator"))
        _write_secret(kd / "local.key", runtime.create_key("local", label="first start"))
    state_file(settings.home).write_text(json.dumps({"pid": os.getpid(), "url": rt.url, "first_start": first_start}))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    logging.getLogger("novaberg.daemon").info("stopping")
    runtime.stop(rt)
    state_file(settings.home).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
