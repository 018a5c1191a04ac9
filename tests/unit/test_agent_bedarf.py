"""Seed 003 (`BaseAgent.invoke`): each agent gets the turn's state cut to its declared need; a
record it did not declare does not reach it, and each withheld record is logged by name."""
import asyncio

import pytest

from pipeline.runner import NodeContractError

from pipeline import agents
from pipeline.nodes import agent_dispatch
from pipeline.runner import run_node
from core.state import (Auftrag, EmotionRecord, MemoryRecord, PairRecord, PlanRecord, RouteRecord, Stimulus,
                            TurnState)
from tests.scripted_llm import ScriptedLLM, Zaehler, deps_for


def _state() -> TurnState:
    return TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt="Merk dir das."),
                     pair=PairRecord(character_name="Nova"), route=RouteRecord(management="notiz"),
                     memory=MemoryRecord(), emotion=EmotionRecord(),
                     plan=PlanRecord(agent_name="spion", auftrag=Auftrag(agent="spion", aktion="anlegen")))


def test_an_agent_sees_only_what_it_declared(monkeypatch, caplog):
    seen = []

    async def spion(state, deps):
        seen.append(state)
        assert state.plan.agent_name == "spion"  # its order, as it stands when it runs
        from core.state import AgentResult
        return AgentResult(agent_name="spion", status="abgeschlossen")

    monkeypatch.setitem(agents.registry(), "spion", spion)
    monkeypatch.setattr(agents, "bedarf", lambda name: ("plan", "route") if name == "spion" else ())
    deps = deps_for(ScriptedLLM(), redis=Zaehler())
    with caplog.at_level("INFO", logger="novaberg.node.agent_dispatch"):
        out = asyncio.run(run_node(agent_dispatch.NODE, _state(), deps))
    [got] = seen
    assert got.stimulus.user_prompt == "Merk dir das."
    assert got.route.management == "notiz"  # declared
    with pytest.raises(NodeContractError):  # in the node's view, not declared by the agent: an error, not a None
        got.pair
    said = [r.getMessage() for r in caplog.records if "not in its declared need" in r.getMessage()]
    assert said == ["agent_dispatch: spion gets no memory (not in its declared need)",
                    "agent_dispatch: spion gets no pair (not in its declared need)"]
    assert out["plan"].agent_results[-1].status == "abgeschlossen"


def test_every_agent_declares_what_it_reads():
    for name in agents.registry():
        need = agents.bedarf(name)
        assert need and set(need) <= set(TurnState.model_fields), (name, need)
        assert set(need) <= set(agent_dispatch.NODE.reads), (name, need)  # it cannot need what the node does not read
