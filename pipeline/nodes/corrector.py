"""corrector: rewrite the reply from the tribunal's verdict, in her voice, against the same
[FAKTEN] the tribunal judged with (today, the turn's appointments, what agents completed, the
memory shaped for the judging nodes) and the human's directives. An empty rewrite keeps the
previous version (the last acceptable one ships). `umschreiben` is the one way to ask for a
rewrite: the leak guard uses it too. A rewrite the token budget cut is closed at its last full
sentence, as the responder's reply is (`pipeline/satzende.py`, decision `corrector.kappung`)."""
from __future__ import annotations

import logging

from pipeline import satzende
from pipeline.fakten import block as fakten_block
from pipeline.llm_json import ask
from pipeline.node import Node
from pipeline.node_config import budget
from pipeline.services import Deps
from core.state import TurnState

NAME = "corrector"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "kontext", "route", "plan", "urteil"),
    writes=("urteil",),
)

log = logging.getLogger("novaberg.node.corrector")


async def umschreiben(deps: Deps, state: TurnState, antwort: str, gruende: list[str]) -> tuple[str | None, str]:
    """The corrector's rewrite of `antwort` for the named defects: (text or None, outcome)."""
    model = await deps.llm.model_name()
    text, outcome = await ask(deps, NAME, {
        "character_name": state.pair.character_name, "fakten": fakten_block(state, deps, model),
        "direktiven": "\n".join(f"- {d}" for d in state.pair.direktiven) or "- keine",
        "nachricht": state.stimulus.text, "antwort": antwort,
        "gruende": "\n".join(f"- {g}" for g in gruende) or "- (ohne Begruendung)"})
    if outcome == "gekappt":
        text = satzende.gekappt(deps, NAME, text, {"budget_token": budget(NAME, deps.settings)})
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
