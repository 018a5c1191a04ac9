"""perzeption_assistant: perceive Nova's own reply (emotion, arousal, style) for her turn record."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pipeline import vocab
from pipeline.llm_json import ask_json, wort
from pipeline.services import Deps
from pipeline.state import NovaPerzeptionRecord, TurnState, current_reply

NAME = "perzeption_assistant"
READS = ("stimulus", "pair", "draft", "pruefung", "urteil", "emotion")
WRITES = ("nova_perzeption",)


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    emotion: str = wort(vocab.EMOTIONEN, "neutral")
    arousal: float = 0.3
    stil: str = wort(vocab.SPRACHSTILE, "locker")


async def run(state: TurnState, deps: Deps) -> dict:
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "antwort": current_reply(state),
        "emotionen": ", ".join(vocab.EMOTIONEN), "stile": ", ".join(vocab.SPRACHSTILE)})
    if answer is None:
        # her computed state stands in for the perceived one
        e = state.emotion
        rec = NovaPerzeptionRecord(emotion=e.nova_emotion if e else "neutral", arousal=e.nova_arousal if e else 0.3,
                                   wahrgenommen=False)
    else:
        rec = NovaPerzeptionRecord(emotion=vocab.pick(answer.emotion.lower(), vocab.EMOTIONEN, "neutral"),
                                   arousal=min(max(answer.arousal, 0.0), 1.0),
                                   stil=vocab.pick(answer.stil.lower(), vocab.SPRACHSTILE, "locker"))
    deps.trace.decision(NAME, "perzeption_assistant.ergebnis", "ok" if answer else "aus_ei_calc",
                        {"emotion": rec.emotion, "antwort": outcome})
    return {"nova_perzeption": rec}
