"""Routing by pair (serve/routing.py), without Ray running: the hashing keeps a pair on one replica,
bounds every replica's load at 1.25 × its share, and falls back — to the next replica on the ring
when the pair's replica is gone, to the power of two choices when it does not take a call — each
fallback logged by name. The router's wiring into the deployment options and the OpenAI backend's
replica header, too."""
import asyncio
import logging
import math
import random
from collections import Counter
from types import SimpleNamespace

from ray.serve._private.common import DeploymentHandleSource, DeploymentID, ReplicaID, RequestMetadata
from ray.serve.request_router import PendingRequest

from core.settings import Settings
from core.wire import ChatRequest
from serve import routing
from serve.routing import BOUND, FLOOR, PairRing, PairRouter, capacity, choose

REPLICAS = ["r-a", "r-b", "r-c", "r-d"]
PAIRS = [f"user{i}:nova" for i in range(64)]


def test_a_pair_keeps_its_replica_and_every_process_agrees():
    ring, again = PairRing(REPLICAS), PairRing(reversed(REPLICAS))
    idle = dict.fromkeys(REPLICAS, 0)
    for pair in PAIRS:
        own = choose(ring, pair, idle)
        assert own == (ring.order(pair)[0], 0)
        assert choose(again, pair, idle) == own, "the ring depends on nothing but the replicas' names"
        assert sorted(ring.order(pair)) == sorted(REPLICAS)
    shares = Counter(ring.order(p)[0] for p in PAIRS)
    assert set(shares) == set(REPLICAS), "every replica holds pairs"


def test_a_replica_that_comes_or_goes_moves_only_its_own_pairs():
    ring = PairRing(REPLICAS)
    without = PairRing([r for r in REPLICAS if r != "r-b"])
    grown = PairRing([*REPLICAS, "r-e"])
    for pair in PAIRS:
        own = ring.order(pair)[0]
        if own != "r-b":
            assert without.order(pair)[0] == own
        else:  # the pair's next replica on the ring takes it
            assert without.order(pair)[0] == ring.order(pair)[1]
        assert grown.order(pair)[0] in (own, "r-e")


def test_no_replica_takes_more_than_its_bounded_share():
    ring, rng = PairRing(REPLICAS), random.Random(7)
    loads = dict.fromkeys(REPLICAS, 0)
    hot = PAIRS[0]
    bounded = 0
    for step in range(400):
        pair = hot if step % 2 else rng.choice(PAIRS)  # one pair makes half the calls
        replica, _ = choose(ring, pair, loads)
        loads[replica] += 1
        if step % 5 == 4:  # some calls end
            busiest = max(loads, key=loads.get)
            loads[busiest] -= 1
        total = sum(loads.values())
        share = math.ceil(BOUND * total / len(loads))
        # a replica holds up to FLOOR calls whatever its share; above that, the share bounds it
        assert max(loads.values()) <= max(FLOOR, share), (step, loads)
        bounded += share > FLOOR
    assert bounded > 300, "most of the run is at a load where the share alone bounds each replica"


def test_a_turns_parallel_calls_of_one_pair_stay_on_its_replica_at_low_load():
    ring = PairRing(REPLICAS)
    own = ring.order(PAIRS[7])[0]
    loads = dict.fromkeys(REPLICAS, 0)
    loads[next(r for r in REPLICAS if r != own)] = 1  # another pair's call in flight
    for _ in range(FLOOR):  # the calls one turn fires at once
        replica, place = choose(ring, PAIRS[7], loads)
        assert (replica, place) == (own, 0), loads
        loads[replica] += 1
    # one more goes on to the pair's next replica; at high load the share, not the floor, counts
    assert choose(ring, PAIRS[7], loads) == (ring.order(PAIRS[7])[1], 1)
    busy = dict.fromkeys(REPLICAS, 40)
    assert capacity(busy) == math.ceil(BOUND * 161 / 4) > FLOOR


def test_a_full_replica_passes_the_pair_to_its_next_one():
    ring = PairRing(REPLICAS)
    own, second = ring.order(PAIRS[3])[:2]
    loads = dict.fromkeys(REPLICAS, 2)
    loads[own] = capacity(loads) + 1
    assert choose(ring, PAIRS[3], loads) == (second, 1)


# ------------------------------------------------------------------ the Serve router
class FakeReplica:
    """What the router reads of a running replica."""

    def __init__(self, name: str):
        self.replica_id = ReplicaID(unique_id=name, deployment_id=DeploymentID(name="LLM", app_name="t"))
        self.node_id, self.availability_zone, self.multiplexed_model_ids = "node", None, set()
        self.max_ongoing_requests, self.is_cross_language = 64, False

    async def get_queue_len(self, deadline_s: float) -> int:
        return 0


