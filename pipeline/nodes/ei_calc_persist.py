"""ei_calc_persist: consolidate Nova's emotion state (computed state and perceived reply) and
persist it for the next turn's db_zugriff."""
from __future__ import annotations

from pipeline import vocab
from pipeline.services import Deps
from pipeline.state import TurnState

NAME = "ei_calc_persist"
READS = ("stimulus", "emotion", "nova_perzeption")
WRITES = ()


async def run(state: TurnState, deps: Deps) -> dict:
    s, e, p = state.stimulus, state.emotion, state.nova_perzeption
    emotion = p.emotion if p else (e.nova_emotion if e else "neutral")
    arousal = round(0.5 * (p.arousal if p else 0.3) + 0.5 * (e.nova_arousal if e else 0.3), 4)
    verlauf = (e.emotions_verlauf[:5] if e else [])
    await deps.store.call("charakter.save_emotion", s.user_id, s.character_id, vocab.pick(emotion, vocab.EMOTIONEN, "neutral"),
                          arousal, e.emotions_vektor if e else None, verlauf)
    deps.trace.decision(NAME, "ei_calc_persist.gespeichert", emotion, {"arousal": arousal})
    return {}
