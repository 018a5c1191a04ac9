"""A request body limit enforced while the body arrives, before anything parses it: a declared
length over the limit is refused at once, a body that grows past it (chunked) as soon as it does.
Both answer 413 in the API's error shape."""
from __future__ import annotations

from fastapi import HTTPException

from core.errors import RefusedError
from serve.asgi_error import send_error


class _TooLarge(RefusedError, HTTPException):
    """Raised while the body arrives; the app's HTTPException handler answers it (413)."""

    def __init__(self, limit: int):
        super().__init__(413, detail={"type": "too_large", "message": f"body larger than {limit} bytes"})


class BodyLimit:
    """Pure ASGI middleware; `limits(path) -> bytes` gives the limit of a route."""

    def __init__(self, app, limits):
        self.app = app
        self.limits = limits

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        limit = self.limits(scope.get("path", ""))
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            return await _refuse(send, f"body of {int(declared)} bytes; at most {limit}")
        seen = 0
        started = False

        async def counted():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    raise _TooLarge(limit)
            return msg

        async def watched(msg):
            nonlocal started
            started = started or msg["type"] == "http.response.start"
            await send(msg)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not started:
                await _refuse(send, f"body larger than {limit} bytes")


async def _refuse(send, message: str) -> None:
    await send_error(send, 413, "too_large", message)
