"""The background chain (salience → zielbildung → praegung → selbstbild → aufgriff →
zusammenfassung) and the routing of its pending writes, run by an outbox worker after the reply
left; salience alone for a human's turn kept without a reply; and the delivery of planned impulses."""
from __future__ import annotations

import json
import logging
import time

from actors.delegation import DELEGATIONS, Delegation
from core.errors import ChainError, OutageError
from memory import erasure, kzg, schluessel_index, session
from pipeline.chains import BACKGROUND_CHAIN, MENSCH_CHAIN
from pipeline.runner import ChainRunner
from pipeline.services import Deps, Services
from core.state import DelegationSchreiben, KzgSchreiben, Schreibauftrag, Stimulus, TurnState
from core.wire import BackgroundJob, SelfTriggerJob
from pipeline.wissensluecken import NEUGIER_VORRANG
from pipeline.trace import TurnTrace

log = logging.getLogger("novaberg.background")
DONE_TTL_S = 7 * 24 * 3600
LOG_SEQ_OFFSET = 10_000  # background rows follow the turn's own rows in pipeline_log


class FollowUpFailed(ChainError, RuntimeError):
    """A self-trigger's follow-up turn failed: its job fails so that the outbox delivers it again
    (a failure of its own: counted, dead-lettered after `MAX_DELIVERIES`)."""


class FollowUpWaits(OutageError, RuntimeError):
    """A follow-up failed because a store or a service was away: an outage to the outbox
    (`memory.outbox.is_outage`), so the job waits and is not counted towards the dead letters."""


def erledigt_key(user_id: str, character_id: str, turn_id: str) -> str:
    """The marker of a turn's finished background job (its time): a job delivered again skips."""
    return f"bg:done:{user_id}:{character_id}:{turn_id}"


def delegation_key(user_id: str, character_id: str, turn_id: str, nummer: int) -> str:
    """The marker of a turn's `nummer`-th queued delegation."""
    return f"bg:delegation:{user_id}:{character_id}:{turn_id}:{nummer}"


async def run_background(services: Services, pool, job: BackgroundJob) -> None:
    from memory import pg

    state = TurnState(**dict(job.state))
    s = state.stimulus
    teil = job.teil
    done_key = erledigt_key(s.user_id, s.character_id, s.turn_id) + ("" if teil == "ganz" else f":{teil}")
    if await erasure.markiert(services.redis, s.user_id):
        raise erasure.abgewiesen(s.user_id, f"the background of turn {s.turn_id}")
    if await services.redis.exists(done_key):
        log.info("background: turn %s (%s) done already (a re-claimed job); skipped", s.turn_id, teil)
        return
    if teil == "mensch" and await services.redis.exists(erledigt_key(s.user_id, s.character_id, s.turn_id)):
        log.info("background: turn %s: the whole turn's background ran already; its human part is skipped", s.turn_id)
        return
    trace = TurnTrace(s.user_id, s.character_id, s.turn_id)
    deps = Deps(services, trace)
    chain = MENSCH_CHAIN if teil == "mensch" else BACKGROUND_CHAIN
    await ChainRunner(chain, name="background" if teil == "ganz" else f"background_{teil}", ausklingen=True).run(state, deps)
    h = state.hintergrund
    if await erasure.markiert(services.redis, s.user_id):  # erased while the chain ran
        raise erasure.abgewiesen(s.user_id, f"the background writes of turn {s.turn_id}")
    if h is not None and s.user_prompt is not None and not s.thinker_unsicher_retry:
        # salience's reading of the human's turn joins that turn in the session (seed 001 §3.1)
        felder = {"kern": h.kern, **({"intentionen": h.intentionen} if h.intentionen else {})}
        if not await session.annotate_turn(services.redis, s.user_id, s.character_id, s.turn_id, felder):
            log.warning("background: turn %s of %s:%s no longer in the session; its kern is not stored", s.turn_id,
                        s.user_id, s.character_id)
    await schreiben(services, trace, s, state.hintergrund.pending_writes if state.hintergrund else [])
    rows = [r.model_copy(update={"seq": r.seq + LOG_SEQ_OFFSET}) for r in trace.rows]
    async with pool.connection() as conn, conn.transaction():
        await erasure.pruefen(conn, s.user_id, f"the background log of turn {s.turn_id}")
        await pg._insert_log_rows(conn, s.user_id, s.character_id, s.turn_id, rows)
    await services.redis.set(done_key, str(time.time()), ex=DONE_TTL_S)
    log.info("background: turn %s of %s:%s done (%d writes)", s.turn_id, s.user_id, s.character_id,
             len(state.hintergrund.pending_writes) if state.hintergrund else 0)


