"""planner: pick the next agent (or none) and, when the agents are done, write the finished
[AUFGABE] block (Rückfrage, Erfolg, Verworfen, Fehler) and the context-cut flag. Several agents
in one turn: one order per loop, and after each agent result the planner decides again what is
still needed (seed 003, E9: a loop, not a queue) — its earlier plan is what it sees as planned. The interpretation
of agent results belongs here, not in the responder (seed 004, HALL2); a success addresses Nova as
the one who acted (seed 004 §3.1, item 3)."""
from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field

from pipeline import regeln
from pipeline.agents import registry, vorwaermen_starten
from pipeline.llm_json import ask_json
from pipeline.services import Deps
from pipeline.state import Auftrag, PlanRecord, TurnState
from pipeline.timefmt import local_now

NAME = "planner"
READS = ("stimulus", "pair", "route", "plan")
WRITES = ("plan",)
MAX_AUFTRAEGE = 3

log = logging.getLogger("novaberg.node.planner")


WORT_CAP = 16
"""The longest agent or action name the engine may write (the longest named: `verschieben`)."""


class _Auftrag(BaseModel):
    """One order. Agent and action are short words (an unknown agent is dropped and the rules
    decide: held to the vocabulary, the embedded model picked a wrong agent that then counted);
    the parameters are a free object the engine keeps flat and short (`llm_json.FREI_WERT`)."""
    model_config = ConfigDict(extra="ignore")
    agent: str = Field(default="", json_schema_extra={"maxLength": WORT_CAP})
    aktion: str = Field(default="", json_schema_extra={"maxLength": WORT_CAP})
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


def bisher(results) -> str:
    """What the agents did so far in this turn, for the planner's next decision."""
    if not results:
        return "Noch nichts."
    return "\n".join(f"- {r.agent_name}: {r.status}" + (f" ({(r.ergebnis or {}).get('beschreibung')})"
                                                       if r.ergebnis and r.ergebnis.get("beschreibung") else "")
                     + (f" — {r.fehler}" if r.fehler else "") for r in results)


async def _auftraege(deps: Deps, state: TurnState, plan: PlanRecord) -> tuple[list[Auftrag] | None, str]:
    """The orders still to do, as the model sees them now (None: no usable answer)."""
    now = local_now(deps.settings.timezone)
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "nachricht": state.stimulus.text, "heute": f"{now:%Y-%m-%d %H:%M}", "management": state.route.management,
        "bisher": bisher(plan.agent_results),
        "geplant": ", ".join(f"{a.agent}/{a.aktion}" for a in plan.offen) or "nichts"})
    if answer is None:
        return None, outcome
    known = registry()
    return [Auftrag.model_validate(a.model_dump()) for a in answer.auftraege if a.agent in known][:MAX_AUFTRAEGE], outcome


async def _erste_auftraege(deps: Deps, state: TurnState, plan: PlanRecord) -> list[Auftrag]:
    """Round 0: the model's orders, else one by rule (named fallback `planner_regeln`: a dictated
    form of any kind first, then the router's management), else none."""
    rest, outcome = await _auftraege(deps, state, plan)
    rest = nur_verlangte_aenderungen(deps, state, rest or [])
    if rest:
        return woertlich(deps, state, rest)
    text = state.stimulus.text
    by_rule = regeln.diktat(state.route.management, text) or regeln.auftrag(state.route.management, text)
    if by_rule is None:
        return []
    log.warning("planner: fallback planner_regeln (answer %s): %s/%s by rule", outcome, by_rule["agent"],
                by_rule["aktion"])
    deps.trace.decision(NAME, "planner.quelle", "planner_regeln", {"antwort": outcome})
    return [Auftrag.model_validate(by_rule)]


def woertlich(deps: Deps, state: TurnState, rest: list[Auftrag]) -> list[Auftrag]:
    """A dictated request ("Notiz Einkauf: Milch, Brot", "Trag einen Termin ein: Zahnarzt, morgen
    um 14 Uhr") is written as dictated: the model's order of that kind gets the words the person
    spelled out, and where the model named no such order, the dictated one comes first (named
    fallback `diktat_woertlich`). Everything else the model planned stays."""
    d = regeln.diktat(state.route.management, state.stimulus.text)
    if d is None:
        return rest
    same = next((a for a in rest if (a.agent, a.aktion) == (d["agent"], d["aktion"])), None)
    if same is not None and all(same.parameter.get(k) == v for k, v in d["parameter"].items()):
        return rest
    log.warning("planner: fallback diktat_woertlich: %s/%s with the dictated %s", d["agent"], d["aktion"],
                ", ".join(d["parameter"]))
    deps.trace.decision(NAME, "planner.quelle", "diktat_woertlich",
                        {"modell": same.parameter if same is not None else None, "diktat": d["parameter"]})
    if same is not None:
        return [a.model_copy(update={"parameter": {**a.parameter, **d["parameter"]}}) if a is same else a for a in rest]
    return [Auftrag.model_validate(d), *rest][:MAX_AUFTRAEGE]


def ohne_wiederholung(rest: list[Auftrag], plan: PlanRecord) -> tuple[list[Auftrag], list[Auftrag]]:
    """The orders minus those of a kind (agent, action) this turn has done and no longer had
    planned: a model that names its finished order again does not write it twice."""
    done = {(r.auftrag.agent, r.auftrag.aktion) for r in plan.agent_results if r.auftrag}
    planned = {(a.agent, a.aktion) for a in plan.offen}
    keep = [a for a in rest if (a.agent, a.aktion) not in done or (a.agent, a.aktion) in planned]
    return keep, [a for a in rest if a not in keep]


