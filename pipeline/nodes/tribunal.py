"""tribunal: judge the reply against the situation — what was asked, the directives, the facts,
the Thinker's annotations as qualified hints (seed 000 §6). It sees the situation apart from the
object it judges (seed 004 §6: [LAGE] and [FAKTEN], then [ANTWORT]), and writes a verdict with
reasons. What stays the same for a pair comes first (the figure and the directives in [LAGE], the
standing part of [FAKTEN]); what this turn brings — [NACHRICHT VON PERSON B], [HINWEISE VORHERIGER
PRUEFUNGEN], the reply — comes last, so an engine reuses the first part from the turn before.

[FAKTEN] (pipeline/fakten.py) carries today in the pair's time zone, the appointments the turn
asked for, what agents completed in this turn and the memory the reducer shaped for the judging
nodes: a wrong weekday or an invented appointment is a defect the tribunal can see.

A verdict it cannot use is `unklar`, with the reason named: the model's answer was no usable
JSON (`tribunal_kein_json`, …), its word lay outside ok/mangel (`urteil_unbekannt`), or it said
`mangel` without a reason (`mangel_ohne_gruende`: the corrector would have nothing to fix —
seed 000 §2a's `korrektur_ohne_text` is the same case in the Thinker). evaluate decides what an
unclear verdict means."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pipeline.fakten import block as fakten_block
from pipeline.figur import figur
from pipeline.llm_json import ask_json, wort
from pipeline.node import Node
from pipeline.services import Deps
from core.state import TurnState, Urteil, UrteilRecord, current_reply

NAME = "tribunal"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "kontext", "route", "plan", "draft", "pruefung", "urteil"),
    writes=("urteil",),
)


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    urteil: str = wort(("ok", "mangel"), "ok")
    gruende: list[str] = Field(default_factory=list)


def verdict_of(answer: _Antwort | None, outcome: str, runde: int) -> Urteil:
    if answer is None:
        return Urteil(urteil="unklar", gruende=[f"tribunal_{outcome}"], runde=runde)
    v = answer.urteil.strip().lower()
    gruende = [g.strip() for g in answer.gruende if g.strip()][:5]
    if v not in ("ok", "mangel"):
        return Urteil(urteil="unklar", gruende=["urteil_unbekannt"], runde=runde)
    if v == "mangel" and not gruende:
        return Urteil(urteil="unklar", gruende=["mangel_ohne_gruende"], runde=runde)
    return Urteil(urteil=v, gruende=gruende, runde=runde)


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    u = state.urteil or UrteilRecord(reply=current_reply(state))
    reply = u.reply or current_reply(state)
    hinweise = "; ".join(state.pruefung.node_annotations) if state.pruefung and state.pruefung.node_annotations else "keine"
    model = await deps.llm.model_name()
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "figur": figur(state.pair), "nachricht": state.stimulus.text,
        "direktiven": "; ".join(state.pair.direktiven) or "keine", "hinweise": hinweise,
        "fakten": fakten_block(state, deps, model), "antwort": reply})
    verdict = verdict_of(answer, outcome, u.runden)
    deps.trace.decision(NAME, "tribunal.urteil", verdict.urteil, {
        "runde": u.runden, "gruende": verdict.gruende,
        "termine": len(state.route.termine) if state.route else 0})
    return {"urteil": u.model_copy(update={"urteile": u.urteile + [verdict], "reply": reply})}
