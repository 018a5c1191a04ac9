"""emotionale_gravitation: memories that carry an emotion pull on Nova's state. The term is the
arousal-and-valence weighted pull of the emotional KZG and LZG entries, normalised onto [0, 1].

When the pull acts: on this reply. The seeds give no sentence on the time; they give the place.
Seed 001 §2 puts the node right after the enricher and before the responder (`enricher →
emotionale_gravitation → reducer → … → responder → … → ei_calc_persist`, the consumer of
`emotionale_gravitationspunkte` per §4), where the responder's block of her emotion (seed 004 §3.1
[PERSON A — IHRE EMOTION], before 13.08.2026 [EIGENE_EMOTION], §3a: "Novas berechneter
Emotionszustand … Gibt Nova eine eigene emotionale Grundfärbung pro Turn") reads the state the
nodes before it computed, and ei_calc_persist, at the chain's end, "Konsolidiert
`internal.emotion` und persistiert am CG-Ausgang" (seed 001, references of §5). A pull that reached only the stored state would need no place
before the responder. So the node
applies the pull (the rule of `ei_calc_persist.gezogen`: arousal raised by the term, the emotion
taken over from `ZUG_RICHTUNG` on when it lies in the other sector) to the emotion ei_calc computed
for this turn, and the record carries the result (`emotion`, `arousal`) for the responder's
[PERSON A — IHRE EMOTION]. The term and direction stay in the record for ei_calc_persist, which
lets the pull act on the consolidated state it stores for the next turn. Decisions:
`emotionale_gravitation.zug` (the pull) and `emotionale_gravitation.emotion` (this reply's emotion
after it: kein_zug, erregung, richtung, or keine_emotion when ei_calc gave none)."""
from __future__ import annotations

from pipeline import vocab
from pipeline.node import Node
from pipeline.nodes.ei_calc_persist import ZUG_RICHTUNG, gezogen
from pipeline.services import Deps
from core.state import GravitationRecord, GravitationsPunkt, TurnState

NAME = "emotionale_gravitation"
NODE = Node(
    name=NAME,
    reads=("stimulus", "memory", "emotion"),
    writes=("gravitation",),
)


def compute(punkte: list[GravitationsPunkt]) -> GravitationRecord:
    if not punkte:
        return GravitationRecord()
    pull: dict[str, float] = {}
    for p in punkte:
        w = (p.arousal if p.arousal is not None else 0.5) * abs(vocab.VALENZ.get(p.emotion, 0.0))
        pull[p.emotion] = pull.get(p.emotion, 0.0) + w
    total = sum(pull.values())
    richtung = max(sorted(pull), key=lambda e: pull[e]) if total > 0 else "neutral"
    return GravitationRecord(term=round(total / (1.0 + total), 6), richtung=richtung, punkte=len(punkte))


def auf_diesen_turn(rec: GravitationRecord, emotion: str | None, arousal: float) -> tuple[GravitationRecord, str]:
    """The record with Nova's emotion for this reply after the pull, and the outcome."""
    if emotion is None:
        return rec, "keine_emotion"
    e, a, zug = gezogen(emotion, arousal, rec)
    return rec.model_copy(update={"emotion": e, "arousal": min(max(a, 0.0), 1.0)}), zug


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    rec = compute(state.memory.emotionale_gravitationspunkte if state.memory else [])
    deps.trace.decision(NAME, "emotionale_gravitation.zug", "zug" if rec.punkte else "kein_zug",
                        {"punkte": rec.punkte, "term": rec.term, "richtung": rec.richtung})
    e = state.emotion
    rec, zug = auf_diesen_turn(rec, e.nova_emotion if e else None, e.nova_arousal if e else 0.3)
    deps.trace.decision(NAME, "emotionale_gravitation.emotion", zug,
                        {"vorher": [e.nova_emotion, e.nova_arousal] if e else None,
                         "nachher": [rec.emotion, rec.arousal], "term": rec.term, "richtung": rec.richtung},
                        threshold=ZUG_RICHTUNG)
    return {"gravitation": rec}
