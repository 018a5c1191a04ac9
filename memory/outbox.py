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

    async def step(self) -> int:
        """One round; returns the number of jobs acknowledged."""
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
        """Keep a long job's claim fresh, so no other worker takes it over while it runs."""
        while True:
            await asyncio.sleep(max(self.claim_idle_ms / 3000, 0.05))
            await self.r.xclaim(self.stream, GROUP, self.consumer, min_idle_time=0, message_ids=[entry_id],
                                justid=True)

    async def _handle(self, entry_id, fields) -> int:
        raw = fields.get(b"job", fields.get("job"))
        beat = asyncio.ensure_future(self._heartbeat(entry_id))
        try:
            job = json.loads(raw)
            await self.handler(job)
        except Exception:
            info = await self.r.xpending_range(self.stream, GROUP, min=entry_id, max=entry_id, count=1)
            deliveries = info[0]["times_delivered"] if info else 1
            if deliveries >= MAX_DELIVERIES:
                log.error("outbox: job %s failed %d times, moved to %s", _s(entry_id), deliveries,
                          self.dead_stream, exc_info=True)
                await self.r.xadd(self.dead_stream, {"job": raw, "from": entry_id})
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