AENDERND = ("aendern", "verschieben", "loeschen")
"""Actions that change what an earlier order of the same agent wrote."""


def nur_verlangte_aenderungen(deps: Deps, state: TurnState, rest: list[Auftrag]) -> list[Auftrag]:
    """An order that changes, moves or deletes what is stored (`AENDERND`) runs only when the
    message asks for a change (`regeln.aenderung_verlangt`): a question the model answered with
    "notizen/loeschen" loses nothing (named fallback `aenderung_ungefragt`)."""
    if regeln.aenderung_verlangt(state.stimulus.text):
        return rest
    weg = [a for a in rest if a.aktion in AENDERND]
    if weg:
        log.warning("planner: fallback aenderung_ungefragt: %s dropped, the message asks for no change",
                    ", ".join(f"{a.agent}/{a.aktion}" for a in weg))
        deps.trace.decision(NAME, "planner.quelle", "aenderung_ungefragt",
                            {"verworfen": [f"{a.agent}/{a.aktion}" for a in weg]})
    return [a for a in rest if a not in weg]


def diktat_bleibt(deps: Deps, state: TurnState, plan: PlanRecord, rest: list[Auftrag]) -> list[Auftrag]:
    """Once the dictated order of this turn is done, the planner's later orders do not change what
    was dictated: an order of the same agent that changes, moves or deletes (`AENDERND`) is dropped
    (named fallback `diktat_bleibt`) — the model re-planning after the result had the note written
    again in its own words."""
    d = regeln.diktat(state.route.management, state.stimulus.text) if state.route else None
    if d is None or not any(r.auftrag and (r.auftrag.agent, r.auftrag.aktion) == (d["agent"], d["aktion"])
                            and r.status == "abgeschlossen" for r in plan.agent_results):
        return rest
    weg = [a for a in rest if a.agent == d["agent"] and a.aktion in AENDERND]
    if weg:
        log.warning("planner: fallback diktat_bleibt: %s dropped, the dictated %s/%s is written",
                    ", ".join(f"{a.agent}/{a.aktion}" for a in weg), d["agent"], d["aktion"])
        deps.trace.decision(NAME, "planner.quelle", "diktat_bleibt", {"verworfen": [f"{a.agent}/{a.aktion}" for a in weg]})
    return [a for a in rest if a not in weg]


async def _neu_entscheiden(deps: Deps, state: TurnState, plan: PlanRecord) -> list[Auftrag]:
    """After each agent result the planner decides again what is still needed (seed 003, E9:
    a loop, not a queue); without a usable answer the rest of its plan stands (named fallback)."""
    rest, outcome = await _auftraege(deps, state, plan)
    if rest is None:
        log.warning("planner: fallback plan_beibehalten (answer %s): %d planned orders stay", outcome, len(plan.offen))
        deps.trace.decision(NAME, "planner.neu", "plan_beibehalten", {"antwort": outcome, "offen": len(plan.offen)})
        return list(plan.offen)
    rest, wiederholt = ohne_wiederholung(rest, plan)
    rest = nur_verlangte_aenderungen(deps, state, diktat_bleibt(deps, state, plan, rest))
    if wiederholt:
        log.warning("planner: fallback wiederholung_verworfen: %s already done in this turn",
                    ", ".join(f"{a.agent}/{a.aktion}" for a in wiederholt))
    deps.trace.decision(NAME, "planner.neu", "weiter" if rest else "genug",
                        {"vorher": [f"{a.agent}/{a.aktion}" for a in plan.offen],
                         "jetzt": [f"{a.agent}/{a.aktion}" for a in rest],
                         "wiederholt": [f"{a.agent}/{a.aktion}" for a in wiederholt]})
    return rest


async def run(state: TurnState, deps: Deps) -> dict:
    plan = state.plan or PlanRecord()
    route = state.route
    if plan.schleifen == 0:
        if route is None or route.management == "keins":
            deps.trace.decision(NAME, "planner.entscheidung", "kein_agent", {})
            return {"plan": plan.model_copy(update={"schleifen": 1})}
        vorwaermen_starten()  # the agents' libraries load beside the model call that picks one
        rest = await _erste_auftraege(deps, state, plan)
        if not rest:
            log.warning("planner: fallback rueckfrage: management %r but no usable order", route.management)
            block = (f"Rueckfrage: {state.pair.character_name} hat verstanden, dass etwas zu {route.management} "
                     f"erledigt werden soll, und fragt genau nach, was.")
            deps.trace.decision(NAME, "planner.entscheidung", "rueckfrage_ohne_auftrag", {})
            return {"plan": plan.model_copy(update={"schleifen": 1, "task_block": block})}
    else:
        rest = await _neu_entscheiden(deps, state, plan)
    if rest:
        nxt, rest = rest[0], rest[1:]
        deps.trace.decision(NAME, "planner.entscheidung", "agent", {"agent": nxt.agent, "aktion": nxt.aktion})
        return {"plan": plan.model_copy(update={"agent_name": nxt.agent, "auftrag": nxt, "offen": rest,
                                                "schleifen": plan.schleifen + 1})}
    block, cut = task_block(state.pair.character_name, plan.agent_results)
    deps.trace.decision(NAME, "planner.entscheidung", "fertig",
                        {"ergebnisse": [r.status for r in plan.agent_results], "kontext_schnitt": cut})
    return {"plan": plan.model_copy(update={"agent_name": "", "auftrag": None, "offen": [], "task_block": block,
                                            "task_context_cut": cut, "schleifen": plan.schleifen + 1})}
