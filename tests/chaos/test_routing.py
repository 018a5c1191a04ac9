"""Routing by pair survives a replica kill: an LLM deployment of two replicas (the router of
`llm_routing = "pair"`, the scripted engine answering with the name of the replica it runs on),
deployed as an application of its own on the tier's cluster. A pair's calls go to one replica, the
same from every process (the driver's handle, a pair actor's LLM client over gRPC); that
replica is killed (`ray.kill`): the pair's calls go to the other with no error, the router names its
fallback; once the controller's replacement is up, every pair keeps to one replica again, the
replacement holding pairs too."""
from __future__ import annotations

import logging
import sys

import pytest
import ray
from ray import cloudpickle, serve

from core.names import LLM_DEPLOYMENT
from core.wire import ChatRequest
from serve.llm import LLMDeployment, router_config
from tests.conftest import wait_for
from tests.scripted_engine import ScriptedEngine

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

cloudpickle.register_pickle_by_value(sys.modules[__name__])

APP = "novaberg-routing"
PAIRS = [f"nutzer{i}:nova" for i in range(12)]
CALL_TIMEOUT_S = 30.0


class ReplicaEngine(ScriptedEngine):
    """Answers every call with the id of the Serve replica that runs it."""

    async def chat(self, request: ChatRequest):
        from serve.llm_backends import completion, replica_name

        return completion(self.model, replica_name(), None, 1, 1, "stop")


@pytest.fixture(scope="module")
def llm(system, settings):
    assert settings.llm_routing == "pair"
    app = LLMDeployment.options(
        num_replicas=2, max_ongoing_requests=64, ray_actor_options={"num_cpus": 0},
        request_router_config=router_config(settings.llm)).bind(settings.llm, None, ReplicaEngine)
    serve.run(app, name=APP, route_prefix=None)
    try:
        yield serve.get_deployment_handle(LLM_DEPLOYMENT, app_name=APP)
    finally:
        serve.delete(APP)


def _ask(handle, pair: str) -> str:
    request = ChatRequest(messages=[{"role": "user", "content": "Hallo"}], caller="responder", pair=pair)
    return handle.chat.remote(request).result(timeout_s=CALL_TIMEOUT_S).content


def _round(handle) -> dict[str, str]:
    return {pair: _ask(handle, pair) for pair in PAIRS}


def _stable(handle, rounds: int = 3) -> dict[str, str]:
    """Each pair's replica, the same in every round."""
    first = _round(handle)
    for _ in range(rounds - 1):
        assert _round(handle) == first, "a pair's calls went to more than one replica"
    return first


@ray.remote(num_cpus=0)
class PairCaller:
    """Asks as a pair actor does: the LLM client over the configured transport (gRPC), the pair
    from the turn's trace."""

    def __init__(self, settings: dict):
        from core.settings import Settings

        self.settings = Settings(**settings)

    async def replicas(self, pairs: list[str]) -> dict[str, str]:
        from pipeline.services import LLMClient, transport
        from pipeline.trace import TurnTrace

        client = LLMClient(transport(serve.get_deployment_handle(LLM_DEPLOYMENT, app_name=APP), self.settings),
                           self.settings)
        out = {}
        for pair in pairs:
            user, character = pair.split(":")
            out[pair] = (await client.chat(TurnTrace(user, character, "t"), "responder",
                                           [{"role": "user", "content": "Hallo"}])).content
        return out


def _kill(replica: str) -> None:
    name = f"SERVE_REPLICA::{APP}#{LLM_DEPLOYMENT}#{replica}"
    actor = next(a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"] == name)
    ray.kill(ray.get_actor(name, namespace=actor["namespace"]), no_restart=True)  # the controller replaces it


def test_routing_by_pair_survives_a_replica_kill(llm, system, caplog):
    before = _stable(llm)
    assert len(set(before.values())) == 2, f"both replicas hold pairs: {before}"
    caller = PairCaller.remote(system.settings.model_dump(mode="json"))
    assert ray.get(caller.replicas.remote(PAIRS), timeout=120) == before, \
        "a pair actor's client, on its own handle and transport, routes each pair to the same replica"
    pair = PAIRS[0]
    killed = before[pair]
    _kill(killed)
    with caplog.at_level(logging.WARNING, logger="novaberg.llm"):
        after_kill = [_ask(llm, pair) for _ in range(4)] + list(_round(llm).values())
    assert killed not in after_kill, "no call reached the killed replica"
    assert len(set(after_kill)) == 1, "the one replica left took every call"
    assert "fallback paar_" in caplog.text, "the router named its fallback"
    # the controller's replacement comes up and takes pairs again
    survivor = after_kill[0]
    wait_for(lambda: set(_round(llm).values()) - {killed, survivor}, timeout=120, interval=0.5)
    again = _stable(llm)
    assert killed not in again.values() and len(set(again.values())) == 2, f"both replicas hold pairs: {again}"
