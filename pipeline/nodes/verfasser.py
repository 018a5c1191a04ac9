"""verfasser: the content notes of the reply, in third person, from [GEDAECHTNIS], [AUFZEICHNUNGEN]
and [TERMINE]. Skipped on a context cut (an agent acted: the responder must see less, not more —
seed 004, AGT3; §3a: "[GEDAECHTNIS] (bei Agent-Erfolg: weggelassen)").

It receives the attitude's three content quantities (seed 004 §3.3: "Die drei fachlichen Größen
gehen zusätzlich an den Verfasser; `naehe` und `waerme` bleiben hier allein"): the span (`umfang`
and its characters: how many points fit), the energy, and the initiative (whether she leads —
brings in her own point or asks back — or follows him). Nearness and warmth stay with the
responder: they shape her voice, not what she says.

[GEDAECHTNIS] carries its usage lines in the seed's words (seed 004 §3a 3.4): "Informationen aus
dem Langzeitgedaechtnis und aktuellen Notizen. Nutze sie nur wenn der aktuelle Prompt darauf Bezug
nimmt. Erfinde keine Verbindungen zwischen verschiedenen Eintraegen. Mische keine Inhalte
verschiedener Notizen oder Fakten zusammen." The current prompt is [NACHRICHT VON PERSON B]; on an
impulse turn Person B said nothing new, and what a memory is measured against is her own thought,
under [EIGENER GEDANKE] (`verfasser.auftrag`), not a message of his (seed 004 §4: her thought on
his place would claim he said it)."""
from __future__ import annotations

from pipeline.figur import figur
from pipeline.llm_json import ask
from pipeline.node import Node
from pipeline.services import Deps
from core.state import HaltungRecord, TurnState, VerfasserRecord

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


def fachliche_groessen(h: HaltungRecord) -> str:
    """The three content quantities of the attitude, as the [HALTUNG] block says them."""
    fuehrt = "sie fuehrt: ein eigener Punkt oder eine Rueckfrage" if h.initiative >= 0.6 else (
        "sie folgt ihm: kein neues Thema" if h.initiative <= 0.4 else "sie folgt ihm und darf nachfragen")
    return f"Umfang: {h.umfang}, {h.spanne}\nEnergie: {h.energie}\nInitiative: {h.initiative:.1f} ({fuehrt})"


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    if state.plan and state.plan.task_context_cut:
        deps.trace.decision(NAME, "verfasser.lauf", "uebersprungen_kontext_schnitt", {})
        return {"verfasser": VerfasserRecord()}
    gedaechtnis = state.kontext.gedaechtnis_verfasser if state.kontext else ""
    aufzeichnungen = state.memory.aufzeichnungen if state.memory else []
    if not gedaechtnis and not aufzeichnungen and not (state.route and state.route.termine):
        deps.trace.decision(NAME, "verfasser.lauf", "ohne_material", {})
        return {"verfasser": VerfasserRecord()}
    h, s = state.haltung or HaltungRecord(), state.stimulus
    gedanke = s.eigener_gedanke is not None  # an impulse turn: her thought, under its own block
    text, outcome = await ask(deps, NAME, {
        "character_name": state.pair.character_name, "figur": figur(state.pair), "spanne": h.spanne,
        "haltung": fachliche_groessen(h), **({"gedanke": s.eigener_gedanke} if gedanke else {"nachricht": s.text}),
        "gedaechtnis": gedaechtnis or "(nichts)", "termine": _termine(state.route),
        "aufzeichnungen": "\n".join(f"- {f.titel}: {f.auszug}" for f in aufzeichnungen) or "(keine)"},
        parts=("identity", "rules", "auftrag" if gedanke else "task"))
    deps.trace.decision(NAME, "verfasser.lauf", "notizen" if text else f"leer_{outcome}",
                        {"zeichen": len(text or ""), "eigener_gedanke": gedanke})
    return {"verfasser": VerfasserRecord(inhalt=text or "")}