async def schreiben(services: Services, trace: TurnTrace, s: Stimulus, writes: list[Schreibauftrag]) -> None:
    """The turn's pending writes, each once however often the job is delivered: the KZG entry
    keyed by the turn, each delegation by the turn and its place among the turn's delegations."""
    delegationen = 0
    for w in writes:
        if isinstance(w, KzgSchreiben):
            vec = await services.embedder.embed(trace, w.inhalt)
            await kzg.add_entry(services.redis, s.user_id, s.character_id, w.inhalt, vec, emotion=w.emotion,
                                arousal=w.arousal, quelle=s.turn_id, entry_id=f"turn-{s.turn_id}",
                                keep=services.settings.kzg_max_entries)
        elif isinstance(w, DelegationSchreiben):
            await delegieren(services.redis, s.user_id, s.character_id, s.turn_id, w.aufgabe, delegationen,
                             vorne=w.neugier >= NEUGIER_VORRANG)
            delegationen += 1


_DELEGIEREN = """
if redis.call('EXISTS', KEYS[3]) == 1 then return -1 end
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) then
  redis.call(ARGV[3], KEYS[1], ARGV[1])
  return 1
end
return 0
"""


async def delegieren(redis, user_id: str, character_id: str, turn_id: str, aufgabe: str, nummer: int = 0, *,
                     vorne: bool = False) -> bool:
    """Queue the turn's `nummer`-th delegated task for the pixie once: a job delivered again (its
    worker died after queueing, before the job was marked done) runs salience again, and a model
    that words the task differently the second time must not queue a second research. The marker
    is the turn and the task's place among the turn's delegations, not its wording. False when it
    was queued already. `vorne`: a knowledge gap the pair's goals pull on (its curiosity boost,
    pipeline/wissensluecken.py) goes to the front of the queue, the pixie takes it next."""
    if nummer >= schluessel_index.DELEGATIONEN_JE_TURN:
        log.warning("background: fallback delegation_grenze: turn %s queues at most %d delegations; %d is not queued",
                    turn_id, schluessel_index.DELEGATIONEN_JE_TURN, nummer)
        return False
    task = Delegation(aufgabe=aufgabe, turn_id=turn_id)
    queued = await redis.eval(_DELEGIEREN, 3, f"{DELEGATIONS}:{user_id}:{character_id}",
                              delegation_key(user_id, character_id, turn_id, nummer), erasure.marke_key(user_id),
                              task.model_dump_json(), DONE_TTL_S, "LPUSH" if vorne else "RPUSH")
    if int(queued) < 0:
        raise erasure.abgewiesen(user_id, f"delegation {nummer} of turn {turn_id}")
    if not queued:
        log.info("background: delegation %d of turn %s is queued already (a job delivered again); not queued "
                 "twice", nummer, turn_id)
    return bool(queued)


