"""The node deployment (`Settings.remote_nodes`), real: the human chain run from an async actor
with every node in a real `Nodes` replica gives the same records, the same decision entries and
the same LLM usage as the same chain run in the actor, and what a remote node sent the model
(its system message, for the leak guard) comes back to the turn."""
import sys

import pytest
import ray
from ray import cloudpickle, serve

from core.settings import Settings

cloudpickle.register_pickle_by_value(sys.modules[__name__])

APP = "nodes-probe"


@ray.remote(num_cpus=0)
class Turn:
    """Runs the human chain as a pair actor does, its nodes here or in the probe's replica."""

    def __init__(self, settings: dict):
        self.settings = Settings(**settings)

    async def run(self, remote: bool) -> dict:
        from pipeline.chains import HUMAN_CHAIN
        from pipeline.runner import ChainRunner
        from pipeline.services import Deps, Services, transport
        from core.state import Stimulus, TurnState
        from pipeline.trace import TurnTrace

        svc = Services.connect(self.settings)
        handle = transport(serve.get_deployment_handle("Nodes", app_name=APP), self.settings) if remote else None
        runner = ChainRunner(HUMAN_CHAIN, remote=[n.name for n in HUMAN_CHAIN] if remote else [], nodes_handle=handle, name="human")
        state = TurnState(stimulus=Stimulus(user_id="fern-probe", character_id="nova", turn_id="fern-1",
                                            user_prompt="Mein Bruder zieht naechste Woche nach Hamburg.", herkunft="user"))
        trace = TurnTrace("fern-probe", "nova", "fern-1")
        trace.chain = "human"
        await runner.run(state, Deps(svc, trace))
        return {"records": {r: getattr(state, r).model_dump(mode="json") for r in ("perzeption", "memory", "emotion")},
                "decisions": [(r.node, r.entscheidung, r.outcome) for r in trace.decisions()],
                "nodes": [r.node for r in trace.node_runs()],
                "usage": (trace.llm_calls, trace.prompt_tokens, trace.completion_tokens),
                "llm_ms": trace.llm_ms, "system_prompts": trace.system_prompts}


@pytest.fixture(scope="module")
def turns(system):
    from serve.nodes import NodeDeployment

    serve.run(NodeDeployment.options(ray_actor_options={"num_cpus": 0}).bind(system.settings),
              name=APP, route_prefix=None)
    try:
        actor = Turn.remote(system.settings.model_dump(mode="json"))
        yield {"lokal": ray.get(actor.run.remote(False), timeout=120),
               "entfernt": ray.get(actor.run.remote(True), timeout=120)}
    finally:
        serve.delete(APP)


def test_the_remote_chain_gives_the_same_records_and_decisions(turns):
    lokal, entfernt = turns["lokal"], turns["entfernt"]
    assert entfernt["records"] == lokal["records"]
    assert entfernt["records"]["perzeption"] and entfernt["records"]["emotion"]
    assert entfernt["decisions"] == lokal["decisions"] and entfernt["decisions"]
    assert entfernt["nodes"] == lokal["nodes"] == ["perzeption", "enricher", "ei_calc"]


def test_what_the_remote_nodes_spent_and_sent_comes_back_to_the_turn(turns):
    lokal, entfernt = turns["lokal"], turns["entfernt"]
    # the LLM calls (perzeption's; the query rewrite waits for memory to search), their tokens (the
    # turn's usage in pipeline_log) and their time
    assert entfernt["usage"] == lokal["usage"] and entfernt["usage"][0] >= 1
    assert entfernt["llm_ms"] > 0
    # the system messages the nodes sent: the leak guard compares the reply with them
    assert entfernt["system_prompts"] == lokal["system_prompts"]
    assert "[ROLLE]" in entfernt["system_prompts"]["perzeption"]
