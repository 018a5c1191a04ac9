"""Refused keys are not free to try, and nobody's failures lock a valid key out.

Requests answered 401 are counted per client address and presented key (its first
`PREFIX_CHARS` characters; one bucket for a missing key), and per address over all keys. Beyond
`per_minute` failures of one (address, key prefix), or `per_address` failures of one address, a
request is answered 429 instead of 401 until the minute has passed. The limit never refuses a
valid key: it answers only requests that authentication refused, and — the cheap path, before the
app and without a lookup — a key this replica's authentication already refused within its cache
time. Any other key gets the one lookup it would have had anyway; a missing key none.

Counted per ingress replica, in memory, in fixed one-minute windows, for at most `MAX_BUCKETS`
buckets of each kind (the least recently failed go first); the address is the connection's (a
forwarded-for header is the client's own word and is not read)."""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable, Hashable

from serve.asgi_error import send_error

WINDOW_S = 60.0
MAX_BUCKETS = 10_000
PREFIX_CHARS = 8
"""How much of a presented key names its bucket: a key's fixed `nbk_`/`nbo_` and 4 random characters."""


def presented_key(scope) -> str | None:
    """The bearer key of a request as authentication reads it (the first Authorization header)."""
    for name, value in scope.get("headers") or ():
        if name.lower() == b"authorization":
            parts = value.decode("latin-1").split(None, 1)
            if len(parts) == 2 and parts[0].lower() == "bearer" and parts[1].strip():
                return parts[1].strip()
            return None
    return None


class _Windows:
    """Failures per bucket in fixed windows of `WINDOW_S`, for at most `MAX_BUCKETS` buckets."""

    def __init__(self):
        self.seen: OrderedDict[Hashable, list[float]] = OrderedDict()  # bucket -> [window start, failures]

    def wait(self, bucket: Hashable, limit: int, now: float) -> int:
        """Seconds until the window of `bucket` ends once it holds `limit` failures; else 0."""
        w = self.seen.get(bucket)
        if w is None or now - w[0] > WINDOW_S or w[1] < limit:
            return 0
        return max(1, int(WINDOW_S - (now - w[0])) + 1)

    def count(self, bucket: Hashable, now: float) -> None:
        w = self.seen.get(bucket)
        if w is None or now - w[0] > WINDOW_S:
            w = self.seen[bucket] = [now, 0]
        w[1] += 1
        self.seen.move_to_end(bucket)
        while len(self.seen) > MAX_BUCKETS:
            self.seen.popitem(last=False)


class AuthFailureLimit:
    """Pure ASGI middleware. `per_minute()`: the failed authentications one (address, key prefix)
    may have a minute; `per_address()`: those of one address over all keys (never fewer than
    `per_minute()`); `known(key)`: what authentication knows of a key without a lookup — True
    valid, False refused, None not known."""

    def __init__(self, app, per_minute: Callable[[], int], per_address: Callable[[], int] | None = None,
                 known: Callable[[str], bool | None] | None = None):
        self.app = app
        self.per_minute = per_minute
        self.per_address = per_address or per_minute
        self.known = known or (lambda key: None)
        self.by_key = _Windows()
        self.by_address = _Windows()

    def _wait(self, address: str, prefix: str, now: float, beyond: int = 0) -> int:
        """Seconds to wait when (address, prefix) or the address holds its limit of failures (+ `beyond`)."""
        per_minute = self.per_minute()
        return max(self.by_key.wait((address, prefix), per_minute + beyond, now),
                   self.by_address.wait(address, max(self.per_address(), per_minute) + beyond, now))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        address = (scope.get("client") or ("unknown", 0))[0]
        key = presented_key(scope)
        prefix = key[:PREFIX_CHARS] if key else ""
        wait = self._wait(address, prefix, time.monotonic())
        if wait and key is not None and self.known(key) is False:
            return await _refuse(send, wait)  # a key this replica refused already: no lookup, no app
        replaced = False

        async def watched(msg):
            nonlocal replaced
            if msg["type"] == "http.response.start" and msg["status"] == 401:
                now = time.monotonic()
                self.by_key.count((address, prefix), now)
                self.by_address.count(address, now)
                wait = self._wait(address, prefix, now, beyond=1)  # the failure that reaches a limit is a 401
                if wait:
                    replaced = True
                    return await _refuse(send, wait)
            if not replaced:
                await send(msg)

        await self.app(scope, receive, watched)


async def _refuse(send, wait: int) -> None:
    await send_error(send, 429, "limit", "too many requests with unknown or missing API keys from this address; "
                     f"try again in {wait} s", retry_after_s=wait)
