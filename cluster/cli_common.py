"""What the CLI's commands share (cluster/cli.py and its command modules: character_cli,
files_cli): the running daemon, its health, the operator key and a request to the running
system's HTTP API."""
from __future__ import annotations

import json
import os
import socket
import sys

import httpx

from cluster.daemon import keys_dir, state_file
from core.settings import Settings


def hang_up(response: httpx.Response | None) -> None:
    """Close a streamed response's connection at once, even while another thread blocks reading
    it (closing the client alone leaves that read, and the server's stream, open)."""
    stream = response.extensions.get("network_stream") if response is not None else None
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes the reading thread; the server sees the hang-up
        except OSError:
            pass


def read_text(path) -> str | None:
    """The file's text, stripped; None when there is no such file."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return None


def running_daemon(settings: Settings) -> dict | None:
    """What the daemon of `novaberg up` wrote about itself (pid, url, first start); None when none runs."""
    raw = read_text(state_file(settings.home))
    if not raw:
        return None
    info = json.loads(raw)
    try:
        os.kill(info["pid"], 0)
    except ProcessLookupError:
        return None
    return info


def healthy(url: str) -> bool:
    """The system at `url` answers its health route."""
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def operator_key(settings: Settings, args) -> str:
    """`--key`, else the local operator key `novaberg up` wrote; exits when there is neither."""
    key = getattr(args, "key", None) or read_text(keys_dir(settings.home) / "operator.key")
    if not key:
        raise SystemExit("no API key: pass --key or run `novaberg up` first")
    return key


def request(settings: Settings, args, method: str, path: str, **kw) -> httpx.Response | None:
    """One request to the running system's HTTP API with the key of `operator_key`; None (the error
    printed) when nothing runs or the API answered an error."""
    info = running_daemon(settings)
    if not info:
        print("novaberg is not running; start it with `novaberg up`", file=sys.stderr)
        return None
    r = httpx.request(method, f"{info['url']}{path}", headers={"Authorization": f"Bearer {operator_key(settings, args)}",
                                                               **kw.pop("headers", {})}, timeout=120, **kw)
    if r.status_code >= 400:
        try:
            msg = r.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            msg = r.text
        print(f"error {r.status_code}: {msg}", file=sys.stderr)
        return None
    return r
