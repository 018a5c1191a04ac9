"""emotionale_gravitation: memories that carry an emotion pull on Nova's state. The term is the
arousal-and-valence weighted pull of the emotional KZG and LZG entries, normalised onto [0, 1]."""
from __future__ import annotations

from pipeline import vocab
from pipeline.node import Node
from pipeline.services import Deps
from pipeline.state import GravitationRecord, TurnState

NAME = "emotionale_gravitation"
NODE = Node(
    name=NAME,
    reads=("stimulus", "memory"),
    writes=("gravitation",),
)


def compute(punkte: list[dict]) -> GravitationRecord:
    if not punkte:
        return GravitationRecord()
    pull: dict[str, float] = {}
    for p in punkte:
        w = (p.get("arousal") if p.get("arousal") is not None else 0.5) * abs(vocab.VALENZ.get(p["emotion"], 0.0))
        pull[p["emotion"]] = pull.get(p["emotion"], 0.0) + w
    total = sum(pull.values())
    richtung = max(sorted(pull), key=lambda e: pull[e]) if total > 0 else "neutral"
    return GravitationRecord(term=round(total / (1.0 + total), 6), richtung=richtung, punkte=len(punkte))


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    rec = compute(state.memory.emotionale_gravitationspunkte if state.memory else [])
    deps.trace.decision(NAME, "emotionale_gravitation.zug", "zug" if rec.punkte else "kein_zug",
                        {"punkte": rec.punkte, "term": rec.term, "richtung": rec.richtung})
    return {"gravitation": rec}
