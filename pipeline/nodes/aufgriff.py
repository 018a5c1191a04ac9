"""aufgriff (background): plan a later impulse — Nova's own thought — as a future event of the
pair. Scheduled in Redis (`impulse:faellig`, scored by due time); a worker delivers it to the
pair's event queue when it is due. Once per turn: a redelivered background job plans nothing again."""
from __future__ import annotations

import logging
import time
import uuid

from pydantic import BaseModel, ConfigDict

from memory.session_store import DUE_KEY  # noqa: F401 (where the planned impulses wait)
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
MAX_OFFEN_JE_PAAR = 3


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    aufgreifen: bool = False
    gedanke: str = ""
    in_minuten: float = 60


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
    if await deps.impulse.geplant(s.user_id, s.character_id, s.turn_id):
        log.info("aufgriff: turn %s planned its impulse already (a redelivered job); nothing planned", s.turn_id)
        deps.trace.decision(NAME, "aufgriff.plan", "schon_geplant", {})
        return {}
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "kern": h.kern or s.text, "mensch": s.text})
    if answer is None or not answer.aufgreifen or not answer.gedanke.strip():
        deps.trace.decision(NAME, "aufgriff.plan", "keiner" if answer else f"keiner_{outcome}", {})
        return {}
    if await deps.impulse.offen(s.user_id, s.character_id) >= MAX_OFFEN_JE_PAAR:
        deps.trace.decision(NAME, "aufgriff.plan", "verworfen_grenze", {"offen": MAX_OFFEN_JE_PAAR})
        return {}
    minutes = min(max(answer.in_minuten, 1.0), 7 * 24 * 60)
    # the id names the turn it came from: the open entry and the impulse's own turn (`imp-{id}`) carry it
    impulse = {"id": f"{s.turn_id}-{uuid.uuid4().hex[:8]}", "user_id": s.user_id, "character_id": s.character_id,
               "gedanke": answer.gedanke.strip()[:300], "aus_turn": s.turn_id}
    # once per turn: a redelivered background job finds the turn's marker and plans nothing again
    neu = await deps.impulse.planen(impulse, time.time() + minutes * 60)
    deps.trace.decision(NAME, "aufgriff.plan", "geplant" if neu else "schon_geplant", {"in_minuten": minutes})
    return {}
