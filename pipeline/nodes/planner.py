"""planner: pick the next agent (or none) and, when the agents are done, write the finished
[AUFGABE] block (Rückfrage, Erfolg, Verworfen, Fehler) and the context-cut flag. Several agents
in one turn: the plan keeps the remaining orders and hands out one per loop. The interpretation
of agent results belongs here, not in the responder (seed 004, HALL2); a success addresses Nova as
the one who acted (seed 004 §3.1, item 3)."""
from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field

from pipeline import regeln
from pipeline.agents import registry
from pipeline.llm_json import ask_json
from pipeline.services import Deps
from pipeline.state import Auftrag, PlanRecord, TurnState
from pipeline.timefmt import local_now

NAME = "planner"
READS = ("stimulus", "pair", "route", "plan")
WRITES = ("plan",)
MAX_AUFTRAEGE = 3

log = logging.getLogger("novaberg.node.planner")


class _Auftrag(BaseModel):
    model_config = ConfigDict(extra="ignore")
    agent: str
    aktion: str = ""
    parameter: dict = Field(default_factory=dict)


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    auftraege: list[_Auftrag] = Field(default_factory=list)


def task_block(name: str, results) -> tuple[str, bool]:
    """The [AUFGABE] block and whether the responder's context is cut (success, error, refusal)."""
    lines, cut = [], False
    for r in results:
        e = r.ergebnis or {}
        if r.status == "abgeschlossen":
            lines.append(f"Erfolg: {name} hat soeben selbst erledigt: {e.get('beschreibung', r.agent_name)}. "
                         f"Sie sagt kurz, was sie getan hat.")
            cut = True
        elif r.status == "rueckfrage":
            lines.append(f"Rueckfrage: {name} braucht noch eine Angabe und fragt genau danach: {e.get('frage')}")
        elif r.status == "verworfen":
            lines.append(f"Verworfen: {name} hat es nicht getan, weil {e.get('grund', 'es nicht ging')}. Sie sagt das offen.")
            cut = True
        else:
            lines.append(f"Fehler: {name} wollte es erledigen, es ist gescheitert ({r.fehler}). Sie sagt das offen "
                         f"und verspricht nichts.")
            cut = True
    return "\n".join(lines), cut


async def run(state: TurnState, deps: Deps) -> dict:
    plan = state.plan or PlanRecord()
    route = state.route
    rest = list(plan.offen)
    if plan.schleifen == 0:
        if route is None or route.management == "keins":
            deps.trace.decision(NAME, "planner.entscheidung", "kein_agent", {})
            return {"plan": plan.model_copy(update={"schleifen": 1})}
        now = local_now(deps.settings.timezone)
        answer, outcome = await ask_json(deps, NAME, _Antwort, {
            "nachricht": state.stimulus.text, "heute": f"{now:%Y-%m-%d %H:%M}", "management": route.management})
        known = registry()
        rest = [Auftrag.model_validate(a.model_dump()) for a in (answer.auftraege if answer else [])
                if a.agent in known][:MAX_AUFTRAEGE]
        if not rest:
            by_rule = regeln.auftrag(route.management, state.stimulus.text)
            if by_rule is not None:
                log.warning("planner: fallback planner_regeln (answer %s): %s/%s by rule", outcome,
                            by_rule["agent"], by_rule["aktion"])
                deps.trace.decision(NAME, "planner.quelle", "planner_regeln", {"antwort": outcome})
                rest = [Auftrag.model_validate(by_rule)]
        if not rest:
            log.warning("planner: fallback rueckfrage: management %r but no usable order (%s)", route.management, outcome)
            block = (f"Rueckfrage: {state.pair.character_name} hat verstanden, dass etwas zu {route.management} "
                     f"erledigt werden soll, und fragt genau nach, was.")
            deps.trace.decision(NAME, "planner.entscheidung", "rueckfrage_ohne_auftrag", {"antwort": outcome})
            return {"plan": plan.model_copy(update={"schleifen": 1, "task_block": block})}
    if rest:
        nxt, rest = rest[0], rest[1:]
        deps.trace.decision(NAME, "planner.entscheidung", "agent", {"agent": nxt.agent, "aktion": nxt.aktion})
        return {"plan": plan.model_copy(update={"agent_name": nxt.agent, "auftrag": nxt, "offen": rest,
                                                "schleifen": plan.schleifen + 1})}
    block, cut = task_block(state.pair.character_name, plan.agent_results)
    deps.trace.decision(NAME, "planner.entscheidung", "fertig",
                        {"ergebnisse": [r.status for r in plan.agent_results], "kontext_schnitt": cut})
    return {"plan": plan.model_copy(update={"agent_name": "", "task_block": block, "task_context_cut": cut,
                                            "schleifen": plan.schleifen + 1})}
