"""The turn API on the whole app with the scripted engine: a streamed turn's events, turns of one
pair in arrival order, the pair actor's weight, memory operations in the store deployment."""
import json
import uuid

import pytest

from memory import pg, session
from tests.conftest import auth, pg_call, redis_call, wait_for

pytestmark = pytest.mark.e2e


def test_streamed_turn_reports_nodes_tokens_and_final(client, keys, character):
    character = character("nova")
    events = []
    with client.stream("POST", f"/v1/pairs/alice/{character}/turns", params={"stream": "true", "draft": "true"},
                       json={"text": "Erzaehl mir etwas Schoenes."}, headers=auth(keys["alice"])) as r:
        assert r.status_code == 200
        name = None
        for line in r.iter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line[5:])))
    kinds = [k for k, _ in events]
    assert kinds[-1] == "final"
    started = [d["node"] for k, d in events if k == "node_started"]
    assert started[0] == "perzeption" and started[-1] == "dispatcher"
    assert "responder" in started and started.index("responder") < started.index("thinker")
    drafts = "".join(d["text"] for k, d in events if k == "draft" and d["node"] == "responder")
    final = events[-1][1]
    assert drafts.strip() and final["reply"].strip()
    assert kinds.index("draft") > kinds.index("node_started")
    # the kept reply comes once, after the commit (the dispatcher), right before `final`
    assert kinds[-2] == "token" and kinds.count("token") == 1
    assert events[-2][1]["text"] == final["reply"]


def test_turns_of_one_pair_run_one_at_a_time_in_arrival_order(system, keys, settings, character):
    import threading
    import time

    import httpx

    character = character("order")
    texts = ["Erstens.", "Zweitens.", "Drittens."]
    results = {}

    def post(i):
        with httpx.Client(base_url=system.url, timeout=300) as c:
            results[i] = c.post(f"/v1/pairs/alice/{character}/turns", json={"text": texts[i]},
                                headers=auth(keys["alice"]))

    threads = []
    for i in range(3):
        t = threading.Thread(target=post, args=(i,))
        t.start()
        threads.append(t)
        time.sleep(0.3)
    for t in threads:
        t.join(300)
    assert all(results[i].status_code == 200 for i in range(3))
    turns = redis_call(settings.redis_url, session.load_turns, "alice", character, 10)
    assert [t["inhalt"] for t in turns if t["rolle"] == "user"] == texts
    # each turn saw exactly the turns before it: none ran beside another
    for i in range(3):
        tid = results[i].json()["turn_id"]
        rows = wait_for(lambda: pg_call(settings.database_url, pg.pipeline_rows, "alice", character, tid))
        verlauf = next(x for x in rows if x["entscheidung"] == "enricher.verlauf")
        assert verlauf["inputs"]["gelesen"] == 2 * i


def test_pair_actor_stays_light(client, keys):
    # after a turn, the actor has loaded everything it needs for one
    assert client.post("/v1/pairs/alice/nova/turns", json={"text": "Hallo"},
                       headers=auth(keys["alice"])).status_code == 200
    r = client.get("/v1/pairs/alice/nova/status", headers=auth(keys["alice"]))
    assert r.status_code == 200
    assert r.json()["heavy_imports"] == []


def test_memory_operations_run_in_the_store_deployment(system):
    """Pair actors reach Postgres memory only through the store deployment's pooled `call`."""
    from datetime import datetime

    from ray import serve

    store = serve.get_deployment_handle("Store", app_name="novaberg")
    user = f"ops-{uuid.uuid4().hex[:6]}"
    tid = store.call.remote("timeline.add", user, "nova", "Konzert", datetime(2026, 12, 24, 20), "Europe/Berlin").result()
    found = store.call.remote("timeline.find_by_keyword", user, "nova", "konzert", "Europe/Berlin").result()
    assert [f.id for f in found] == [tid]
    with pytest.raises(Exception, match="no memory operation"):
        store.call.remote("drop.everything").result()
