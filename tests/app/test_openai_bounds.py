"""The OpenAI door's bounds on one request: the conversation a client sends is refused beyond its
count of messages and of characters before it is reconciled, a user or pair at its bound is refused
before the stored history is read, and the names of fields a client adds come back in the
`X-Novaberg-Ignored` header in ASCII, whatever characters they hold."""
import json
import time

import httpx
import pytest
from httpx_sse import connect_sse

from memory import session
from tests.conftest import auth, redis_call

pytestmark = pytest.mark.e2e


def _post(system, key: str, body: dict) -> httpx.Response:
    return httpx.post(f"{system.url}/v1/chat/completions", headers=auth(key), json=body, timeout=180)


def _stored(settings, cid: str) -> list[dict]:
    return redis_call(settings.redis_url, session.load_turns, "alice", cid, 50)


def _gespraech(n: int) -> list[dict]:
    """n messages, the human's and Nova's by turns, the last the human's."""
    return [{"role": "user" if (n - 1 - i) % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]


def test_a_conversation_beyond_the_door_s_bounds_is_refused_before_it_is_reconciled(system, keys, settings, character):
    cid = character("grenze")
    n = settings.openai_max_messages
    r = _post(system, keys["alice"], {"model": cid, "messages": _gespraech(n + 1)})
    assert r.status_code == 413 and r.json()["error"]["type"] == "too_large", r.text
    assert f"at most {n}" in r.json()["error"]["message"]
    # past what the request model takes at all: refused while it is validated, the same way
    from core.settings import OPENAI_MESSAGES_CEILING

    r = _post(system, keys["alice"], {"model": cid, "messages": _gespraech(OPENAI_MESSAGES_CEILING + 1)})
    assert r.status_code == 413 and r.json()["error"]["type"] == "too_large", r.text
    # few messages, but more characters together than the door reconciles
    each = settings.openai_max_chars // 10 + 1
    long = [{"role": "assistant" if i % 2 else "user", "content": "x" * each} for i in range(10)]
    r = _post(system, keys["alice"], {"model": cid, "messages": [*long, {"role": "user", "content": "Und jetzt?"}]})
    assert r.status_code == 413 and "characters" in r.json()["error"]["message"], r.text
    assert _stored(settings, cid) == []
    # at the bound: answered (the server never stored this history: its own stands)
    r = _post(system, keys["alice"], {"model": cid, "messages": _gespraech(n)})
    assert r.status_code == 200 and r.headers["x-novaberg-history"] == "abweichung", r.text
    assert [t["inhalt"] for t in _stored(settings, cid)][:1] == [f"m{n - 1}"]


def test_a_pair_at_its_bound_is_refused_before_its_history_is_read(system, keys, settings, character):
    """The pair's place is taken by leases of turns under way; its stored history is made
    unreadable (a value that is no list): a reconciliation that read it would fail, not answer 429."""
    cid = character("zulassung")
    pair_key = f"inflight:leases:pair:alice:{cid}"

    async def besetzen(r):
        now = time.time()
        await r.zadd(pair_key, {f"lease-{i}": now for i in range(settings.max_turns_queued_per_pair)})
        await r.set(session.session_key("alice", cid), "keine Liste")

    async def aufraeumen(r):
        held = await r.zrange(pair_key, 0, -1)
        await r.delete(pair_key, session.session_key("alice", cid))
        return sorted(x.decode() for x in held)

    redis_call(settings.redis_url, besetzen)
    try:
        r = _post(system, keys["alice"], {"model": cid, "messages": [
            {"role": "user", "content": "Hallo"}, {"role": "assistant", "content": "Hi!"},
            {"role": "user", "content": "Wie geht es dir?"}]})
    finally:
        held = redis_call(settings.redis_url, aufraeumen)
    assert r.status_code == 429 and r.json()["error"]["type"] == "limit", r.text
    assert held == sorted(f"lease-{i}" for i in range(settings.max_turns_queued_per_pair))  # none taken, none left


ODD_NAMES = ("naïve", "名前", "a\r\nInjected: x")


@pytest.mark.parametrize("stream", [False, True])
def test_field_names_of_any_characters_come_back_in_ascii_and_the_turn_is_stored_once(
        system, keys, settings, character, stream):
    cid = character("feld")
    for i, name in enumerate(ODD_NAMES):
        body = {"model": cid, "stream": stream, name: 1, "messages": [{"role": "user", "content": f"Hallo {i}"}]}
        if stream:
            with httpx.Client(base_url=system.url, timeout=180) as c, \
                    connect_sse(c, "POST", "/v1/chat/completions", json=body, headers=auth(keys["alice"])) as es:
                assert es.response.status_code == 200, es.response.read()
                raw = dict(es.response.headers.raw)
                events = [ev.data for ev in es.iter_sse()]
            assert events[-1] == "[DONE]" and not any("error" in json.loads(e) for e in events[:-1])
        else:
            r = _post(system, keys["alice"], body)
            assert r.status_code == 200, r.text
            raw = dict(r.headers.raw)
        value = raw[b"x-novaberg-ignored"]
        assert all(0x20 <= b < 0x7f for b in value), value
        assert not any(k.lower().startswith(b"injected") for k in raw)  # no header of its own
        assert value.decode() == {0: "na\\xefve", 1: "\\u540d\\u524d", 2: "a\\r\\nInjected: x"}[i]
        turns = _stored(settings, cid)
        assert [t["inhalt"] for t in turns if t["rolle"] == "user"] == [f"Hallo {j}" for j in range(i + 1)]
        assert len(turns) == 2 * (i + 1)
