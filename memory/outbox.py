"""Durable background work: a Redis stream read through a consumer group.

A job is acknowledged only after its handler committed; a job that stays pending with a consumer
longer than `claim_idle_ms` (its worker died) is taken over with XAUTOCLAIM. A job that failed
`MAX_DELIVERIES` times for a reason of its own moves to the dead-letter stream, loudly, instead of
blocking the queue; a store that is away (Postgres or Redis unreachable) is no reason of the job's:
the job waits, pending, the consumer backs off, and nothing is dead-lettered for the outage. A
background job whose model is away (`is_model_away`) waits too, but alone: it stays pending for a
later delivery while the jobs behind it go on, and after `MAX_MODEL_WAITS` deliveries it is given up
to the dead letters. Dead letters can be listed and replayed, each exactly once (`dead_letters`,
`replay`).
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any, Awaitable, Callable

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from core.errors import ModelUnavailable, OutageError
from core.wire import BackgroundJob, JobTooNew, PairSuperseded, SelfTriggerJob, TurnJob, job_json
from memory.seams import caused_by

OUTBOX_STREAM = "novaberg:outbox"
DEAD_STREAM = "novaberg:outbox:dead"
FAILURES = "novaberg:outbox:fehler"
"""Each pending job's failures of its own (a hash: entry id -> count); an outage counts none."""
GROUP = "workers"
MAX_DELIVERIES = 5
MAX_PAUSE_S = 30.0
"""The longest a consumer waits between two rounds while a store is away."""
OUTAGES: tuple[type[BaseException], ...] = (OutageError, PairSuperseded)
"""The families that say a store or a process is away (`memory.seams` maps the drivers' errors
to them): `StoreUnavailable`, `ReplicaGone`, a follow-up that waits, and a pair's process that
serves it no more."""
MODEL_WAITS = "novaberg:outbox:modell_weg"
"""Each pending job's deliveries that found the model away (a hash: entry id -> count)."""
MAX_MODEL_WAITS = 40
"""A background job waits for the model this many deliveries (each after `claim_idle_ms`: 20 minutes
by default, longer than a model's redeployment), then goes to the dead letters: a job whose own
call takes the model down must not do so for ever."""


def is_model_away(e: BaseException) -> bool:
    """A background chain waits for its model (`core.errors.ModelUnavailable`, raised as
    `pipeline.llm_json.ModelAway`): the job stays pending for a later delivery, and the jobs behind
    it go on (the stores are there)."""
    return caused_by(e, ModelUnavailable)


async def vergessen(r: Redis, *entry_ids) -> None:
    """The counters of jobs that left the stream another way (deleted: taken back, erased)."""
    if entry_ids:
        ids = [_s(i) for i in entry_ids]
        await r.hdel(FAILURES, *ids)
        await r.hdel(MODEL_WAITS, *ids)


def is_outage(e: BaseException) -> bool:
    """Whether a handler's failure says a store is away rather than that the job is bad: the
    exception or one of its causes (a Ray task error carries the store's exception) is one of
    `OUTAGES`."""
    return caused_by(e, OUTAGES)

log = logging.getLogger("novaberg.outbox")

Handler = Callable[[dict[str, Any]], Awaitable[None]]


async def ensure_group(r: Redis, stream: str = OUTBOX_STREAM) -> None:
    try:
        await r.xgroup_create(stream, GROUP, id="0", mkstream=True)
    except ResponseError as e:
        if "BUSYGROUP" not in str(e):
            raise


