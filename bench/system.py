"""A system for a benchmark: the running one named by --url/--key, or a fresh one on the embedded
defaults under a scratch home, stopped (stores included) when the benchmark ends."""
from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


STARTED: list = []
"""The settings of the systems `running` started in this process, newest last."""


@contextmanager
def running(url: str | None, key: str | None, **overrides) -> Iterator[tuple[str, str]]:
    """(url, operator key) of the system to measure; `overrides` are settings of a fresh one."""
    if url is not None:
        if not key:
            raise SystemExit("--url needs --key (an operator key of that system)")
        yield url, key
        return
    from cluster import runtime
    from core.settings import load_settings

    home = Path(tempfile.mkdtemp(prefix="nbbench-", dir="/tmp"))
    rt = runtime.start(load_settings(home=home, **overrides))
    STARTED.append(rt.settings)
    try:
        yield rt.url, runtime.create_key(None, operator=True)
    finally:
        runtime.stop(rt)