IMPULS_CLAIM_S = 120
"""How long a worker holds a claimed impulse before another may deliver it (a crash loses none)."""
_NEHMEN = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  return 1
end
return 0
"""


def _genommen(due_key: str) -> str:
    return f"{due_key}:genommen"


async def faellige_impulse_nehmen(r, due_key: str, limit: int, claim_s: float = IMPULS_CLAIM_S) -> list[bytes]:
    """Claim up to `limit` impulses whose time has come: each moves atomically from the due set to
    the claimed set with a deadline, so two workers never deliver the same one, and one whose worker
    died before acknowledging it (`impuls_erledigt`) is due again once its deadline passed."""
    now = time.time()
    for raw in await r.zrangebyscore(_genommen(due_key), "-inf", now):
        if await r.eval(_NEHMEN, 2, _genommen(due_key), due_key, raw, now):
            log.warning("impulse claim expired: fallback impuls_neu_faellig (its worker did not finish it)")
    taken = []
    for raw in await r.zrangebyscore(due_key, "-inf", now, start=0, num=limit):
        if await r.eval(_NEHMEN, 2, due_key, _genommen(due_key), raw, now + claim_s):
            taken.append(raw)
    return taken


async def impuls_erledigt(r, due_key: str, raw, *, again_in_s: float | None = None) -> None:
    """Acknowledge a claimed impulse; `again_in_s`: put it back as due then (a failed delivery)."""
    pipe = r.pipeline(transaction=True)
    pipe.zrem(_genommen(due_key), raw)
    if again_in_s is not None:
        pipe.zadd(due_key, {raw: time.time() + again_in_s})
    await pipe.execute()


async def deliver_self_trigger(redis, settings, job: SelfTriggerJob) -> None:
    """A self-trigger's follow-up (the `selbst_anstoss` job committed with its turn) to the pair's
    event queue. Idempotent by the follow-up's own turn id: a second delivery (a worker that died
    after it) answers from the stored result and counts no second self-trigger. A pair actor that
    is away right now raises an outage: the job waits and is delivered again."""
    from actors.activation import aktivieren
    from core.wire import EventDropped, PairEventRequest, TurnFailure

    t = job.turn
    actor = await aktivieren(redis, settings, t.user_id, t.character_id)
    out = await actor.event.remote(PairEventRequest(kind="continue", aus_turn=t.turn_id,
                                                    **job.anstoss.model_dump(exclude_none=True)))
    if isinstance(out, EventDropped):
        log.warning("self-trigger of turn %s of %s:%s dropped: %s", t.turn_id, t.user_id, t.character_id, out.reason)
    elif isinstance(out, TurnFailure):
        # the reply announced it (`nachricht_folgt`): the job fails, and the outbox delivers it again —
        # as an outage (it waits, uncounted) when a store or a service was away
        log.error("self-trigger of turn %s of %s:%s failed in %s%s: %s; the outbox delivers it again",
                  t.turn_id, t.user_id, t.character_id, out.node, " (an outage)" if out.ausfall else "", out.message)
        fehler = FollowUpWaits if out.ausfall else FollowUpFailed
        raise fehler(f"the follow-up of turn {t.turn_id} failed in {out.node}: {out.message}"[:500])


async def deliver_due_impulses(services: Services, settings, limit: int = 5) -> int:
    """Hand impulses whose time has come to their pair's event queue (claimed, then acknowledged
    after the delivery; the delivery is idempotent by its turn id `imp-{id}`)."""
    from actors.activation import aktivieren
    from core.wire import PairEventRequest
    from pipeline.nodes.aufgriff import DUE_KEY

    r = services.redis
    delivered = 0
    for raw in await faellige_impulse_nehmen(r, DUE_KEY, limit):
        imp = json.loads(raw)
        if await erasure.markiert(r, imp["user_id"]):
            erasure.abgewiesen(imp["user_id"], f"impulse {imp['id']}")  # logged: the impulse goes
            await impuls_erledigt(r, DUE_KEY, raw)
            continue
        if not await services.store.charaktere.exists(imp["character_id"]):
            log.warning("impulse %s dropped: fallback charakter_entfernt: character %r no longer exists",
                        imp["id"], imp["character_id"])
            await r.srem(f"impulse:offen:{imp['user_id']}:{imp['character_id']}", imp["id"])
            await impuls_erledigt(r, DUE_KEY, raw)
            continue
        try:
            actor = await aktivieren(r, settings, imp["user_id"], imp["character_id"])
            await actor.event.remote(PairEventRequest(kind="impulse", eigener_gedanke=imp["gedanke"],
                                                      turn_id=f"imp-{imp['id']}", aus_turn=imp.get("aus_turn")))
            await r.srem(f"impulse:offen:{imp['user_id']}:{imp['character_id']}", imp["id"])
            await impuls_erledigt(r, DUE_KEY, raw)
            delivered += 1
        except Exception:
            log.exception("impulse %s could not be delivered; retrying in 60 s", imp["id"])
            await impuls_erledigt(r, DUE_KEY, raw, again_in_s=60)
    return delivered
