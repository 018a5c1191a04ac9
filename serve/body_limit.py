"""A request body limit enforced while the body arrives, before anything parses it: a declared
length over the limit is refused at once, a body that grows past it (chunked) as soon as it does.
Both answer 413 in the API's error shape. A route may tighten its request's limit before it reads
the body (a quota: `grenze(scope).enger(...)`); the bytes that arrive are counted, whatever the
Content-Length said."""
from __future__ import annotations

from fastapi import HTTPException

from core.errors import RefusedError
from serve.asgi_error import send_error


class _TooLarge(RefusedError, HTTPException):
    """Raised while the body arrives; the app's HTTPException handler answers it (413)."""

    def __init__(self, limit: int, typ: str = "too_large", message: str | None = None):
        self.limit, self.typ, self.message = limit, typ, message
        super().__init__(413, detail={"type": typ, "message": message or f"body larger than {limit} bytes"})

    def __reduce__(self):
        return type(self), (self.limit, self.typ, self.message)


SCOPE_KEY = "novaberg.body_limit"
"""Where a request's scope carries its `Grenze` (set by the middleware)."""


class Grenze:
    """The body limit of one request, and what a body past it is answered with; a route may
    tighten it (`enger`) before it reads the body."""

    def __init__(self, limit: int):
        self.limit, self.typ, self.message, self.seen = limit, "too_large", None, 0

    def enger(self, limit: int, typ: str, message: str) -> None:
        """From now on the body is cut at `limit` bytes with 413 `typ` and `message`, if that is
        tighter than the limit already in force."""
        if limit < self.limit:
            self.limit, self.typ, self.message = limit, typ, message

    def zaehlen(self, n: int) -> None:
        self.seen += n
        if self.seen > self.limit:
            raise _TooLarge(self.limit, self.typ, self.message)


def grenze(scope) -> Grenze | None:
    """The request's body limit, where the middleware runs."""
    return scope.get(SCOPE_KEY)


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
        started = False
        scope[SCOPE_KEY] = g = Grenze(limit)

        async def counted():
            msg = await receive()
            if msg["type"] == "http.request":
                g.zaehlen(len(msg.get("body", b"")))
            return msg

        async def watched(msg):
            nonlocal started
            started = started or msg["type"] == "http.response.start"
            await send(msg)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge as e:
            if not started:
                await send_error(send, 413, e.typ, e.message or f"body larger than {e.limit} bytes")


async def _refuse(send, message: str) -> None:
    await send_error(send, 413, "too_large", message, close=True)  # the declared body is not read
