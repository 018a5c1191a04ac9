"""Indexes of a user's Redis keys, so that the user's operations (export, erasure, taking turns
back) name the keys directly instead of walking the whole keyspace with SCAN.

- `user:paare:{user}`: a set of the user's characters — every pair that has a key. Written where
  a pair's keys begin: the admission of its turns (serve/ingress.py), the commit of a turn, the
  greeting, and every before-image of a turn.
- `pair:turns:{user}:{character}`: a sorted set of the pair's turns that may hold keys of their
  own (`turnres`, `turn:mensch`, `bg:done`, `bg:delegation`, `aufgriff:geplant`, `vorher`), each
  scored by the turn's first write (Redis' clock, seconds). A turn enters with its first before-image
  or its commit, in the same script as those keys; its background keys follow later under the same
  turn. A commit drops the turns older than `horizont(ttl_s)`: their keys have all expired.

The score is also where the turn's jobs, pushed messages and node errors begin: taking turns back
reads the shared streams from there on, not from their beginning (memory/ruecknahme.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redis.asyncio import Redis

PAARE = "user:paare"
TURNS = "pair:turns"
NACHLAUF_S = 2 * 24 * 3600
"""How long after a turn's first write its background keys may still be written (a job that waits
in the outbox for a model or a store), beyond their own lifetime."""

DELEGATIONEN_JE_TURN = 8
"""The most delegations one turn queues (`bg:delegation:{user}:{character}:{turn}:{0..7}`): the
markers' names are known without looking for them."""


def paare_key(user_id: str) -> str:
    return f"{PAARE}:{user_id}"


def turns_key(user_id: str, character_id: str) -> str:
    return f"{TURNS}:{user_id}:{character_id}"


def horizont(ttl_s: int) -> int:
    """How long a turn stays in its pair's index: the longest lifetime of a turn's keys (its stored
    result's `ttl_s`, the before-images' `FRIST_S`, the background markers' seven days) and the
    background's delay."""
    return max(int(ttl_s), VORHER_FRIST_S, 7 * 24 * 3600) + NACHLAUF_S


VORHER_FRIST_S = 30 * 24 * 3600
"""How long a turn's before-images are kept in Redis (`memory/redis_vorher.py`, `FRIST_S`): a turn
older than this is taken back without putting back what it overwrote in Redis
(`Settings.turn_undo_keep_days` for Postgres' side)."""


LUA_MERKEN = """
local function turn_merken(paare, turns, character, turn_id, horizont)
  redis.call('SADD', paare, character)
  if turn_id == nil or turn_id == '' then return end
  local now = tonumber(redis.call('TIME')[1])
  redis.call('ZADD', turns, 'NX', now, turn_id)
  if horizont ~= nil then redis.call('ZREMRANGEBYSCORE', turns, '-inf', now - horizont) end
end
local function ziel_merken(ziel)
  local u, c, t = string.match(ziel, '^vorher:([^:]+):([^:]+):(.+)$')
  if u then turn_merken('""" + PAARE + """:' .. u, '""" + TURNS + """:' .. u .. ':' .. c, c, t, nil) end
end
"""
"""Lua functions for the scripts that write a pair's keys: `turn_merken(paare_key, turns_key,
character, turn_id or '', horizont or nil)`; `ziel_merken(vorher_key)` for a turn's before-images."""


async def merken(r: Redis, user_id: str, character_id: str, turn_id: str | None = None) -> None:
    """Register the pair (and the turn) outside a script: for keys written by plain commands."""
    await r.eval(LUA_MERKEN + "turn_merken(KEYS[1], KEYS[2], ARGV[1], ARGV[2], nil)", 2,
                 paare_key(user_id), turns_key(user_id, character_id), character_id, turn_id or "")


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


async def paare(r: Redis, user_id: str) -> set[str]:
    """The user's characters the index knows."""
    return {_s(c) for c in await r.smembers(paare_key(user_id))}


async def turns(r: Redis, user_id: str, character_id: str) -> dict[str, float]:
    """The pair's indexed turns with their first write (epoch seconds)."""
    return {_s(t): float(s) for t, s in await r.zrange(turns_key(user_id, character_id), 0, -1, withscores=True)}


async def beginn(r: Redis, user_id: str, character_id: str, turn_ids: list[str]) -> float | None:
    """The first write of the earliest of the turns (epoch seconds); None when one of them is not
    in the index (written before it existed, or dropped past the horizon)."""
    if not turn_ids:
        return None
    async with r.pipeline(transaction=False) as p:
        for t in turn_ids:
            p.zscore(turns_key(user_id, character_id), t)
        scores = await p.execute()
    return None if any(s is None for s in scores) else min(float(s) for s in scores)
