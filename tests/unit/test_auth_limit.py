"""Refused keys are not free to try (serve/auth_limit.py), and nobody's failures lock a valid key
out: beyond the allowed 401s per (address, presented key prefix), or per address over all keys, a
key that is not valid is answered 429; a key already refused without a lookup or the app; a valid
key always passes; another address is not affected; the minute passes; the memory is bounded."""
import asyncio

from serve import auth_limit
from serve.auth_limit import AuthFailureLimit

VALID = "nbk_VALIDabcdefghijklmnop"


class _App:
    """Authenticates like the ingress: a missing key 401 without a lookup; a key refused before
    401 from the cache; any other key looked up once (valid: 200, else 401 and remembered)."""

    def __init__(self, valid=(VALID,)):
        self.valid, self.cached, self.refused = set(valid), set(), set()
        self.reached = self.lookups = 0

    def known(self, key: str) -> bool | None:
        return True if key in self.cached else False if key in self.refused else None

    async def __call__(self, scope, receive, send):
        self.reached += 1
        key = auth_limit.presented_key(scope)
        if key is not None and self.known(key) is None:
            self.lookups += 1
            (self.cached if key in self.valid else self.refused).add(key)
        status = 200 if key in self.cached else 401
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def _call(mw, address: str, key: str | None = None) -> int:
    sent = []

    async def send(msg):
        sent.append(msg)

    async def receive():
        return {"type": "http.request", "body": b""}

    headers = [(b"authorization", f"Bearer {key}".encode())] if key else []
    scope = {"type": "http", "path": "/v1/characters", "client": (address, 5000), "headers": headers}
    asyncio.run(mw(scope, receive, send))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    return sent[0]["status"]


def _limit(monkeypatch, per_minute: int, per_address: int):
    clock = [1000.0]
    monkeypatch.setattr(auth_limit.time, "monotonic", lambda: clock[0])
    app = _App()
    return app, AuthFailureLimit(app, per_minute=lambda: per_minute, per_address=lambda: per_address,
                                 known=app.known), clock


def test_refusals_beyond_the_limit_are_answered_429_and_a_refused_key_without_a_lookup(monkeypatch):
    app, mw, clock = _limit(monkeypatch, 3, 100)
    assert [_call(mw, "203.0.113.9", "nbk_wrong") for _ in range(3)] == [401, 401, 401]
    assert app.lookups == 1  # the key was looked up once, then refused from the cache
    reached = app.reached
    assert _call(mw, "203.0.113.9", "nbk_wrong") == 429
    assert app.reached == reached  # the cheap path: the refused key never reached the app
    assert [_call(mw, "203.0.113.9") for _ in range(3)] == [401, 401, 401]  # a missing key: a bucket of its own
    assert _call(mw, "203.0.113.9") == 429
    assert _call(mw, "198.51.100.7", "nbk_wrong") == 401  # another address
    clock[0] += 61
    assert _call(mw, "203.0.113.9", "nbk_wrong") == 401  # the minute has passed


def test_a_valid_key_passes_after_1000_failures_from_its_address(monkeypatch):
    app, mw, _ = _limit(monkeypatch, 3, 30)
    codes = [_call(mw, "203.0.113.9", f"nbk_{i % 7}guess{i}") for i in range(500)]
    codes += [_call(mw, "203.0.113.9") for _ in range(500)]
    assert codes.count(401) < 40 and set(codes) == {401, 429}
    assert _call(mw, "203.0.113.9", VALID) == 200  # looked up: valid, whatever the address did
    assert _call(mw, "203.0.113.9", VALID) == 200  # and from the cache


def test_one_prefix_does_not_lock_another_key_out_below_the_address_cap_and_never_a_valid_one(monkeypatch):
    app, mw, clock = _limit(monkeypatch, 3, 10)
    attacker = VALID[:auth_limit.PREFIX_CHARS]  # the attacker even guesses with the valid key's prefix
    assert [_call(mw, "203.0.113.9", f"{attacker}x{i}") for i in range(5)] == [401, 401, 401, 429, 429]
    assert _call(mw, "203.0.113.9", VALID) == 200  # the same prefix, valid (a lookup): passes
    other = [_call(mw, "203.0.113.9", f"nbk_{i}other") for i in range(6)]  # 6 prefixes
    assert other == [401, 401, 401, 401, 401, 429]  # the address's 10th failure was the last 401
    assert _call(mw, "203.0.113.9", "nbk_THIRDkey") == 429  # beyond the address cap: any key not valid
    assert _call(mw, "203.0.113.9", VALID) == 200  # never a valid one
    assert _call(mw, "198.51.100.7", "nbk_THIRDkey") == 401  # another address
    clock[0] += 61
    assert _call(mw, "203.0.113.9", "nbk_FOURTHkey") == 401


def test_the_counters_are_bounded(monkeypatch):
    monkeypatch.setattr(auth_limit, "MAX_BUCKETS", 50)
    app, mw, _ = _limit(monkeypatch, 3, 10)
    for i in range(300):
        _call(mw, f"10.0.{i // 250}.{i % 250}", f"nbk_{i:04d}abc")
    assert len(mw.by_key.seen) == 50 and len(mw.by_address.seen) == 50
