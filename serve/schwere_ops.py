"""Admission of a user's heavy operations: the export and the erasure (`export`), and the turn
operations that rewrite the stored conversation — rewind, regenerate, edit, forgetting a memory
(`turn`). Per user and class, across ingress replicas (in Redis): at most so many at once, and at
most so many a minute; beyond either: 429 with Retry-After, before any of the work begins.

Keys: `ops:laufend:{user}:{class}` (a sorted set of the running operations' leases, scored by
their start: a lease never given back — its replica died — expires after `heavy_op_lease_s`) and
`ops:rate:{user}:{class}` (the operations admitted within the last minute, scored by their start).
"""
from __future__ import annotations

import math
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import HTTPException

from serve.ports import IngressPort

Klasse = Literal["export", "turn"]
FENSTER_S = 60
"""The window of the rate bound."""

# KEYS: the class's leases, its window; ARGV: lease, now, lease_s, at most at once, at most per
# window, window (s). Returns {admitted, why ('' | 'parallel' | 'rate'), retry after (s)}.
_ZULASSEN = """
local now, lease_s, fenster = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - lease_s)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return {0, 'parallel', 2} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - fenster)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return {0, 'rate', math.max(1, math.ceil(tonumber(first[2]) + fenster - now))}
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(lease_s) + 1)
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('EXPIRE', KEYS[2], fenster + 1)
return {1, '', 0}
"""


def laufend_key(user_id: str, klasse: Klasse) -> str:
    return f"ops:laufend:{user_id}:{klasse}"


def rate_key(user_id: str, klasse: Klasse) -> str:
    return f"ops:rate:{user_id}:{klasse}"


def _grenzen(settings: Any, klasse: Klasse) -> tuple[int, int]:
    if klasse == "export":
        return settings.max_exports_in_flight_per_user, settings.exports_per_minute_per_user
    return settings.max_turn_ops_in_flight_per_user, settings.turn_ops_per_minute_per_user


async def zulassen(r: Any, settings: Any, user_id: str, klasse: Klasse) -> str:
    """Admit one operation of the class for the user, or raise 429 (with Retry-After). Returns
    its lease, which `freigeben` gives back."""
    parallel, je_minute = _grenzen(settings, klasse)
    lease = uuid.uuid4().hex
    ok, why, retry = await r.eval(_ZULASSEN, 2, laufend_key(user_id, klasse), rate_key(user_id, klasse), lease,
                                  repr(time.time()), repr(float(settings.heavy_op_lease_s)), parallel, je_minute,
                                  FENSTER_S)
    if not int(ok):
        what = "exports or erasures" if klasse == "export" else "turn operations (rewind, regenerate, edit, forget)"
        message = (f"user {user_id} has {parallel} {what} running, the most at once"
                   if (why.decode() if isinstance(why, bytes) else why) == "parallel" else
                   f"user {user_id} started {je_minute} {what} within a minute, the most per minute")
        raise HTTPException(429, detail={"type": "limit", "message": f"{message}; try again shortly"},
                            headers={"Retry-After": str(max(1, math.ceil(int(retry))))})
    return lease


async def freigeben(r: Any, user_id: str, klasse: Klasse, lease: str) -> None:
    """The operation ended: its place is free (its start stays counted in the minute's window)."""
    await r.zrem(laufend_key(user_id, klasse), lease)


@asynccontextmanager
async def zugelassen(ing: IngressPort, user_id: str, klasse: Klasse):
    """`async with zugelassen(ing, user, "turn"):` the operation runs admitted; its place is
    given back however it ends."""
    r = await ing.redis_client()
    lease = await zulassen(r, ing.settings, user_id, klasse)
    try:
        yield lease
    finally:
        await freigeben(r, user_id, klasse, lease)
