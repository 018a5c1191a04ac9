"""The same turn_id never runs the chain twice — also when the actor died mid-turn."""
import threading
import uuid

import pytest
import ray

from actors.activation import pair_actor
from memory import pg, session
from tests.conftest import auth, pg_call, redis_call, wait_for

pytestmark = pytest.mark.e2e


def _entries(settings, user, character, turn_id):
    turns = redis_call(settings.redis_url, session.load_turns, user, character, 100)
    return [t for t in turns if t["turn_id"] == turn_id]


def test_same_turn_id_twice_yields_one_stored_turn(client, keys, settings, character):
    character = character("idem")
    url = f"/v1/pairs/alice/{character}/turns"
    first = client.post(url, json={"text": "Guten Morgen", "turn_id": "turn-1"}, headers=auth(keys["alice"]))
    second = client.post(url, json={"text": "Guten Morgen", "turn_id": "turn-1"}, headers=auth(keys["alice"]))
    assert first.status_code == second.status_code == 200
    assert first.json()["replayed"] is False and second.json()["replayed"] is True
    assert second.json()["reply"] == first.json()["reply"]
    assert len(_entries(settings, "alice", character, "turn-1")) == 2
    wait_for(lambda: pg_call(settings.database_url, pg.turn_record, "alice", character, "turn-1"))
    assert pg_call(settings.database_url, pg.count_turn_records, "alice", character) == 1


def test_turn_survives_its_actor_killed_mid_turn(client, keys, settings, system, character):
    character = character("kill")
    url = f"/v1/pairs/alice/{character}/turns"
    turn_id = uuid.uuid4().hex
    # a long message keeps the turn busy in the LLM for a while
    text = "Ich erzaehle dir von meinem Tag. " + " ".join(f"Punkt {i}: es war ein Moment." for i in range(120))
    h = auth(keys["alice"])
    assert client.get(f"/v1/pairs/alice/{character}/status", headers=h).status_code == 200
    result = {}

    def post():
        import httpx

        with httpx.Client(base_url=system.url, timeout=300) as c:
            result["r"] = c.post(url, json={"text": text, "turn_id": turn_id}, headers=h)

    t = threading.Thread(target=post)
    t.start()
    # read-only calls are answered while the turn runs; wait until the turn is under way
    op = auth(keys["operator"])  # the actor's process id is shown to operators alone
    status = wait_for(lambda: (s := client.get(f"/v1/pairs/alice/{character}/status", headers=op).json())["busy"]
                      and s, timeout=60, interval=0.05)
    actor = pair_actor(settings, "alice", character)
    ray.kill(actor, no_restart=False)  # a crash: Ray restarts the actor
    t.join(timeout=300)
    r = result["r"]
    assert r.status_code == 200, r.text
    assert r.json()["turn_id"] == turn_id and r.json()["reply"].strip()
    after = client.get(f"/v1/pairs/alice/{character}/status", headers=op).json()
    assert after["pid"] != status["pid"]  # it really was restarted

    again = client.post(url, json={"text": text, "turn_id": turn_id}, headers=h)
    assert again.status_code == 200
    assert again.json()["replayed"] is True and again.json()["reply"] == r.json()["reply"]
    assert len(_entries(settings, "alice", character, turn_id)) == 2
    wait_for(lambda: pg_call(settings.database_url, pg.turn_record, "alice", character, turn_id))
    assert pg_call(settings.database_url, pg.count_turn_records, "alice", character) == 1
