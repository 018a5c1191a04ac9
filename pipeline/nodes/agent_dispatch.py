"""agent_dispatch (seed 003): the generic router to the agents. It knows only the registry: a
missing dispatch and an agent's exception become `AgentResult(status="fehler")` and the chain
goes on; `agent_name` is reset after each call. Delivered and processed counts per agent and
chain live in Redis, so a restart does not zero them (memory/agent_quoten.py; the router counts
the denominator)."""
from __future__ import annotations

import logging

from memory import agent_quoten
from pipeline.agents import get_dispatch
from pipeline.node import Node
from pipeline.services import Deps
from pipeline.state import AgentResult, PlanRecord, TurnState

NAME = "agent_dispatch"
NODE = Node(
    name=NAME,
    reads=("stimulus", "plan", "route", "pair"),
    writes=("plan",),
    store_reads=("notizen", "timeline", "beziehung"),
    store_writes=("notizen", "timeline", "beziehung", "zaehler"),
)

log = logging.getLogger("novaberg.node.agent_dispatch")


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    plan = state.plan or PlanRecord()
    name = plan.agent_name
    if not name:
        deps.trace.decision(NAME, "agent_dispatch.zustellung", "kein_agent", {})
        return {}
    chain = deps.trace.chain
    await agent_quoten.zugestellt(deps.redis, name, chain)
    fn = get_dispatch(name)
    if fn is None:
        log.error("agent_dispatch: no dispatch registered for agent %r", name)
        result = AgentResult(agent_name=name, status="fehler", fehler=f"Kein Dispatch für Agent '{name}' registriert")
    else:
        try:
            result = await fn(state, deps)
        except Exception as e:
            log.exception("agent_dispatch: agent %s failed", name)
            result = AgentResult(agent_name=name, status="fehler", fehler=f"{type(e).__name__}: {e}")
    result = result.model_copy(update={"auftrag": plan.auftrag})
    await agent_quoten.bearbeitet(deps.redis, name, chain, result.status)
    deps.trace.decision(NAME, "agent_dispatch.zustellung", result.status, {"agent": name, "fehler": result.fehler})
    return {"plan": plan.model_copy(update={"agent_name": "", "agent_results": plan.agent_results + [result]})}
