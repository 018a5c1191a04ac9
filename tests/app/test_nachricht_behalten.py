"""Nothing the person says is lost: a transient engine error is asked again before a node fails,
and when Nova's chain fails all the same the human's message is committed on its own (session,
turn record, salience); the same turn_id then brings the reply and stores his message once."""
import uuid

import pytest

from actors.background import erledigt_key
from memory import pg
from tests.app.conftest import AUSFALL, AUSFALL_OA, AUSFALL_SSE, WACKEL
from tests.app.test_e2e_idempotency import _entries
from tests.conftest import auth, pg_call, redis_call, wait_for

pytestmark = pytest.mark.e2e


def test_a_transient_engine_error_is_asked_again(client, keys, settings, character):
    ch = character("wackel")
    turn_id = uuid.uuid4().hex
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": f"{WACKEL} Hallo du", "turn_id": turn_id},
                    headers=auth(keys["alice"]))
    assert r.status_code == 200, r.text  # the responder's first call answered HTTP 500
    assert r.json()["reply"].strip()
    assert [e["rolle"] for e in _entries(settings, "alice", ch, turn_id)] == ["user", "assistant"]


def test_a_failed_chain_keeps_the_message_and_the_same_turn_id_answers(client, keys, settings, character):
    ch = character("ausfall")
    url, h = f"/v1/pairs/alice/{ch}/turns", auth(keys["alice"])
    turn_id = uuid.uuid4().hex
    text = f"{AUSFALL} Ich heisse Tom und segle gern."
    r = client.post(url, json={"text": text, "turn_id": turn_id}, headers=h)
    assert r.status_code == 502, r.text
    err = r.json()["error"]
    assert err["type"] == "turn_failed" and err["node"] == "responder"
    assert err["message_kept"] is True and err["turn_id"] == turn_id and turn_id in err["message"]
    # the human's turn is committed on its own: his entry, the turn's record, salience of his words
    kept = _entries(settings, "alice", ch, turn_id)
    assert [(e["rolle"], e["inhalt"]) for e in kept] == [("user", text)]
    record = wait_for(lambda: pg_call(settings.database_url, pg.turn_record, "alice", ch, turn_id), timeout=60)
    assert record["user_text"] == text and record["reply"] == ""
    wait_for(lambda: redis_call(settings.redis_url, _exists, erledigt_key("alice", ch, turn_id) + ":mensch"),
             timeout=60)
    # a second failure report for the same turn_id would double nothing either; the engine answers now
    again = client.post(url, json={"text": text, "turn_id": turn_id}, headers=h)
    assert again.status_code == 200, again.text
    reply = again.json()["reply"]
    assert reply.strip() and again.json()["turn_id"] == turn_id
    entries = _entries(settings, "alice", ch, turn_id)
    assert [(e["rolle"], e["inhalt"]) for e in entries] == [("user", text), ("assistant", reply)]
    # the durable record takes the reply; one record for the turn
    wait_for(lambda: (pg_call(settings.database_url, pg.turn_record, "alice", ch, turn_id) or {}).get("reply") == reply,
             timeout=60)
    assert pg_call(settings.database_url, pg.count_turn_records, "alice", ch) == 1
    # and once answered, the same turn_id replays the stored reply
    third = client.post(url, json={"text": text, "turn_id": turn_id}, headers=h)
    assert third.status_code == 200 and third.json()["replayed"] is True and third.json()["reply"] == reply
    assert len(_entries(settings, "alice", ch, turn_id)) == 2


def test_openai_door_says_the_message_is_kept(system, client, keys, settings, character):
    from openai import APIStatusError, OpenAI

    ch = character("ausfall-oa")
    turn_id = uuid.uuid4().hex
    oa = OpenAI(base_url=f"{system.url}/v1", api_key=keys["alice"], timeout=180, max_retries=0)
    with pytest.raises(APIStatusError) as e:
        oa.chat.completions.create(model=ch, messages=[{"role": "user", "content": f"{AUSFALL_OA} Hallo"}],
                                   extra_headers={"X-Turn-Id": turn_id})
    if e.value.status_code != 502:
        pytest.fail(f"expected 502, got {e.value.status_code}: {e.value.body}")
    body = e.value.body if isinstance(e.value.body, dict) else {}
    err = body.get("error", body)
    assert err["message_kept"] is True and err["turn_id"] == turn_id


def test_the_native_stream_says_the_message_is_kept(client, keys, settings, character):
    """The stream's `error` event carries the same body as a plain request's 502."""
    from tests.app.test_shown_is_stored import _native

    ch = character("ausfall-sse")
    turn_id, events = _native(client, keys["alice"], "alice", ch, f"{AUSFALL_SSE} Hallo")
    errors = [d for k, d in events if k == "error"]
    assert [k for k, _ in events if k in ("token", "final")] == [] and len(errors) == 1, events
    err = errors[0]["error"]
    assert err["type"] == "turn_failed" and err["message_kept"] is True and err["turn_id"] == turn_id
    assert [e["rolle"] for e in _entries(settings, "alice", ch, turn_id)] == ["user"]


async def _exists(r, key):
    return await r.exists(key)
