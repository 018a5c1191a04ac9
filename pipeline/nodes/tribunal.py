"""tribunal: judge the reply against the situation — what was asked, the directives, the facts,
the Thinker's annotations as qualified hints. It sees the situation apart from the object it
judges, and writes a verdict with reasons."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pipeline.figur import figur
from pipeline.llm_json import ask_json, wort
from pipeline.services import Deps
from pipeline.state import TurnState, UrteilRecord, current_reply

NAME = "tribunal"
READS = ("stimulus", "pair", "draft", "pruefung", "urteil")
WRITES = ("urteil",)


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    urteil: str = wort(("ok", "mangel"), "ok")
    gruende: list[str] = Field(default_factory=list)


async def run(state: TurnState, deps: Deps) -> dict:
    u = state.urteil or UrteilRecord(reply=current_reply(state))
    reply = u.reply or current_reply(state)
    hinweise = "; ".join(state.pruefung.node_annotations) if state.pruefung and state.pruefung.node_annotations else "keine"
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "figur": figur(state.pair), "nachricht": state.stimulus.text,
        "direktiven": "; ".join(state.pair.direktiven) or "keine", "hinweise": hinweise, "antwort": reply})
    if answer is None:
        verdict = {"urteil": "unklar", "gruende": [f"tribunal_{outcome}"], "runde": u.runden}
    else:
        v = answer.urteil.strip().lower()
        verdict = {"urteil": v if v in ("ok", "mangel") else "unklar", "gruende": answer.gruende[:5], "runde": u.runden}
    deps.trace.decision(NAME, "tribunal.urteil", verdict["urteil"], {"runde": u.runden, "gruende": verdict["gruende"]})
    return {"urteil": u.model_copy(update={"urteile": u.urteile + [verdict], "reply": reply})}
