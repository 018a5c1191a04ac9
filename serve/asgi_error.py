"""An error in the API's shape (`{"error": {"type", "message"}}`), sent by a pure ASGI middleware
that answers before (or instead of) the app."""
from __future__ import annotations

import json


async def send_error(send, status: int, kind: str, message: str, retry_after_s: int | None = None,
                     close: bool = False) -> None:
    """`close`: the connection ends with the answer — a refused body still on its way is not read."""
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after_s is not None:
        headers.append((b"retry-after", str(retry_after_s).encode()))
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
