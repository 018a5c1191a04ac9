"""corrector: rewrite the reply from the tribunal's verdict. An empty rewrite keeps the previous
version (the last acceptable one ships)."""
from __future__ import annotations

import logging

from pipeline.llm_json import ask
from pipeline.services import Deps
from pipeline.state import TurnState

NAME = "corrector"
READS = ("stimulus", "pair", "urteil")
WRITES = ("urteil",)

log = logging.getLogger("novaberg.node.corrector")


async def run(state: TurnState, deps: Deps) -> dict:
    u = state.urteil
    gruende = u.urteile[-1]["gruende"] if u.urteile else []
    text, outcome = await ask(deps, NAME, {"character_name": state.pair.character_name,
                                           "nachricht": state.stimulus.text, "antwort": u.reply,
                                           "gruende": "\n".join(f"- {g}" for g in gruende) or "- (ohne Begruendung)"})
    if text:
        deps.trace.decision(NAME, "corrector.ergebnis", "korrigiert", {"runde": u.runden + 1, "zeichen": len(text)})
        return {"urteil": u.model_copy(update={"reply": text, "runden": u.runden + 1})}
    log.warning("corrector: fallback vorige_fassung: empty rewrite (%s); the previous version stays", outcome)
    deps.trace.decision(NAME, "corrector.ergebnis", "vorige_fassung", {"runde": u.runden + 1, "antwort": outcome})
    return {"urteil": u.model_copy(update={"runden": u.runden + 1})}
