"""corrector: rewrite the reply from the tribunal's verdict, in her voice, against the same
[FAKTEN] the tribunal judged with (today, the turn's appointments, what agents completed, the
memory shaped for the judging nodes) and the human's directives. An empty rewrite keeps the
previous version (the last acceptable one ships). `umschreiben` is the one way to ask for a
rewrite: the leak guard uses it too. A rewrite asks for the budget of the reply it rewrites: the
turn's span, as `responder.antwort_budget` asks for it (seed 004 §3.3: "Der Raum setzt `umfang`,
die Tabelle `UMFANG_SPANNE` übersetzt ihn in Zeichen"), not a default of its own, so a corrected
long reply keeps its length (`rewrite_budget`). A rewrite the budget still cut is closed at its
last full sentence, as the responder's reply is (`pipeline/satzende.py`, decision
`corrector.kappung`)."""
from __future__ import annotations

import logging

from pipeline import llm_json, satzende
from pipeline.fakten import block as fakten_block
from pipeline.node import Node
from pipeline.node_config import antwort_budget
from pipeline.services import Deps
from core.state import HaltungRecord, TurnState

NAME = "corrector"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "kontext", "route", "plan", "haltung", "urteil"),
    writes=("urteil",),
)

log = logging.getLogger("novaberg.node.corrector")


def rewrite_budget(state: TurnState, deps: Deps) -> int:
    """The tokens a rewrite asks for: the budget of the reply it rewrites, the one the responder
    asked for this turn's span (`responder.antwort_budget`: the span's top with its room, capped by
    the responder's budget; the record's default span when haltungsraum did not run); an override
    the settings name for the corrector itself caps it too."""
    spanne = antwort_budget("responder", (state.haltung or HaltungRecord()).spanne_zeichen, deps.settings)
    eigenes = deps.settings.node_max_tokens.get(NAME)
    return spanne if eigenes is None else min(spanne, eigenes)


async def umschreiben(deps: Deps, state: TurnState, antwort: str, gruende: list[str]) -> tuple[str | None, str]:
    """The corrector's rewrite of `antwort` for the named defects, with the reply's budget
    (`rewrite_budget`): (text or None, outcome)."""
    model = await deps.llm.model_name()
    max_tokens = rewrite_budget(state, deps)
    text, outcome = await llm_json.ask(deps, NAME, {
        "character_name": state.pair.character_name, "fakten": fakten_block(state, deps, model),
        "direktiven": "\n".join(f"- {d}" for d in state.pair.direktiven) or "- keine",
        "nachricht": state.stimulus.text, "antwort": antwort,
        "gruende": "\n".join(f"- {g}" for g in gruende) or "- (ohne Begruendung)"}, max_tokens=max_tokens)
    if outcome == "gekappt":
        text = satzende.gekappt(deps, NAME, text, {"budget_token": max_tokens, "zeichen_vorlage": len(antwort)})
    return text, outcome


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    u = state.urteil
    gruende = u.urteile[-1].gruende if u.urteile else []
    text, outcome = await umschreiben(deps, state, u.reply, gruende)
    if text:
        deps.trace.decision(NAME, "corrector.ergebnis", "korrigiert", {"runde": u.runden + 1, "zeichen": len(text)})
        return {"urteil": u.model_copy(update={"reply": text, "runden": u.runden + 1})}
    log.warning("corrector: fallback vorige_fassung: empty rewrite (%s); the previous version stays", outcome)
    deps.trace.decision(NAME, "corrector.ergebnis", "vorige_fassung", {"runde": u.runden + 1, "antwort": outcome})
    return {"urteil": u.model_copy(update={"runden": u.runden + 1})}