def _router(names) -> tuple[PairRouter, dict[str, FakeReplica]]:
    router = PairRouter(deployment_id=DeploymentID(name="LLM", app_name="t"),
                        handle_source=DeploymentHandleSource.UNKNOWN, use_replica_queue_len_cache=False)
    router.initialize_state()
    replicas = {n: FakeReplica(n) for n in names}
    router.update_replicas(list(replicas.values()))
    return router, replicas


def _call(pair: str | None, n: int = 0, args=None) -> PendingRequest:
    request = ChatRequest(messages=[{"role": "user", "content": "Hallo"}], pair=pair)
    return PendingRequest(args=[request] if args is None else args, kwargs={},
                          metadata=RequestMetadata(request_id=f"r{n}", internal_request_id=f"i{n}"))


def _names(ranks) -> list[list[str]]:
    return [[r.replica_id.unique_id for r in rank] for rank in ranks]


def test_the_router_sends_a_pair_to_its_replica_and_falls_back_when_it_does_not_take_it(caplog):
    async def go():
        router, replicas = _router(REPLICAS)
        own = PairRing(REPLICAS).order(PAIRS[5])[0]
        for n in range(3):  # each call of the pair: its replica alone first
            assert _names(await router.choose_replicas(list(replicas.values()), _call(PAIRS[5], n))) == [[own]]
        with caplog.at_level(logging.WARNING, logger="novaberg.llm"):
            again = _names(await router.choose_replicas(list(replicas.values()), _call(PAIRS[5], 2)))
        assert again[0] == [own] and len(again) == 2 and 1 <= len(again[1]) <= 2
        assert "fallback paar_ausweich" in caplog.text and own in caplog.text
        # its calls in flight beyond the bound: the next replica on the ring
        for _ in range(capacity(dict.fromkeys(REPLICAS, 0))):
            router.on_send_request(replicas[own].replica_id)
        second = PairRing(REPLICAS).order(PAIRS[5])[1]
        assert _names(await router.choose_replicas(list(replicas.values()), _call(PAIRS[5], 9))) == [[second]]
        router.on_request_completed(replicas[own].replica_id, "i9")
        assert _names(await router.choose_replicas(list(replicas.values()), _call(PAIRS[5], 10))) == [[own]]

    asyncio.run(go())


def test_the_bound_is_drawn_from_every_replicas_load_not_from_the_one_the_caller_asked():
    """A caller knows the queue of the replica it sent to; the others it asks before it draws the
    bound. Counted as empty they would have put the pair's own busy replica over its share."""
    class Busy(FakeReplica):
        def __init__(self, name: str, queue: int):
            super().__init__(name)
            self.queue = queue

        async def get_queue_len(self, deadline_s: float) -> int:
            return self.queue

    async def go():
        router = PairRouter(deployment_id=DeploymentID(name="LLM", app_name="t"),
                            handle_source=DeploymentHandleSource.UNKNOWN, use_replica_queue_len_cache=True)
        router.initialize_state()
        own = PairRing(REPLICAS).order(PAIRS[5])[0]
        replicas = [Busy(n, 6 if n == own else 5) for n in REPLICAS]
        router.update_replicas(replicas)
        router.on_new_queue_len_info(next(r for r in replicas if r.replica_id.unique_id == own).replica_id, 6)
        # six in flight on its replica: over the bound of 4 (FLOOR; ⌈1.25 × 7 / 4⌉ = 3) if the others
        # counted as empty, within ⌈1.25 × 22 / 4⌉ = 7 once their five each are known
        assert _names(await router.choose_replicas(replicas, _call(PAIRS[5], 1))) == [[own]]
        assert all(router._replica_queue_len_cache.get(r.replica_id) is not None for r in replicas)

    asyncio.run(go())


def test_a_gone_replica_hands_its_pairs_to_the_next_on_the_ring(caplog):
    async def go():
        router, replicas = _router(REPLICAS)
        ring = PairRing(REPLICAS)
        pair = next(p for p in PAIRS if ring.order(p)[0] == "r-c")
        assert _names(await router.choose_replicas(list(replicas.values()), _call(pair, 1))) == [["r-c"]]
        router.on_replica_actor_died(replicas["r-c"].replica_id)
        left = [r for n, r in replicas.items() if n != "r-c"]
        with caplog.at_level(logging.WARNING, logger="novaberg.llm"):
            ranks = _names(await router.choose_replicas(left, _call(pair, 2)))
        assert ranks == [[ring.order(pair)[1]]]
        assert "fallback paar_replica_weg" in caplog.text and "r-c" in caplog.text

    asyncio.run(go())


