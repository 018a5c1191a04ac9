"""Actors come and go; the stores keep what matters."""

import json
import time

import pytest
import ray
from redis import Redis

from actors.background import LOG_SEQ_OFFSET, erledigt_key
from actors.activation import pair_actor
from actors.worker import worker_name
from memory import outbox, pg
from tests.conftest import auth, pg_call, wait_for

pytestmark = pytest.mark.e2e


def _gone(settings, user, character):
    """No live actor serves the pair: its registry entry went (an evicted actor gives it up)."""
    try:
        pair_actor(settings, user, character)
        return False
    except ValueError:
        return True


def test_evicted_pair_actor_comes_back_with_its_history(client, keys, settings, character):
    character = character("evict")
    h = auth(keys["alice"])
    r = client.post(f"/v1/pairs/alice/{character}/turns", json={"text": "Merk dir: mein Hund heisst Bello."},
                    headers=h)
    assert r.status_code == 200
    assert not _gone(settings, "alice", character)
    wait_for(lambda: _gone(settings, "alice", character), timeout=settings.pair_idle_timeout_s + 20)
    hist = client.get(f"/v1/pairs/alice/{character}/turns", headers=h)
    assert hist.status_code == 200
    assert [t["inhalt"] for t in hist.json()["turns"]][0] == "Merk dir: mein Hund heisst Bello."
    r2 = client.post(f"/v1/pairs/alice/{character}/turns", json={"text": "Wie heisst mein Hund?"}, headers=h)
    assert r2.status_code == 200
    rows = wait_for(lambda: pg_call(settings.database_url, pg.pipeline_rows, "alice", character, r2.json()["turn_id"]))
    verlauf = next(x for x in rows if x["entscheidung"] == "enricher.verlauf")
    assert verlauf["inputs"]["gelesen"] == 2  # rebuilt from the stores


def _holder(r, turn_id: str) -> str | None:
    """The worker that holds this turn's background job (delivered to it, not acknowledged)."""
    for p in r.xpending_range(outbox.OUTBOX_STREAM, outbox.GROUP, min="-", max="+", count=100):
        for _id, fields in r.xrange(outbox.OUTBOX_STREAM, min=p["message_id"], max=p["message_id"]):
            job = json.loads(fields[b"job"])
            if job.get("kind") == "hintergrund" and job["state"]["stimulus"]["turn_id"] == turn_id:
                return p["consumer"].decode()
    return None


def test_a_job_whose_worker_is_killed_while_it_runs_is_finished_by_a_re_claim(client, keys, settings,
                                                                                    character):
    """The worker is killed while it runs the turn's background job: Ray brings it back, the job
    stays pending until its claim runs out and is then finished by a delivery of its own — the
    background chain's rows stand, nothing is left pending, every worker consumes again."""
    character = character("worker")
    r = Redis.from_url(settings.redis_url)
    try:
        resp = client.post(f"/v1/pairs/alice/{character}/turns", json={"text": "Hallo, ich war heute im Park."},
                           headers=auth(keys["alice"]))
        assert resp.status_code == 200
        turn_id = resp.json()["turn_id"]
        holder = wait_for(lambda: _holder(r, turn_id), timeout=30, interval=0.02)
        killed_at = time.time()
        ray.kill(ray.get_actor(holder, namespace=settings.namespace), no_restart=False)
        done = wait_for(lambda: r.get(erledigt_key("alice", character, turn_id)),
                        timeout=settings.outbox_claim_idle_ms / 1000 + 60)
        # finished after the killed worker's claim ran out: by the job delivered again, not by the dead one
        assert float(done) - killed_at >= settings.outbox_claim_idle_ms / 1000 - 1
        wait_for(lambda: _holder(r, turn_id) is None, timeout=10)  # acknowledged after the done marker
    finally:
        r.close()
    rows = pg_call(settings.database_url, pg.pipeline_rows, "alice", character, turn_id)
    background = {x["node"] for x in rows if x["art"] == "node" and x["seq"] >= LOG_SEQ_OFFSET}
    assert {"salience", "praegung"} <= background  # the chain ran to its end and logged its rows
    stats = [ray.get(ray.get_actor(worker_name(i), namespace=settings.namespace).stats.remote())
             for i in range(settings.outbox_workers)]
    assert all(s["running"] for s in stats)  # the killed one came back and consumes again


def test_a_history_redis_lost_is_rebuilt_from_postgres(client, keys, settings, character):
    """Redis lost the pair's session (a restart without data): the next turn's pair rebuilds it from
    the stored turns before it reads, and Nova's history is whole again."""
    from memory import session
    from tests.conftest import redis_call

    character = character("verloren")
    h = auth(keys["alice"])
    first = client.post(f"/v1/pairs/alice/{character}/turns", json={"text": "Mein Hund heisst Bello."}, headers=h)
    assert first.status_code == 200
    wait_for(lambda: pg_call(settings.database_url, pg.turn_record, "alice", character, first.json()["turn_id"]))
    wait_for(lambda: _gone(settings, "alice", character), timeout=settings.pair_idle_timeout_s + 20)
    redis_call(settings.redis_url, lambda r: r.delete(session.session_key("alice", character)))
    assert client.get(f"/v1/pairs/alice/{character}/turns", headers=h).json()["turns"] == []  # lost
    r2 = client.post(f"/v1/pairs/alice/{character}/turns", json={"text": "Wie heisst mein Hund?"}, headers=h)
    assert r2.status_code == 200
    turns = client.get(f"/v1/pairs/alice/{character}/turns", headers=h).json()["turns"]
    assert [t["inhalt"] for t in turns][:1] == ["Mein Hund heisst Bello."] and len(turns) == 4
    assert turns[0]["quelle"] == "postgres" and turns[2].get("quelle") is None
    rows = wait_for(lambda: pg_call(settings.database_url, pg.pipeline_rows, "alice", character, r2.json()["turn_id"]))
    verlauf = next(x for x in rows if x["entscheidung"] == "enricher.verlauf")
    assert verlauf["inputs"]["gelesen"] == 2  # the enricher read the rebuilt turns
