"""Bounded everything, with clear errors — each finding of the attack run, tested against the
running app: control characters refused at the door, OpenAI content parts validated, bodies
limited before they are parsed, status and history without making actors, turns in flight
bounded per user and per pair, keys revocable."""
import threading
import time
import uuid

import pytest

from actors.activation import pair_actor
from cluster import cli
from memory import pg, session
from tests.conftest import auth, pg_call, redis_call
from tests.app.conftest import cli_against

pytestmark = pytest.mark.e2e


def _stored(settings, user, ch):
    return (redis_call(settings.redis_url, session.count_turns, user, ch),
            pg_call(settings.database_url, pg.count_turn_records, user, ch))


def _actor_exists(settings, user, ch) -> bool:
    try:
        pair_actor(settings, user, ch)
        return True
    except ValueError:
        return False


def test_control_characters_are_refused_at_the_door(client, keys, settings, character):
    ch = character("nul")
    h, op = auth(keys["alice"]), auth(keys["operator"])
    bad = [
        client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Hallo\x00Welt"}, headers=h),
        client.post("/v1/chat/completions", json={"model": ch, "messages": [{"role": "user", "content": "a\x00b"}]},
                    headers=h),
        client.post("/v1/chat/completions", headers=h, json={
            "model": ch, "messages": [{"role": "user", "content": [{"type": "text", "text": "a\x07b"}]}]}),
        client.post(f"/v1/pairs/alice/{ch}/events", json={"kind": "impulse", "eigener_gedanke": "x\x00"}, headers=op),
    ]
    for r in bad:
        assert r.status_code == 422 and "control characters" in r.json()["error"]["message"], r.text
    ok = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Zeile eins\nZeile\tzwei"}, headers=h)
    assert ok.status_code == 200, ok.text
    assert _stored(settings, "alice", ch)[0] == 2


def test_openai_content_parts_are_validated_not_500(client, keys, character):
    ch = character("parts")
    h = auth(keys["alice"])
    for content in ([{"type": "text", "text": 5}], [{"type": "image_url", "image_url": {"url": "x"}}], [{"text": "x"}]):
        r = client.post("/v1/chat/completions", json={"model": ch, "messages": [{"role": "user", "content": content}]},
                        headers=h)
        assert r.status_code == 422, (content, r.status_code, r.text)
    r = client.post("/v1/chat/completions", headers=h, json={
        "model": ch, "messages": [{"role": "user", "content": [{"type": "text", "text": "Hallo "}, {"type": "text", "text": "du"}]}]})
    assert r.status_code == 200, r.text


