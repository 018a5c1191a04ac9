"""dispatcher: commit the turn. Both session turns, the stored result (what a repeated turn_id
returns) and the outbox job for the Postgres writes (turn record + pipeline_log) go to Redis in one
atomic step; the outbox worker writes Postgres in the background."""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

from memory import session
from pipeline.services import Deps
from pipeline.state import DispatchRecord, TurnState

NAME = "dispatcher"
READS = ("stimulus", "pair", "memory", "draft")
WRITES = ("dispatch",)
SELF_LOGGED = True  # its pipeline_log row must be in the job it commits

log = logging.getLogger("novaberg.node.dispatcher")


def turn_result(state: TurnState, deps: Deps) -> dict:
    s, d = state.stimulus, state.draft
    return {
        "turn_id": s.turn_id,
        "user_id": s.user_id,
        "character_id": s.character_id,
        "character_name": state.pair.character_name,
        "reply": d.reply,
        "herkunft": s.herkunft,
        "model": d.model,
        "usage": {"prompt_tokens": deps.trace.prompt_tokens, "completion_tokens": deps.trace.completion_tokens,
                  "llm_calls": deps.trace.llm_calls},
        "created_at": datetime.now(timezone.utc).isoformat(),
    }


async def run(state: TurnState, deps: Deps) -> dict:
    t0 = time.perf_counter()
    s, d = state.stimulus, state.draft
    result = turn_result(state, deps)
    result["timings"] = deps.trace.timings()
    user_turn = {"rolle": "user", "sprecher": "Person B", "inhalt": s.text, "turn_id": s.turn_id,
                 "herkunft": s.herkunft, "time": s.received_at.isoformat()}
    nova_turn = {"rolle": "assistant", "sprecher": state.pair.character_name, "inhalt": d.reply,
                 "turn_id": s.turn_id, "herkunft": s.herkunft, "time": result["created_at"]}
    if s.eigener_gedanke is not None:
        user_turn["sprecher"] = f"{state.pair.character_name} (eigener Gedanke)"
    # the dispatcher's own row is written before the job leaves, so it travels with it
    deps.trace.node_row(NAME, (time.perf_counter() - t0) * 1000)
    job = {
        "kind": "turn",
        "turn": {"user_id": s.user_id, "character_id": s.character_id, "turn_id": s.turn_id,
                 "user_text": s.text, "reply": d.reply, "user_embedding": state.memory.query_embedding,
                 "result": result, "created_at": result["created_at"]},
        "log": deps.trace.rows,
    }
    committed = await session.commit_turn(
        deps.redis, user_id=s.user_id, character_id=s.character_id, turn_id=s.turn_id, result=result,
        user_turn=user_turn, nova_turn=nova_turn, job=job, keep_turns=deps.settings.session_keep_turns,
        ttl_s=deps.settings.turn_result_ttl_s,
    )
    if not committed:
        log.warning("dispatcher: turn %s of %s:%s was committed already; nothing written twice",
                    s.turn_id, s.user_id, s.character_id)
    if not committed:
        result = await session.stored_result(deps.redis, s.user_id, s.character_id, s.turn_id) or result
    return {"dispatch": DispatchRecord(committed=committed, outbox_job="turn", result=result)}
