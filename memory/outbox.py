"""Durable background work: a Redis stream read through a consumer group.

A job is acknowledged only after its handler committed; a job that stays pending with a consumer
longer than `claim_idle_ms` (its worker died) is taken over with XAUTOCLAIM. A job that failed
`MAX_DELIVERIES` times moves to the dead-letter stream, loudly, instead of blocking the queue.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Awaitable, Callable

from redis.asyncio import Redis
from redis.exceptions import ResponseError

OUTBOX_STREAM = "novaberg:outbox"
DEAD_STREAM = "novaberg:outbox:dead"
GROUP = "workers"
MAX_DELIVERIES = 5

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


async def enqueue(r: Redis, job: dict[str, Any], stream: str = OUTBOX_STREAM) -> str:
    return await r.xadd(stream, {"job": json.dumps(job)})


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
        if not entries:
            got = await self.r.xreadgroup(GROUP, self.consumer, {self.stream: ">"}, count=16,
                                          block=self.block_ms)
            for _stream, items in got or []:
                entries.extend(items)
        acked = 0
        for entry_id, fields in entries:
            acked += await self._handle(entry_id, fields)
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
        except Exception as e:
            info = await self.r.xpending_range(self.stream, GROUP, min=entry_id, max=entry_id, count=1)
            deliveries = info[0]["times_delivered"] if info else 1
            if deliveries >= MAX_DELIVERIES:
                log.error("outbox: job %s failed %d times, moved to %s", _s(entry_id), deliveries,
                          self.dead_stream, exc_info=True)
                # the reason travels with the job: the operator sees why it was given up
                reason = f"{type(e).__name__}: {e}"[:500] + f" (after {deliveries} deliveries)"
                await self.r.xadd(self.dead_stream, {"job": raw, "from": entry_id, "reason": reason})
                await self.r.xack(self.stream, GROUP, entry_id)
            else:
                log.warning("outbox: job %s failed (delivery %d), stays pending for a retry",
                            _s(entry_id), deliveries, exc_info=True)
            return 0
        finally:
            beat.cancel()
        await self.r.xack(self.stream, GROUP, entry_id)
        self.processed += 1
        return 1


def _s(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)