def test_bodies_are_limited_before_parsing(client, keys, settings):
    h = {**auth(keys["alice"]), "Content-Type": "application/json"}
    big = b'{"text": "' + b"x" * (settings.max_body_bytes + 10) + b'"}'
    r = client.post("/v1/pairs/alice/nova/turns", content=big, headers=h)
    assert r.status_code == 413 and r.json()["error"]["type"] == "too_large"

    def chunked():  # no declared length: refused as soon as it passes the limit
        for _ in range(settings.max_body_bytes // 65536 + 4):
            yield b"x" * 65536

    r = client.post("/v1/pairs/alice/nova/turns", content=chunked(), headers=h)
    assert r.status_code == 413, (r.status_code, r.text)


def test_status_and_history_make_no_pair_actor(client, keys, settings):
    user = f"looker-{uuid.uuid4().hex[:6]}"
    h = auth(keys["operator"])
    for _ in range(40):
        assert client.get(f"/v1/pairs/{user}/nova/status", headers=h).json()["live"] is False
        assert client.get(f"/v1/pairs/{user}/nova/turns", headers=h).json()["turns"] == []
    assert not _actor_exists(settings, user, "nova")
    assert client.post(f"/v1/pairs/{user}/nova/turns", json={"text": "Hallo"}, headers=h).status_code == 200
    st = client.get(f"/v1/pairs/{user}/nova/status", headers=h).json()
    assert st["live"] is True and st["turns_here"] == 1


def test_turns_in_flight_are_bounded_per_pair(system, keys, settings, character):
    import httpx

    ch = character("flood")
    h = auth(keys["alice"])
    n = settings.max_turns_queued_per_pair + 3
    results = []

    def post(i):
        with httpx.Client(base_url=system.url, timeout=300) as c:
            results.append(c.post(f"/v1/pairs/alice/{ch}/turns", json={"text": f"Nachricht {i}"}, headers=h))

    threads = [threading.Thread(target=post, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
        time.sleep(0.02)
    for t in threads:
        t.join(300)
    codes = sorted(r.status_code for r in results)
    refused = [r for r in results if r.status_code == 429]
    assert codes.count(200) >= settings.max_turns_queued_per_pair and refused, codes
    assert all(r.headers["retry-after"] == "2" and "turns waiting" in r.json()["error"]["message"] for r in refused)
    assert _stored(settings, "alice", ch)[0] == 2 * codes.count(200)  # what was refused left nothing
    # the bound is given back: the pair takes turns again
    assert httpx.post(f"{system.url}/v1/pairs/alice/{ch}/turns", json={"text": "Noch da?"}, headers=h,
                      timeout=120).status_code == 200
    # admission and arrival are one step: a refused turn drew no arrival number and holds no lease
    from redis import Redis

    r = Redis.from_url(settings.redis_url)
    assert int(r.get(f"pair:seq:alice:{ch}")) == codes.count(200) + 1
    assert r.zcard(f"inflight:leases:pair:alice:{ch}") == 0


def _hang_up(url: str, path: str, stream: bool, text: str, headers: dict) -> int:
    """Send a turn and leave: a stream as soon as its answer started, a plain request after 0.5 s.
    The status, or 0 when the client left before it came."""
    import httpx

    with httpx.Client(base_url=url, timeout=30 if stream else 0.5) as c:
        try:
            if stream:
                with c.stream("POST", path, params={"stream": "true"}, json={"text": text}, headers=headers) as r:
                    return r.status_code
            return c.post(path, json={"text": text}, headers=headers).status_code
        except httpx.TimeoutException:
            return 0


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_hangs_up_frees_no_place_while_its_turn_runs(system, keys, settings, character, stream):
    """40 turns of one key, each left by its client at once: the admission lease stays with the
    turn until the pair actor has finished it, so the bound answers 429 and no more turns run at
    once than it allows; every admitted turn still ends, exactly once."""
    from redis import Redis

    r = Redis.from_url(settings.redis_url)
    ch, bound = character("drop"), settings.max_turns_queued_per_pair
    leases = f"inflight:leases:pair:alice:{ch}"
    codes, held = [], []
    for i in range(40):
        codes.append(_hang_up(system.url, f"/v1/pairs/alice/{ch}/turns", stream, f"Weg {i}", auth(keys["alice"])))
        held.append(r.zcard(leases))
    admitted = int(r.get(f"pair:seq:alice:{ch}"))  # an arrival number is drawn only with an admission
    assert codes.count(429) > 0 and max(held) <= bound, (codes, held)
    assert max(held) >= 1  # places stay taken after their clients left
    assert admitted <= bound + 10, (admitted, codes)  # the turns that ran, not the 40 that were sent
    deadline = time.monotonic() + 180
    while r.zcard(leases) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert r.zcard(leases) == 0  # given back once the turns ended
    assert _stored(settings, "alice", ch) == (2 * admitted, admitted)


def test_keys_can_be_revoked(client, keys, monkeypatch, capsys, system):
    op = auth(keys["operator"])
    user = f"rev-{uuid.uuid4().hex[:6]}"
    k1 = client.post("/v1/operator/keys", json={"user_id": user}, headers=op).json()["api_key"]
    k2 = client.post("/v1/operator/keys", json={"user_id": user}, headers=op).json()["api_key"]
    assert client.get(f"/v1/pairs/{user}/nova/turns", headers=auth(k1)).status_code == 200
    r = client.post("/v1/operator/keys/revoke", json={"api_key": k1}, headers=op)
    assert r.status_code == 200 and r.json() == {"revoked": 1}
    assert client.get(f"/v1/pairs/{user}/nova/turns", headers=auth(k1)).status_code == 401
    assert client.post("/v1/operator/keys/revoke", json={"api_key": k1}, headers=op).status_code == 404
    assert client.post("/v1/operator/keys/revoke", json={"api_key": k2}, headers=auth(k2)).status_code == 403
    assert client.post("/v1/operator/keys/revoke", json={}, headers=op).status_code == 422
    # the CLI revokes every key of a user
    cli_against(monkeypatch, system, keys["operator"])
    assert cli.main(["key", "revoke", "--user", user]) == 0
    assert "revoked 1 key(s)" in capsys.readouterr().out
    assert client.get(f"/v1/pairs/{user}/nova/turns", headers=auth(k2)).status_code == 401


def test_keys_are_listed_expire_and_an_operator_key_is_revoked_by_its_id(client, keys, monkeypatch, capsys, system,
                                                                         settings):
    """Every key can be listed (never its secret), may carry an expiry, and any key — an operator's
    too — is revoked by its id."""
    op = auth(keys["operator"])
    cli_against(monkeypatch, system, keys["operator"])
    assert cli.main(["key", "create", "--operator", "--expires-days", "30"]) == 0
    second_op = capsys.readouterr().out.strip()
    assert second_op.startswith("nbo_") and client.get("/v1/operator/keys", headers=auth(second_op)).status_code == 200
    listed = client.get("/v1/operator/keys", headers=op).json()["keys"]
    mine = listed[0]  # newest first
    assert mine["is_operator"] and mine["active"] and mine["expires_at"] and second_op not in str(listed)
    assert cli.main(["key", "list"]) == 0
    assert f"{mine['id']}\toperator\tactive" in capsys.readouterr().out
    assert client.post("/v1/operator/keys", json={"operator": True, "user_id": "x"}, headers=op).status_code == 422
    # revoked by its id: stops at once on this replica
    assert cli.main(["key", "revoke", "--id", str(mine["id"])]) == 0
    assert client.get("/v1/operator/keys", headers=auth(second_op)).status_code == 401
    # an expired key does not work (its expiry moved into the past, as time would, before its first use)
    user = f"exp-{uuid.uuid4().hex[:6]}"
    k = client.post("/v1/operator/keys", json={"user_id": user, "expires_in_days": 1}, headers=op).json()["api_key"]
    pg_call(settings.database_url, _expire_keys_of, user)
    assert client.get(f"/v1/pairs/{user}/nova/turns", headers=auth(k)).status_code == 401
    assert [x["active"] for x in client.get("/v1/operator/keys", headers=op).json()["keys"] if x["user_id"] == user] \
        == [False]


async def _expire_keys_of(pool, user_id):
    async with pool.connection() as conn:
        await conn.execute("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE user_id = %s",
                           (user_id,))
