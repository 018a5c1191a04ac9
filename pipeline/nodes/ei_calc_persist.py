"""ei_calc_persist: consolidate Nova's emotion state (computed state and perceived reply) and
persist it for the next turn's db_zugriff.

The pull of her emotional memories (emotionale_gravitation) acts once per turn: on this reply's
emotion, before the responder, so the computed side consolidated here is the pulled one and the
reply was written under it (decision `ei_calc_persist.gravitation` = `im_turn`). Only a turn
whose pull had no emotion of ei_calc to act on (`gravitation.emotion` None) is pulled here.

Only the next turn reads it, so it leaves the reply's path: the node writes the state as a
record, and the dispatcher persists it in the turn's atomic commit (Redis, where the next turn's
db_zugriff reads it first) and in the turn's outbox job (Postgres, for a pair whose Redis state
is gone). The turn's path no longer waits for a Postgres write of its own."""
from __future__ import annotations

from pipeline import vocab
from pipeline.node import Node
from pipeline.services import Deps
from core.state import GravitationRecord, NovaZustandRecord, TurnState

NAME = "ei_calc_persist"
NODE = Node(
    name=NAME,
    reads=("stimulus", "emotion", "nova_perzeption", "gravitation"),
    writes=("nova_zustand",),
)
ZUG_AROUSAL = 0.3
"""Share of the pull's term by which remembered emotion raises her arousal toward 1."""
ZUG_RICHTUNG = 0.5
"""From this term on, the remembered emotion takes her over when it lies in the other sector."""


def gezogen(emotion: str, arousal: float, g: GravitationRecord | None) -> tuple[str, float, str]:
    """Nova's state after the pull of her emotional memories: (emotion, arousal, outcome)."""
    if g is None or g.term <= 0 or g.richtung == "neutral":
        return emotion, arousal, "kein_zug"
    arousal = round(arousal + ZUG_AROUSAL * g.term * (1.0 - arousal), 4)
    gegen = vocab.VALENZ.get(g.richtung, 0.0) * vocab.VALENZ.get(emotion, 0.0) <= 0
    if g.term >= ZUG_RICHTUNG and gegen and g.richtung != emotion:
        return g.richtung, arousal, "richtung"
    return emotion, arousal, "erregung"


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s, e, p, g = state.stimulus, state.emotion, state.nova_perzeption, state.gravitation
    im_turn = g is not None and g.emotion is not None
    berechnet = (g.emotion, g.arousal) if im_turn else ((e.nova_emotion, e.nova_arousal) if e else ("neutral", 0.3))
    emotion = p.emotion if p else berechnet[0]
    arousal = round(0.5 * (p.arousal if p else 0.3) + 0.5 * (berechnet[1] if berechnet[1] is not None else 0.3), 4)
    if im_turn:  # the pull acted on this reply already: once per turn
        zug = "im_turn"
    else:
        emotion, arousal, zug = gezogen(emotion, arousal, g)
    deps.trace.decision(NAME, "ei_calc_persist.gravitation", zug,
                        {"term": g.term if g else 0.0, "richtung": g.richtung if g else None,
                         "punkte": g.punkte if g else 0}, threshold=ZUG_RICHTUNG)
    verlauf = [h.model_dump(exclude_unset=True) for h in e.emotions_verlauf[:5]] if e else []
    zustand = NovaZustandRecord(emotion=vocab.pick(emotion, vocab.EMOTIONEN, "neutral"), arousal=arousal,
                                vektor=e.emotions_vektor if e else None, verlauf=verlauf, stand=s.received_at)
    deps.trace.decision(NAME, "ei_calc_persist.gespeichert", emotion, {"arousal": arousal, "mit": "commit"})
    return {"nova_zustand": zustand}
