"""What one key, and one address, may send a minute: request bodies cost the replica their parsing
(a 1 MiB conversation is tens of thousands of messages to read), so the bytes of the bodies that
arrive are counted per presented key and per client address, in fixed one-minute windows. A key or
address past its budget is answered 429 with `Retry-After` before its next body is read, and the
connection is closed with the answer (the refused body is not read off it); a body that crosses the
budget is read to its end (it was admitted). Counted per ingress replica, in
memory, bounded; the address is the connection's, the key the `Authorization` header as sent
(hashed; valid or not)."""
from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from typing import Callable

from serve.asgi_error import send_error

WINDOW_S = 60.0
MAX_ENTRIES = 10_000


class _Buckets:
    """Bytes per name in the current window, at most MAX_ENTRIES names (the least recent go)."""

    def __init__(self):
        self.seen: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def used(self, name: str, now: float) -> tuple[int, float]:
        """Bytes counted in the name's window, and when that window began."""
        begun, n = self.seen.get(name, (now, 0))
        return (0, now) if now - begun >= WINDOW_S else (n, begun)

    def add(self, name: str, n: int, now: float) -> None:
        used, begun = self.used(name, now)
        self.seen[name] = (begun, used + n)
        self.seen.move_to_end(name)
        while len(self.seen) > MAX_ENTRIES:
            self.seen.popitem(last=False)


class BodyBudget:
    """Pure ASGI middleware; `budgets()` gives (bytes per key, bytes per address) a minute."""

    def __init__(self, app, budgets: Callable[[], tuple[int, int]]):
        self.app = app
        self.budgets = budgets
        self.keys, self.addresses = _Buckets(), _Buckets()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        key = hashlib.sha256(headers.get(b"authorization", b"")).hexdigest()[:24]
        address = (scope.get("client") or ("unknown", 0))[0]
        per_key, per_address = self.budgets()
        now = time.monotonic()
        for buckets, name, budget, what in ((self.keys, key, per_key, "this key"),
                                           (self.addresses, address, per_address, "this address")):
            used, begun = buckets.used(name, now)
            if used >= budget:
                wait = max(1, int(WINDOW_S - (now - begun)) + 1)
                return await send_error(send, 429, "limit", f"{what} sent {used} bytes of request bodies within a "
                                        f"minute (at most {budget}); try again in {wait} s", retry_after_s=wait,
                                        close=True)

        async def counted():
            msg = await receive()
            if msg["type"] == "http.request" and msg.get("body"):
                t = time.monotonic()
                self.keys.add(key, len(msg["body"]), t)
                self.addresses.add(address, len(msg["body"]), t)
            return msg

        await self.app(scope, counted, send)
