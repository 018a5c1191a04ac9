"""A lost node (issue #14): a head and two worker nodes on one machine (`ray.cluster_utils.Cluster`),
pair actors placed on the worker nodes by their resource (`pair_resources`); while turns run, the
node holding the pairs is removed. Every acknowledged turn is stored exactly once, and the pairs
answer again from their stores on the remaining node; the time to recover is printed."""
import socket
import threading
import time
import uuid

import httpx
import pytest
import ray
from ray import cloudpickle

from actors.activation import pair_actor
from memory import pg
from tests import scripted_engine
from tests.cluster.conftest import local_cluster
from tests.conftest import auth, pg_call, wait_for

pytestmark = pytest.mark.e2e

cloudpickle.register_pickle_by_value(scripted_engine)
PAIRS = 3
TURNS = 3  # per pair, while the node goes


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _turn(url: str, key: str, user: str, turn_id: str, deadline_s: float = 240) -> float:
    """Send one turn until it is acknowledged (same turn id on every try); the time it was."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            r = httpx.post(f"{url}/v1/pairs/{user}/nova/turns", json={"text": f"Wie geht es? ({turn_id})",
                           "turn_id": turn_id}, headers=auth(key), timeout=120)
            if r.status_code == 200:
                return time.monotonic()
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"turn {turn_id} of {user} not acknowledged within {deadline_s}s")


def _node_of(settings, user: str) -> str:
    """The node the pair's actor runs on, from the connected cluster's actor table."""
    from ray._private import state

    info = state.actors(pair_actor(settings, user, "nova")._actor_id.hex())
    assert info["State"] == "ALIVE", info["State"]
    return info["Address"]["NodeID"]


def _stored(s, user: str, expected: int) -> int:
    """The pair's stored turn rows once they reach `expected` (0 before: wait on)."""
    n = pg_call(s.database_url, pg.count_turn_records, user, "nova")
    return n if n >= expected else 0


def test_a_lost_node_loses_no_acknowledged_turn(settings, migrated):
    from cluster import runtime

    assert not ray.is_initialized()
    cluster = local_cluster(num_cpus=2)
    first = cluster.add_node(num_cpus=1, resources={"pairs": 100})
    cluster.wait_for_nodes()
    s = settings.model_copy(update={"ray_address": cluster.address, "pair_resources": {"pairs": 1},
                                    "namespace": "novaberg-lost", "http_port": _port(),
                                    "proxy_location": "HeadOnly",  # one machine: one port
                                    "pair_idle_timeout_s": 600.0})  # the pairs stay where they were placed
    rt = runtime.start(s, engine=scripted_engine.ScriptedEngine.with_script(latency_s=0.05))
    users = [f"lost{i}-{uuid.uuid4().hex[:4]}" for i in range(PAIRS)]
    acked: dict[str, list[str]] = {u: [] for u in users}
    try:
        keys = {u: runtime.create_key(u) for u in users}
        for u in users:  # the pairs come to life on the only node that has their resource
            _turn(rt.url, keys[u], u, f"{u}-0")
            acked[u].append(f"{u}-0")
        assert {_node_of(s, u) for u in users} == {first.node_id}
        cluster.add_node(num_cpus=1, resources={"pairs": 100})
        cluster.wait_for_nodes()

        def drive(u):
            for n in range(1, TURNS + 1):
                _turn(rt.url, keys[u], u, f"{u}-{n}")
                acked[u].append(f"{u}-{n}")

        threads = [threading.Thread(target=drive, args=(u,)) for u in users]
        for t in threads:
            t.start()
        time.sleep(1.0)  # turns under way
        cluster.remove_node(first)
        removed = time.monotonic()
        for t in threads:
            t.join(timeout=600)
        back = [_turn(rt.url, keys[u], u, f"{u}-after") for u in users]  # the pairs answer again
        print(f"lost node: {sum(len(v) for v in acked.values())} turns acknowledged around it, "
              f"pairs answering again {max(back) - removed:.1f}s after the node went")
        for u in users:
            acked[u].append(f"{u}-after")
            assert _node_of(s, u) != first.node_id
            # every acknowledged turn stored, each once (the turn id is the row's key), nothing else;
            # the rows come through the outbox: a worker that ran on the lost node is restarted, and
            # what it held is claimed again after `outbox_claim_idle_ms`
            stored = wait_for(lambda: _stored(s, u, TURNS + 2), timeout=s.outbox_claim_idle_ms / 1000 + 90)
            assert stored == len(acked[u]) == TURNS + 2
            for turn_id in acked[u]:
                assert pg_call(s.database_url, pg.turn_record, u, "nova", turn_id) is not None, turn_id
    finally:
        runtime.stop(rt, stop_stores=False)
        cluster.shutdown()
