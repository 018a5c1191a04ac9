"""verfasser: the content notes of the reply, in third person, from [GEDAECHTNIS], [AUFZEICHNUNGEN]
and [TERMINE]; it receives the span. Skipped on a context cut (an agent acted: the responder must
see less, not more — seed 004, AGT3)."""
from __future__ import annotations

from pipeline.figur import figur
from pipeline.llm_json import ask
from pipeline.node import Node
from pipeline.services import Deps
from pipeline.state import HaltungRecord, TurnState, VerfasserRecord

NAME = "verfasser"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "memory", "kontext", "route", "plan", "haltung"),
    writes=("verfasser",),
)


def _termine(route) -> str:
    if not route or not route.termine:
        return "(keine gefragten Termine)"
    return "\n".join(f"- {t['wochentag']}, {t['beginn_lokal'][:16].replace('T', ' ')}: {t['titel']}" for t in route.termine)


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    if state.plan and state.plan.task_context_cut:
        deps.trace.decision(NAME, "verfasser.lauf", "uebersprungen_kontext_schnitt", {})
        return {"verfasser": VerfasserRecord()}
    gedaechtnis = state.kontext.gedaechtnis_verfasser if state.kontext else ""
    files = state.memory.aufzeichnungen if state.memory else []
    if not gedaechtnis and not files and not (state.route and state.route.termine):
        deps.trace.decision(NAME, "verfasser.lauf", "ohne_material", {})
        return {"verfasser": VerfasserRecord()}
    text, outcome = await ask(deps, NAME, {
        "character_name": state.pair.character_name, "figur": figur(state.pair), "spanne": (state.haltung or HaltungRecord()).spanne,
        "gedaechtnis": gedaechtnis or "(nichts)", "nachricht": state.stimulus.text, "termine": _termine(state.route),
        "aufzeichnungen": "\n".join(f"- {f['titel']}: {f['auszug']}" for f in files) or "(keine)"})
    deps.trace.decision(NAME, "verfasser.lauf", "notizen" if text else f"leer_{outcome}", {"zeichen": len(text or "")})
    return {"verfasser": VerfasserRecord(inhalt=text or "")}