def test_calls_without_a_pair_go_by_power_of_two(caplog):
    async def go():
        router, replicas = _router(REPLICAS)
        with caplog.at_level(logging.WARNING, logger="novaberg.llm"):
            name = _names(await router.choose_replicas(list(replicas.values()), _call(None, 1, args=[])))
            assert "fallback" not in caplog.text, "a call that is no model call needs no pair"
            ranks = _names(await router.choose_replicas(list(replicas.values()), _call(None, 2)))
        assert len(name) == 1 and len(ranks) == 1 and len(ranks[0]) == 2
        assert "fallback ohne_paar" in caplog.text

    asyncio.run(go())


# ------------------------------------------------------------------ wiring
def test_the_llm_deployment_routes_by_pair_unless_told_otherwise():
    from serve.llm import VLLM_ROUTER_PATH, router_config, vllm_deployment_config

    assert Settings().llm_routing == "pair"
    config = router_config(Settings().llm)
    assert config.request_router_class == routing.ROUTER_PATH and config.get_request_router_class() is PairRouter
    assert router_config(Settings(llm_routing="pow2").llm) is None
    vllm = vllm_deployment_config(Settings(llm_backend="vllm", llm_replicas=4).llm)
    assert vllm["num_replicas"] == 4 and vllm["request_router_config"]["request_router_class"] == VLLM_ROUTER_PATH
    assert "request_router_config" not in vllm_deployment_config(Settings(llm_routing="pow2").llm)


def test_the_built_app_and_the_serve_config_carry_the_router():
    from ray.serve._private.build_app import build_app as serve_build

    import yaml

    from cluster import kuberay, serve_config
    from serve.app import build_app

    s = Settings(database_url="postgresql://x", redis_url="redis://x")
    built = {d.name: d for d in serve_build(build_app(s, hintergrund=True), name="novaberg").deployments}
    assert built["LLM"]._deployment_config.request_router_config.request_router_class == routing.ROUTER_PATH
    assert not built["Ingress"]._deployment_config.request_router_config.request_router_class.endswith("PairRouter")
    llm = next(d for d in serve_config.config(s)["applications"][0]["deployments"] if d["name"] == "LLM")
    assert llm["request_router_config"]["request_router_class"] == routing.ROUTER_PATH
    for text in (serve_config.PATH.read_text(encoding="utf-8"), kuberay.PATH.read_text(encoding="utf-8")):
        assert f"request_router_class: {routing.ROUTER_PATH}" in text
    manifest = yaml.safe_load(kuberay.PATH.read_text(encoding="utf-8"))
    gpu = next(g for g in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"] if g["groupName"] == "gpu")
    env = {e["name"]: e.get("value") for e in gpu["template"]["spec"]["containers"][0]["env"]}
    assert env["NOVABERG_LLM_BACKEND"] == "vllm" and env["NOVABERG_LLM_ROUTING"] == "pair"


def test_the_openai_backend_names_its_replica_on_every_call():
    from serve.llm_backends import REPLICA_HEADER, OpenAICompatBackend, replica_name

    assert replica_name() == "lokal"

    async def go():
        b = OpenAICompatBackend(Settings(llm_backend="openai").llm)
        await b.start()
        try:
            return dict(b._session.headers)
        finally:
            await b.close()

    assert asyncio.run(go())[REPLICA_HEADER] == "lokal"


def test_every_model_call_of_a_pair_carries_its_pair():
    """The LLM client (pair actors, background workers, the pixie, the node deployment, the OpenAI
    door's turns) and the files route's indexing both name the pair on the request, not in the prompt."""
    from pipeline.services import LLMClient
    from pipeline.trace import TurnTrace
    from serve import erschliessung
    from serve.llm_backends import completion

    sent: list[ChatRequest] = []

    async def answer(request):
        sent.append(request)
        return completion("m", "{}", None, 3, 1, "stop")

    class Handle:
        class chat:  # noqa: N801 - the handle's method, as Serve names it
            @staticmethod
            def remote(request):
                return answer(request)

    async def go():
        await LLMClient(Handle(), Settings()).chat(TurnTrace("alice", "nova", "t1"), "responder",
                                                   [{"role": "user", "content": "Hallo"}])
        w = SimpleNamespace(chat=answer, model_name=lambda: asyncio.sleep(0, "m"), max_tokens=64, deadline_s=5.0,
                            prompts=SimpleNamespace(render_parts=lambda *a: ["regeln", "aufgabe"]))
        await erschliessung._fragen(w, SimpleNamespace(name="notiz.txt", text="Inhalt"), "bob:nova")

    asyncio.run(go())
    assert [r.pair for r in sent] == ["alice:nova", "bob:nova"]
    assert not any("alice" in m["content"] or "bob" in m["content"] for r in sent for m in r.messages)
