"""enricher (spine stage): the session turns of the pair and the embedding of the stimulus.

Seed 001 specifies the full enricher (query rewriting, KZG/LZG, goals, library); this stage reads
the Redis session window (SESSION_MAX_TURNS) and embeds the stimulus, which the dispatcher stores
with the turn record.
"""
from __future__ import annotations

import logging

from memory import session
from pipeline.services import Deps
from pipeline.state import MemoryRecord, SessionTurn, TurnState

NAME = "enricher"
READS = ("stimulus",)
WRITES = ("memory",)

log = logging.getLogger("novaberg.node.enricher")


class SessionDefect(RuntimeError):
    """The session holds turns but none could be read: a defect, not an empty conversation."""


async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    r = deps.redis
    raw = await session.load_turns(r, s.user_id, s.character_id, deps.settings.session_max_turns)
    if not raw:
        stored = await session.count_turns(r, s.user_id, s.character_id)
        if stored:
            # seed 001: an empty history beside existing turns is a defect and must be loud
            raise SessionDefect(f"session of {s.user_id}:{s.character_id} holds {stored} turns, read 0")
    turns = [SessionTurn.model_validate(t) for t in raw]
    deps.trace.decision(NAME, "enricher.verlauf", "verlauf" if turns else "verlauf_leer",
                        {"gelesen": len(turns), "fenster": deps.settings.session_max_turns})
    vec = await deps.embedder.embed(deps.trace, s.text)
    return {"memory": MemoryRecord(session_turns=turns, query_embedding=vec)}