# Refresh a claim only while this consumer still holds it: a plain XCLAIM with no idle time would
# take a job back from the worker that legitimately re-claimed it, and two runs would overlap.
_HEARTBEAT = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1
"""

TRIM_EVERY = 50
"""Rounds between two trims of the stream (entries both delivered and acknowledged go)."""


async def trim(r: Redis, stream: str = OUTBOX_STREAM) -> int:
    """Remove the entries every consumer is done with: older than the group's last delivered id
    and than the oldest pending one. Never a job that is waiting or running."""
    groups = await r.xinfo_groups(stream)
    g = next((g for g in groups if g["name"] in (GROUP, GROUP.encode())), None)
    if g is None:
        return 0
    ms, seq = _id_key(_s(g["last-delivered-id"]))
    floor = (ms, seq + 1)  # everything up to the last delivered entry has been handed out
    pend = await r.xpending(stream, GROUP)
    if pend["pending"]:
        floor = min(floor, _id_key(_s(pend["min"])))  # the oldest job still running stays
    if floor <= (0, 1):
        return 0
    return await r.xtrim(stream, minid=f"{floor[0]}-{floor[1]}", approximate=False)


async def trim_dead(r: Redis, before_ms: int, stream: str = DEAD_STREAM) -> int:
    """Retention of the dead letters: remove those that died before `before_ms` (ms since the
    epoch; an entry's id is its time). Returns how many went."""
    return await r.xtrim(stream, minid=f"{max(before_ms, 0)}-0", approximate=False)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


async def enqueue(r: Redis, job: TurnJob | BackgroundJob | SelfTriggerJob | dict[str, Any],
                  stream: str = OUTBOX_STREAM) -> str:
    """Queue a job outside a turn's commit (a typed job, or a stored one as it is)."""
    return await r.xadd(stream, {"job": job_json(job) if not isinstance(job, dict) else json.dumps(job)})


async def backlog(r: Redis) -> dict[str, Any]:
    """Pending (delivered, not acknowledged) and undelivered counts, and the oldest pending age."""
    await ensure_group(r)
    pend = await r.xpending(OUTBOX_STREAM, GROUP)
    groups = await r.xinfo_groups(OUTBOX_STREAM)
    lag = next((g.get("lag") for g in groups if g["name"] in (GROUP, GROUP.encode())), None)
    oldest_ms = None
    if pend["pending"]:
        first = await r.xpending_range(OUTBOX_STREAM, GROUP, min="-", max="+", count=1)
        oldest_ms = first[0]["time_since_delivered"] if first else None
    return {"pending": pend["pending"], "undelivered": lag, "oldest_pending_ms": oldest_ms,
            "dead": await r.xlen(DEAD_STREAM)}


class OutboxConsumer:
    """The loop body of a worker: claim stale jobs, read new ones, handle, acknowledge."""

    def __init__(self, r: Redis, consumer: str, handler: Handler, *, claim_idle_ms: int, block_ms: int,
                 stream: str = OUTBOX_STREAM, dead_stream: str = DEAD_STREAM):
        self.r = r
        self.stream = stream
        self.dead_stream = dead_stream
        self.consumer = consumer
        self.handler = handler
        self.claim_idle_ms = claim_idle_ms
        self.block_ms = block_ms
        self.processed = 0
        self.rounds = 0
        self.pause_s = 0.0
        """The back-off while a store is away: doubled by each outage, cleared by a handled job."""

    async def step(self) -> int:
        """One round; returns the number of jobs acknowledged. A consumer group lost with the
        stream (Redis restarted without its data) is made again, by name in the log."""
        try:
            return await self._step()
        except ResponseError as e:
            if "NOGROUP" not in str(e):
                raise
            log.warning("outbox: fallback gruppe_neu: consumer group %s of %s is gone (Redis lost its data?); "
                        "creating it again", GROUP, self.stream)
            await ensure_group(self.r, self.stream)
            return 0

    async def _step(self) -> int:
        self.rounds += 1
        if self.rounds % TRIM_EVERY == 0:
            await trim(self.r, self.stream)
        entries: list[tuple[str, dict]] = []
        # Redis 6.2 answers [next, entries], Redis 7 adds the deleted ids
        claimed = (await self.r.xautoclaim(
            self.stream, GROUP, self.consumer, min_idle_time=self.claim_idle_ms, start_id="0-0", count=16
        ))[1]
        for entry_id, fields in claimed:
            if fields:  # a deleted entry comes back empty
                log.warning("outbox: re-claimed job %s left pending by a dead worker", _s(entry_id))
                entries.append((entry_id, fields))
            else:
                await self.r.xack(self.stream, GROUP, entry_id)
                await vergessen(self.r, entry_id)
        acked = await self._alle(entries)
        if not self.pause_s:
            # new jobs every round, also after re-claimed ones (a job waiting for its model comes back
            # every `claim_idle_ms` and must not hold them up); without a re-claimed one the read waits
            got = await self.r.xreadgroup(GROUP, self.consumer, {self.stream: ">"}, count=16,
                                          block=None if entries else self.block_ms)
            acked += await self._alle([item for _stream, items in got or [] for item in items])
        if self.pause_s:
            await asyncio.sleep(self.pause_s)
        return acked

    async def _alle(self, entries) -> int:
        acked = 0
        for entry_id, fields in entries:
            acked += await self._handle(entry_id, fields)
            if self.pause_s:  # a store is away: the rest waits with this one
                break
        return acked

    async def _heartbeat(self, entry_id) -> None:
        """Keep a long job's claim fresh while this worker holds it, so no other worker takes it
        over; once another holds it (this one was too slow), stop and say so."""
        while True:
            await asyncio.sleep(max(self.claim_idle_ms / 3000, 0.05))
            held = await self.r.eval(_HEARTBEAT, 1, self.stream, GROUP, self.consumer, _s(entry_id))
            if not held:
                log.warning("outbox: job %s is held by another worker now; this one stops refreshing it",
                            _s(entry_id))
                return

    async def _handle(self, entry_id, fields) -> int:
        raw = fields.get(b"job", fields.get("job"))
        beat = asyncio.ensure_future(self._heartbeat(entry_id))
        try:
            job = json.loads(raw)
            await self.handler(job)
        except JobTooNew as e:
            # a rolling deploy: a newer release wrote it; it stays pending, uncounted, and is claimed
            # again after `claim_idle_ms`, by then by a worker of that release
            log.warning("outbox: job %s waits for a newer worker (%s) (fallback job_zu_neu)", _s(entry_id), e)
            return 0
        except Exception as e:
            if is_model_away(e):
                await self._model_away(entry_id, raw, e)
                return 0
            if is_outage(e):
                self.pause_s = min(MAX_PAUSE_S, max(0.5, self.pause_s * 2))
                log.warning("outbox: job %s waits, a store is away (%s: %s); it stays pending, the next try in "
                            "%.1f s or when claimed again (fallback speicher_weg)", _s(entry_id), type(e).__name__,
                            str(e)[:200], self.pause_s)
                return 0
            await self._failed(entry_id, raw, e)
            return 0
        finally:
            beat.cancel()
        async with self.r.pipeline(transaction=False) as p:
            p.xack(self.stream, GROUP, entry_id)
            p.hdel(FAILURES, _s(entry_id))
            p.hdel(MODEL_WAITS, _s(entry_id))
            await p.execute()
        self.processed += 1
        self.pause_s = 0.0
        return 1

    async def _failed(self, entry_id, raw, e: Exception) -> None:
        """A failure of the job's own: counted; at `MAX_DELIVERIES` the job moves to the dead letters."""
        failures = await self.r.hincrby(FAILURES, _s(entry_id), 1)
        if failures < MAX_DELIVERIES:
            log.warning("outbox: job %s failed (failure %d), stays pending for a retry", _s(entry_id), failures,
                        exc_info=True)
            return
        log.error("outbox: job %s failed %d times, moved to %s", _s(entry_id), failures, self.dead_stream,
                  exc_info=True)
        await self._dead(entry_id, raw, f"{type(e).__name__}: {e}"[:500] + f" (after {failures} failures)")

    async def _model_away(self, entry_id, raw, e: Exception) -> None:
        """A background job found its model away: it stays pending (delivered again once
        `claim_idle_ms` passed) while the jobs behind it go on; counted apart from the job's own
        failures, and at `MAX_MODEL_WAITS` deliveries it moves to the dead letters."""
        waits = await self.r.hincrby(MODEL_WAITS, _s(entry_id), 1)
        if waits < MAX_MODEL_WAITS:
            log.warning("outbox: job %s waits for the model (delivery %d of %d): it stays pending and is taken up "
                        "again in %.0f s (fallback hintergrund_wartet)", _s(entry_id), waits, MAX_MODEL_WAITS,
                        self.claim_idle_ms / 1000)
            return
        log.error("outbox: job %s found the model away %d times, moved to %s", _s(entry_id), waits, self.dead_stream)
        await self._dead(entry_id, raw, f"{type(e).__name__}: {e}"[:500] + f" (the model away {waits} times)")

    async def _dead(self, entry_id, raw, reason: str) -> None:
        # the reason travels with the job: the operator sees why it was given up
        async with self.r.pipeline(transaction=True) as p:
            p.xadd(self.dead_stream, {"job": raw, "from": entry_id, "reason": reason})
            p.xack(self.stream, GROUP, entry_id)
            p.hdel(FAILURES, _s(entry_id))
            p.hdel(MODEL_WAITS, _s(entry_id))
            await p.execute()


_REPLAY = """
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #e == 0 then return false end
local f = e[1][2]
for i = 1, #f, 2 do
  if f[i] == 'job' then
    local id = redis.call('XADD', KEYS[2], '*', 'job', f[i + 1])
    redis.call('XDEL', KEYS[1], ARGV[1])
    return id
  end
end
return false
"""


def job_owner(raw: Any) -> tuple[str | None, str | None]:
    """The pair an outbox job belongs to (a turn's record, or a background job's state)."""
    try:
        job = json.loads(_s(raw))
    except (TypeError, ValueError):
        return None, None
    t = job.get("turn") or (job.get("state") or {}).get("stimulus") or {} if isinstance(job, dict) else {}
    return t.get("user_id"), t.get("character_id")


async def dead_letters(r: Redis, count: int = 100, stream: str = DEAD_STREAM) -> list[dict[str, Any]]:
    """The dead letters, oldest first: id, the job's kind, pair and turn, and why it was given up."""
    out = []
    for entry_id, fields in await r.xrange(stream, count=count):
        raw = fields.get(b"job", fields.get("job")) or b"{}"
        try:
            job = json.loads(_s(raw))
        except (TypeError, ValueError):
            job = {}
        job = job if isinstance(job, dict) else {}
        user_id, character_id = job_owner(raw)
        out.append({"id": _s(entry_id), "kind": job.get("kind"), "user_id": user_id, "character_id": character_id,
                    "turn_id": job.get("turn_id") or (job.get("turn") or {}).get("turn_id"),
                    "reason": _s(fields.get(b"reason", fields.get("reason", b""))),
                    "from": _s(fields.get(b"from", fields.get("from", b"")))})
    return out


async def replay(r: Redis, dead_id: str, stream: str = OUTBOX_STREAM, dead_stream: str = DEAD_STREAM) -> str | None:
    """Put a dead letter back into the outbox, exactly once (one atomic step: queued again and
    removed from the dead letters); the new job's id, or None when there is no such dead letter
    (nor can be: an id Redis cannot read as a stream entry's)."""
    if not entry_id_valid(dead_id):
        return None
    got = await r.eval(_REPLAY, 2, dead_stream, stream, dead_id)
    if not got:
        return None
    log.info("outbox: dead letter %s replayed as job %s", dead_id, _s(got))
    return _s(got)


_ENTRY_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
_U64 = 2 ** 64 - 1


def entry_id_valid(entry_id: str) -> bool:
    """A stream entry's id as Redis reads it: `ms-seq`, each an unsigned 64-bit number."""
    m = _ENTRY_ID.fullmatch(entry_id)
    return m is not None and int(m[1]) <= _U64 and int(m[2]) <= _U64


def _s(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)
