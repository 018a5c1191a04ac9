"""agent_dispatch (seed 003): the generic router to the agents. It knows only the registry; each
agent gets the state cut to its declared need (`BEDARF`, each record withheld logged). A
missing dispatch and an agent's exception become `AgentResult(status="fehler")` and the chain
goes on; `agent_name` is reset after each call. An agent that declares `memory` gets the turn's
memory record, and with it the search key (`such_vektor`): the agents `wissen` and `dateien`
declare it and read the services of those names with it (pipeline/dienste.py; seed 001: "denen
`such_vektor` als angemeldeter Bedarf mitwandert"). Delivered and processed counts per agent and
chain live in Redis, so a restart does not zero them (memory/agent_quoten.py; the router counts
the denominator)."""
from __future__ import annotations

import logging

from pipeline import agents
from pipeline.agents import get_dispatch
from pipeline.node import Node
from pipeline.runner import NodeView
from pipeline.services import Deps
from core.state import AgentResult, PlanRecord, TurnState

NAME = "agent_dispatch"
NODE = Node(
    name=NAME,
    reads=("stimulus", "plan", "route", "pair", "memory"),
    writes=("plan",),
    store_reads=("notizen", "timeline", "beziehung", "bibliothek", "aufzeichnungen"),
    store_writes=("notizen", "timeline", "beziehung", "zaehler"),
)

log = logging.getLogger("novaberg.node.agent_dispatch")


def zuschneiden(view: NodeView, name: str) -> tuple[NodeView, list[str]]:
    """The node's view cut to the agent's declared need (`BEDARF`; the stimulus always), and the
    records present in the node's view that the agent did not declare: withheld from it, reading
    one is an error (the view's contract), never a silent None."""
    keep = set(agents.bedarf(name)) | {"stimulus"}
    weg = sorted(r for r in NODE.reads if r not in keep and getattr(view, r) is not None)
    return view.narrow(keep, f"agent {name}"), weg


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    plan = state.plan or PlanRecord()
    name = plan.agent_name
    if not name:
        deps.trace.decision(NAME, "agent_dispatch.zustellung", "kein_agent", {})
        return {}
    chain, t = deps.trace.chain, deps.trace
    # a turn run again (the same turn_id) counts its delivery and its result once, by the step
    einmal = f"{t.user_id}:{t.character_id}:{t.turn_id}:{len(plan.agent_results)}"
    await deps.quoten.zugestellt(name, chain, einmal)
    fn = get_dispatch(name)
    if fn is None:
        log.error("agent_dispatch: no dispatch registered for agent %r", name)
        result = AgentResult(agent_name=name, status="fehler", fehler=f"Kein Dispatch für Agent '{name}' registriert")
    else:
        zugeschnitten, weg = zuschneiden(state, name)
        for record in weg:  # seed 003: a value the agent did not declare does not reach it, and says so
            log.info("agent_dispatch: %s gets no %s (not in its declared need)", name, record)
        try:
            result = await fn(zugeschnitten, deps)
        except Exception as e:
            log.exception("agent_dispatch: agent %s failed", name)
            result = AgentResult(agent_name=name, status="fehler", fehler=f"{type(e).__name__}: {e}")
    result = result.model_copy(update={"auftrag": plan.auftrag})
    await deps.quoten.bearbeitet(name, chain, result.status, einmal)
    deps.trace.decision(NAME, "agent_dispatch.zustellung", result.status, {"agent": name, "fehler": result.fehler})
    return {"plan": plan.model_copy(update={"agent_name": "", "agent_results": plan.agent_results + [result]})}
