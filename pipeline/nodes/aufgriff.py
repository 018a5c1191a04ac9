"""aufgriff (background): plan a later impulse — Nova's own thought — as a future event of the
pair. Scheduled in Redis (`impulse:faellig`, scored by due time); a worker delivers it to the
pair's event queue when it is due."""
from __future__ import annotations

import json
import time
import uuid

from pydantic import BaseModel, ConfigDict

from pipeline.llm_json import ask_json
from pipeline.services import Deps
from pipeline.state import HintergrundRecord, TurnState

NAME = "aufgriff"
READS = ("stimulus", "pair", "hintergrund")
WRITES = ("hintergrund",)
DUE_KEY = "impulse:faellig"
MAX_OFFEN_JE_PAAR = 3


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    aufgreifen: bool = False
    gedanke: str = ""
    in_minuten: float = 60


async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    h = state.hintergrund or HintergrundRecord()
    if s.herkunft != "user":
        deps.trace.decision(NAME, "aufgriff.plan", "kein_nutzerreiz", {})
        return {"hintergrund": h}
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "kern": h.kern or s.text, "mensch": s.text})
    if answer is None or not answer.aufgreifen or not answer.gedanke.strip():
        deps.trace.decision(NAME, "aufgriff.plan", "keiner" if answer else f"keiner_{outcome}", {})
        return {"hintergrund": h}
    pending = f"impulse:offen:{s.user_id}:{s.character_id}"
    if await deps.redis.scard(pending) >= MAX_OFFEN_JE_PAAR:
        deps.trace.decision(NAME, "aufgriff.plan", "verworfen_grenze", {"offen": MAX_OFFEN_JE_PAAR})
        return {"hintergrund": h}
    minutes = min(max(answer.in_minuten, 1.0), 7 * 24 * 60)
    impulse = {"id": uuid.uuid4().hex, "user_id": s.user_id, "character_id": s.character_id,
               "gedanke": answer.gedanke.strip()[:300], "aus_turn": s.turn_id}
    await deps.redis.zadd(DUE_KEY, {json.dumps(impulse): time.time() + minutes * 60})
    await deps.redis.sadd(pending, impulse["id"])
    deps.trace.decision(NAME, "aufgriff.plan", "geplant", {"in_minuten": minutes})
    return {"hintergrund": h.model_copy(update={"pending_writes": h.pending_writes + [{"art": "impuls", **impulse}]})}
