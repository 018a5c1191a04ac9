"""The background chain (salience → praegung → aufgriff) and the routing of its pending writes,
run by an outbox worker after the reply left; and the delivery of planned impulses."""
from __future__ import annotations

import json
import logging
import time
from typing import Any

from memory import kzg, session
from pipeline.runner import BACKGROUND_CHAIN, ChainRunner
from pipeline.services import Deps, Services
from pipeline.state import DelegationSchreiben, KzgSchreiben, TurnState
from pipeline.trace import TurnTrace

log = logging.getLogger("novaberg.background")
DONE_TTL_S = 7 * 24 * 3600
LOG_SEQ_OFFSET = 10_000  # background rows follow the turn's own rows in pipeline_log
DELEGATIONS = "delegationen"


async def run_background(services: Services, pool, job: dict[str, Any]) -> None:
    from memory import pg

    state = TurnState.model_validate(job["state"])
    s = state.stimulus
    done_key = f"bg:done:{s.user_id}:{s.character_id}:{s.turn_id}"
    if await services.redis.exists(done_key):
        log.info("background: turn %s done already (a re-claimed job); skipped", s.turn_id)
        return
    trace = TurnTrace(s.user_id, s.character_id, s.turn_id)
    deps = Deps(services, trace)
    await ChainRunner(BACKGROUND_CHAIN, name="background").run(state, deps)
    h = state.hintergrund
    if h is not None and s.user_prompt is not None and not s.thinker_unsicher_retry:
        # salience's reading of the human's turn joins that turn in the session (seed 001 §3.1)
        felder = {"kern": h.kern, **({"intentionen": h.intentionen} if h.intentionen else {})}
        if not await session.annotate_turn(services.redis, s.user_id, s.character_id, s.turn_id, felder):
            log.warning("background: turn %s of %s:%s no longer in the session; its kern is not stored", s.turn_id,
                        s.user_id, s.character_id)
    for w in state.hintergrund.pending_writes if state.hintergrund else []:
        if isinstance(w, KzgSchreiben):
            vec = await services.embedder.embed(trace, w.inhalt)
            await kzg.add_entry(services.redis, s.user_id, s.character_id, w.inhalt, vec, emotion=w.emotion,
                                arousal=w.arousal, quelle=s.turn_id, entry_id=f"turn-{s.turn_id}")
        elif isinstance(w, DelegationSchreiben):
            await services.redis.rpush(f"{DELEGATIONS}:{s.user_id}:{s.character_id}",
                                       json.dumps({"aufgabe": w.aufgabe, "turn_id": s.turn_id}))
    rows = [dict(r, seq=r["seq"] + LOG_SEQ_OFFSET) for r in trace.rows]
    async with pool.connection() as conn:
        await pg._insert_log_rows(conn, s.user_id, s.character_id, s.turn_id, rows)
    await services.redis.set(done_key, str(time.time()), ex=DONE_TTL_S)
    log.info("background: turn %s of %s:%s done (%d writes)", s.turn_id, s.user_id, s.character_id,
             len(state.hintergrund.pending_writes) if state.hintergrund else 0)


async def deliver_due_impulses(services: Services, settings, limit: int = 5) -> int:
    """Hand impulses whose time has come to their pair's event queue. ZREM claims an impulse, so
    two workers never deliver the same one; a failed delivery is put back a minute later."""
    from actors.pair import get_or_create_pair
    from pipeline.nodes.aufgriff import DUE_KEY

    r = services.redis
    due = await r.zrangebyscore(DUE_KEY, "-inf", time.time(), start=0, num=limit)
    delivered = 0
    for raw in due:
        if not await r.zrem(DUE_KEY, raw):
            continue  # another worker took it
        imp = json.loads(raw)
        if not await services.store.call("charaktere.exists", imp["character_id"]):
            log.warning("impulse %s dropped: fallback charakter_entfernt: character %r no longer exists",
                        imp["id"], imp["character_id"])
            await r.srem(f"impulse:offen:{imp['user_id']}:{imp['character_id']}", imp["id"])
            continue
        try:
            actor = get_or_create_pair(imp["user_id"], imp["character_id"], settings)
            await actor.event.remote({"kind": "impulse", "eigener_gedanke": imp["gedanke"], "turn_id": f"imp-{imp['id']}"})
            await r.srem(f"impulse:offen:{imp['user_id']}:{imp['character_id']}", imp["id"])
            delivered += 1
        except Exception:
            log.exception("impulse %s could not be delivered; retrying in 60 s", imp["id"])
            await r.zadd(DUE_KEY, {raw: time.time() + 60})
    return delivered
