"""Actors come and go; the stores keep what matters."""

import pytest
import ray

from actors.pair import pair_name
from actors.worker import worker_name
from memory import pg
from tests.conftest import auth, pg_call, wait_for

pytestmark = pytest.mark.e2e


def _gone(name, namespace):
    try:
        ray.get_actor(name, namespace=namespace)
        return False
    except ValueError:
        return True


def test_evicted_pair_actor_comes_back_with_its_history(client, keys, settings, character):
    character = character("evict")
    h = auth(keys["alice"])
    r = client.post(f"/v1/pairs/alice/{character}/turns", json={"text": "Merk dir: mein Hund heisst Bello."},
                    headers=h)
    assert r.status_code == 200
    name = pair_name("alice", character)
    assert not _gone(name, settings.namespace)
    wait_for(lambda: _gone(name, settings.namespace), timeout=settings.pair_idle_timeout_s + 20)
    hist = client.get(f"/v1/pairs/alice/{character}/turns", headers=h)
    assert hist.status_code == 200
    assert [t["inhalt"] for t in hist.json()["turns"]][0] == "Merk dir: mein Hund heisst Bello."
    r2 = client.post(f"/v1/pairs/alice/{character}/turns", json={"text": "Wie heisst mein Hund?"}, headers=h)
    assert r2.status_code == 200
    rows = wait_for(lambda: pg_call(settings.database_url, pg.pipeline_rows, "alice", character, r2.json()["turn_id"]))
    verlauf = next(x for x in rows if x["entscheidung"] == "enricher.verlauf")
    assert verlauf["inputs"]["gelesen"] == 2  # rebuilt from the stores


def test_background_job_survives_a_killed_worker(client, keys, settings, character):
    worker = ray.get_actor(worker_name(0), namespace=settings.namespace)
    ray.kill(worker, no_restart=False)
    character = character("worker")
    r = client.post(f"/v1/pairs/alice/{character}/turns", json={"text": "Hallo"}, headers=auth(keys["alice"]))
    assert r.status_code == 200
    rec = wait_for(lambda: pg_call(settings.database_url, pg.turn_record, "alice", character, r.json()["turn_id"]),
                   timeout=60)
    assert rec["reply"] == r.json()["reply"]
    stats = [ray.get(ray.get_actor(worker_name(i), namespace=settings.namespace).stats.remote())
             for i in range(settings.outbox_workers)]
    assert all(s["running"] for s in stats)  # the killed one came back and consumes again
    assert sum(s["processed"] for s in stats) >= 1


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
    name = pair_name("alice", character)
    wait_for(lambda: _gone(name, settings.namespace), timeout=settings.pair_idle_timeout_s + 20)
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
