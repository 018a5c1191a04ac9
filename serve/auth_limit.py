"""Refused keys are not free to try: a client address whose requests were answered 401 more than
`per_minute` times within a minute is answered 429 before its key is looked up, until the minute
has passed. Counted per ingress replica, in memory, bounded; the address is the connection's
(a forwarded-for header is the client's own word and is not read)."""
from __future__ import annotations

import time
from collections import OrderedDict, deque
from typing import Callable

from serve.asgi_error import send_error

WINDOW_S = 60.0
MAX_ADDRESSES = 10_000


class AuthFailureLimit:
    """Pure ASGI middleware; `per_minute()` gives the allowed failed authentications per address."""

    def __init__(self, app, per_minute: Callable[[], int]):
        self.app = app
        self.per_minute = per_minute
        self.failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, address: str, now: float) -> deque[float]:
        seen = self.failures.get(address)
        if seen is None:
            return deque()
        while seen and now - seen[0] > WINDOW_S:
            seen.popleft()
        return seen

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        address = (scope.get("client") or ("unknown", 0))[0]
        now = time.monotonic()
        seen = self._recent(address, now)
        if len(seen) >= self.per_minute():
            wait = max(1, int(WINDOW_S - (now - seen[0])) + 1)
            return await _refuse(send, wait)

        async def watched(msg):
            if msg["type"] == "http.response.start" and msg["status"] == 401:
                self.failures.setdefault(address, seen).append(time.monotonic())
                self.failures.move_to_end(address)
                while len(self.failures) > MAX_ADDRESSES:
                    self.failures.popitem(last=False)
            await send(msg)

        await self.app(scope, receive, watched)


async def _refuse(send, wait: int) -> None:
    await send_error(send, 429, "limit", "too many requests with unknown or missing API keys from this address; "
                     f"try again in {wait} s", retry_after_s=wait)
