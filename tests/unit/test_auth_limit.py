"""Refused keys are not free to try (serve/auth_limit.py): beyond the allowed 401s per address and
minute, 429 before the key is looked up; another address is not affected; the minute passes."""
import asyncio

from serve import auth_limit
from serve.auth_limit import AuthFailureLimit


class _App:
    """Answers 401 unless the path is /ok; counts the requests that reached it."""

    def __init__(self):
        self.reached = 0

    async def __call__(self, scope, receive, send):
        self.reached += 1
        status = 200 if scope["path"] == "/ok" else 401
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def _call(mw, address: str, path: str = "/v1/characters") -> int:
    sent = []

    async def send(msg):
        sent.append(msg)

    async def receive():
        return {"type": "http.request", "body": b""}

    asyncio.run(mw({"type": "http", "path": path, "client": (address, 5000)}, receive, send))
    return sent[0]["status"]


def test_refusals_beyond_the_limit_are_answered_429_before_the_key(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(auth_limit.time, "monotonic", lambda: clock[0])
    app = _App()
    mw = AuthFailureLimit(app, per_minute=lambda: 3)
    assert [_call(mw, "203.0.113.9") for _ in range(3)] == [401, 401, 401]
    assert _call(mw, "203.0.113.9") == 429 and _call(mw, "203.0.113.9", "/ok") == 429
    assert app.reached == 3  # the fourth and fifth never reached a key lookup
    assert _call(mw, "198.51.100.7") == 401  # another address
    clock[0] += 61
    assert _call(mw, "203.0.113.9", "/ok") == 200  # the minute has passed
