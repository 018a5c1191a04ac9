"""aufgriff (background): plan a later impulse — Nova's own thought — as a future event of the
pair. Scheduled in Redis (`impulse:faellig`, scored by due time); a worker delivers it to the
pair's event queue when it is due. Once per turn: a redelivered background job plans nothing again."""
from __future__ import annotations

import json
import logging
import time
import uuid

from pydantic import BaseModel, ConfigDict

from pipeline.llm_json import ask_json
from pipeline.node import Node
from pipeline.services import Deps
from core.state import HintergrundRecord, TurnState

log = logging.getLogger("novaberg.node.aufgriff")

NAME = "aufgriff"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "hintergrund"),
    writes=(),
)
DUE_KEY = "impulse:faellig"
MAX_OFFEN_JE_PAAR = 3


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    aufgreifen: bool = False
    gedanke: str = ""
    in_minuten: float = 60


MARKER_TTL_S = 7 * 24 * 3600
_PLANEN = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', tonumber(ARGV[2])) then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
  redis.call('SADD', KEYS[3], ARGV[1])
  return 1
end
return 0
"""
"""The turn's marker, the impulse and its open entry, together or not at all."""


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    h = state.hintergrund or HintergrundRecord()
    if s.herkunft != "user":
        deps.trace.decision(NAME, "aufgriff.plan", "kein_nutzerreiz", {})
        return {}
    if s.datiert:  # a replayed message (an operator's date): its "later" has passed, and an impulse
        # delivered now would stand, dated today, between the replay's messages
        deps.trace.decision(NAME, "aufgriff.plan", "datiert", {"zeitpunkt": s.received_at.isoformat()})
        return {}
    marker = f"aufgriff:geplant:{s.user_id}:{s.character_id}:{s.turn_id}"
    if await deps.redis.exists(marker):
        log.info("aufgriff: turn %s planned its impulse already (a redelivered job); nothing planned", s.turn_id)
        deps.trace.decision(NAME, "aufgriff.plan", "schon_geplant", {})
        return {}
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "kern": h.kern or s.text, "mensch": s.text})
    if answer is None or not answer.aufgreifen or not answer.gedanke.strip():
        deps.trace.decision(NAME, "aufgriff.plan", "keiner" if answer else f"keiner_{outcome}", {})
        return {}
    pending = f"impulse:offen:{s.user_id}:{s.character_id}"
    if await deps.redis.scard(pending) >= MAX_OFFEN_JE_PAAR:
        deps.trace.decision(NAME, "aufgriff.plan", "verworfen_grenze", {"offen": MAX_OFFEN_JE_PAAR})
        return {}
    minutes = min(max(answer.in_minuten, 1.0), 7 * 24 * 60)
    # the id names the turn it came from: the open entry and the impulse's own turn (`imp-{id}`) carry it
    impulse = {"id": f"{s.turn_id}-{uuid.uuid4().hex[:8]}", "user_id": s.user_id, "character_id": s.character_id,
               "gedanke": answer.gedanke.strip()[:300], "aus_turn": s.turn_id}
    # once per turn: a redelivered background job finds the turn's marker and plans nothing again
    neu = await deps.redis.eval(_PLANEN, 3, marker, DUE_KEY, pending, impulse["id"], MARKER_TTL_S,
                                time.time() + minutes * 60, json.dumps(impulse))
    deps.trace.decision(NAME, "aufgriff.plan", "geplant" if neu else "schon_geplant", {"in_minuten": minutes})
    return {}
