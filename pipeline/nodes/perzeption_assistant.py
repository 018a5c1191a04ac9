"""perzeption_assistant: perceive Nova's own reply (emotion, arousal, style) for her turn record."""
from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict

from pipeline import vocab
from pipeline.llm_json import ask_json, wort
from pipeline.node import Node
from pipeline.services import Deps
from core.state import NovaPerzeptionRecord, TurnState, current_reply
from pipeline.trace import Slot

NAME = "perzeption_assistant"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "draft", "pruefung", "urteil", "emotion"),
    writes=("nova_perzeption",),
    early_without=("urteil",),
)
"""Its model call starts early (`voraus`), on the reply as it stands after the Thinker, beside the
tribunal loop and the leak guard, which pass it unchanged in most turns; `run` keeps that answer
when the reply it perceives is the same text, and asks anew when not."""
GEFRAGT: Slot[str] = Slot(f"{NAME}.gefragt")
"""The reply text the early call asked about."""

log = logging.getLogger("novaberg.node.perzeption_assistant")


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    emotion: str = wort(vocab.EMOTIONEN, "neutral")
    arousal: float = 0.3
    stil: str = wort(vocab.SPRACHSTILE, "locker")


FRAGE: Slot = Slot(f"{NAME}.frage")
"""The early call's future; `GEFRAGT` holds the reply text it was asked about."""


def _fragen(deps: Deps, name: str, antwort: str):
    return ask_json(deps, NAME, _Antwort, {"character_name": name, "antwort": antwort,
                                           "emotionen": ", ".join(vocab.EMOTIONEN), "stile": ", ".join(vocab.SPRACHSTILE)})


@NODE.early_start
def voraus(state: TurnState, deps: Deps) -> None:
    """The model call on the reply before the tribunal loop (the Thinker's, else the draft)."""
    antwort = state.pruefung.reply if state.pruefung and state.pruefung.reply else state.draft.reply
    deps.trace.put(GEFRAGT, antwort)
    deps.trace.start_once(FRAGE, lambda: _fragen(deps, state.pair.character_name, antwort))


async def _wahrnehmung(state: TurnState, deps: Deps, antwort: str):
    """The early answer when it was asked about this very text, else a call now (named fallback
    `voraus_verworfen` when an early one was about another text: the tribunal loop or the leak
    guard changed the reply)."""
    frueh = deps.trace.started_in(FRAGE)
    if frueh is not None and deps.trace.get(GEFRAGT) == antwort:
        try:
            return await frueh
        except Exception:
            log.warning("perzeption_assistant: fallback voraus_fehlgeschlagen: the early call failed; asked anew",
                        exc_info=True)
    elif frueh is not None:
        frueh.cancel()
        log.warning("perzeption_assistant: fallback voraus_verworfen: the reply changed after the early call "
                    "(turn %s); her reply is perceived anew", deps.trace.turn_id)
    return await _fragen(deps, state.pair.character_name, antwort)


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    answer, outcome = await _wahrnehmung(state, deps, current_reply(state))
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
