"""Request bodies cost their parsing, so what one key and one address may send a minute is
bounded (serve/body_budget.py): past its budget a key gets 429 with Retry-After before its next
body is read — the app is not reached — while another key, and the same key after the minute,
pass; an address past its budget is refused for every key; the memory is bounded."""
import asyncio

from serve import body_budget
from serve.body_budget import BodyBudget


class _App:
    """Reads the whole body, as a route that parses it would."""

    def __init__(self):
        self.reached = 0

    async def __call__(self, scope, receive, send):
        self.reached += 1
        while (msg := await receive())["more_body"]:
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def _post(mw, key: str, size: int, address: str = "10.0.0.1") -> tuple[int, dict]:
    sent, parts = [], [b"x" * (size // 2), b"x" * (size - size // 2)]

    async def send(msg):
        sent.append(msg)

    async def receive():
        body = parts.pop(0) if parts else b""
        return {"type": "http.request", "body": body, "more_body": bool(parts)}

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "client": (address, 5000),
             "headers": [(b"authorization", f"Bearer {key}".encode())]}
    asyncio.run(mw(scope, receive, send))
    return sent[0]["status"], dict(sent[0]["headers"])


def _budget(monkeypatch, per_key: int, per_address: int):
    clock = [500.0]
    monkeypatch.setattr(body_budget.time, "monotonic", lambda: clock[0])
    app = _App()
    return app, BodyBudget(app, budgets=lambda: (per_key, per_address)), clock


def test_a_key_past_its_bytes_is_refused_before_its_body_is_read_until_the_minute_passes(monkeypatch):
    app, mw, clock = _budget(monkeypatch, 3000, 1_000_000)
    assert [_post(mw, "angreifer", 1000)[0] for _ in range(3)] == [200, 200, 200]
    status, headers = _post(mw, "angreifer", 1000)
    assert status == 429 and 1 <= int(headers[b"retry-after"]) <= 61
    assert headers[b"connection"] == b"close"  # the refused body is left unread on a connection that ends
    assert app.reached == 3  # the refused body was never handed to the app
    assert _post(mw, "ehrlich", 1000)[0] == 200  # another key is not affected
    clock[0] += body_budget.WINDOW_S
    assert _post(mw, "angreifer", 1000)[0] == 200


def test_an_address_past_its_bytes_is_refused_whatever_key_it_presents(monkeypatch):
    app, mw, clock = _budget(monkeypatch, 1_000_000, 5000)
    for i in range(5):
        assert _post(mw, f"schluessel-{i}", 1000)[0] == 200
    assert _post(mw, "noch-einer", 10)[0] == 429
    assert _post(mw, "noch-einer", 10, address="10.0.0.2")[0] == 200


def test_the_buckets_are_bounded(monkeypatch):
    app, mw, clock = _budget(monkeypatch, 1_000_000, 1_000_000_000)
    for i in range(body_budget.MAX_ENTRIES + 50):
        _post(mw, f"k{i}", 2)
    assert len(mw.keys.seen) == body_budget.MAX_ENTRIES
