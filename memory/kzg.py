"""Short-term memory (KZG): entries with embeddings per pair, in Redis, bounded.

Keys: `kzg:{user}:{character}:entries` (hash id → JSON of the entry without its vector),
`kzg:{user}:{character}:vectors` (hash id → float32 bytes), `kzg:{user}:{character}:order` (sorted
set id → the pair's write number) and the version counter that numbers the writes. A write trims the oldest entries beyond the pair's
window in the same step (`add_entry`, `keep`). KNN is an exact cosine scan over the pair's vectors
with an absolute floor (`kzg_threshold`) and `kzg_top_k`. `KZGIndex` is the pair actor's in-memory
copy of those vectors: when the version moves it reads only the vectors it does not hold and drops
those trimmed away; Redis stays the truth.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from redis.asyncio import Redis

from core.state import KzgTreffer
from memory import erasure
from memory.vectors import normalise, pack, unpack


def _k(user_id: str, character_id: str, what: str) -> str:
    return f"kzg:{user_id}:{character_id}:{what}"


_ADD = """
if redis.call('EXISTS', KEYS[5]) == 1 then return false end
if redis.call('ZCARD', KEYS[3]) < redis.call('HLEN', KEYS[1]) then
  -- entries written before the order existed join it once, oldest first, below every written number
  local all = redis.call('HGETALL', KEYS[1])
  local old = {}
  for i = 1, #all, 2 do
    local ok, e = pcall(cjson.decode, all[i + 1])
    old[#old + 1] = {(ok and tonumber(e['time'])) or 0, all[i]}
  end
  table.sort(old, function(a, b) return a[1] < b[1] end)
  for i, e in ipairs(old) do
    redis.call('ZADD', KEYS[3], 'NX', i - #old - 1, e[2])
  end
end
local n = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], n, ARGV[1])
local over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[4])
local gone = {}
if over > 0 then
  gone = redis.call('ZRANGE', KEYS[3], 0, over - 1)
  for _, id in ipairs(gone) do
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
  end
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, over - 1)
end
return gone
"""
"""The order's score is the pair's write number (the version after this write), drawn inside the
script: the order in which Redis ran the writes, whatever the writers' clocks say."""

KEEP = 500
"""The window when a caller names none (`Settings.kzg_max_entries`)."""


async def add_entry(r: Redis, user_id: str, character_id: str, inhalt: str, embedding, *,
                    emotion: str | None = None, arousal: float | None = None, quelle: str | None = None,
                    entry_id: str | None = None, keep: int = KEEP) -> str:
    """Write an entry (the same `entry_id` again overwrites it) and trim the pair's oldest entries
    beyond `keep`, in one step; refused in the same step (`NutzerGeloescht`, nothing written) while
    the user's erasure mark `geloescht:{user}` stands."""
    entry_id = entry_id or uuid.uuid4().hex
    now = time.time()
    entry = {"id": entry_id, "inhalt": inhalt, "emotion": emotion, "arousal": arousal, "quelle": quelle, "time": now}
    keys = [_k(user_id, character_id, w) for w in ("entries", "vectors", "order", "version")]
    gone = await r.eval(_ADD, 5, *keys, erasure.marke_key(user_id), entry_id, json.dumps(entry),
                        pack(normalise(embedding)), int(keep))
    if gone is None:  # the user's erasure mark stands: nothing was written
        raise erasure.abgewiesen(user_id, f"the short-term entry {entry_id}")
    return entry_id


def _s(x) -> str:
    return x.decode() if isinstance(x, bytes) else x


_ENTFERNEN = """
local gone = 0
for i = 1, #ARGV do
  gone = gone + redis.call('HDEL', KEYS[1], ARGV[i])
  redis.call('HDEL', KEYS[2], ARGV[i])
  redis.call('ZREM', KEYS[3], ARGV[i])
end
if gone > 0 then redis.call('INCR', KEYS[4]) end
return gone
"""
"""Entries with their vectors and their place in the order; the version moves, so each pair
actor's index reads the pair's entries again."""


async def entfernen(r: Redis, user_id: str, character_id: str, entry_ids: list[str]) -> int:
    """Delete the entries (a turn taken back: `turn-{turn_id}`; a memory forgotten), in one step;
    the number that were there."""
    if not entry_ids:
        return 0
    keys = [_k(user_id, character_id, w) for w in ("entries", "vectors", "order", "version")]
    return int(await r.eval(_ENTFERNEN, 4, *keys, *entry_ids))


_ABLOESEN = """
local n = 0
for i = 1, #ARGV - 3 do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw then
    local e = cjson.decode(raw)
    if not e['abgeloest_durch'] then
      e['abgeloest_durch'] = ARGV[#ARGV - 2]
      e['nachfolger'] = ARGV[#ARGV - 1]
      e['abgeloest_seit'] = tonumber(ARGV[#ARGV])
      redis.call('HSET', KEYS[1], ARGV[i], cjson.encode(e))
      n = n + 1
    end
  end
end
return n
"""
"""Marks the entries there (one trimmed or taken back meanwhile is not made again), each once."""

_WIEDER_GUELTIG = """
local n = 0
for _, id in ipairs(redis.call('HKEYS', KEYS[1])) do
  local raw = redis.call('HGET', KEYS[1], id)
  local ok, e = pcall(cjson.decode, raw)
  if ok and e['abgeloest_durch'] then
    for i = 2, #ARGV do
      if e['abgeloest_durch'] == ARGV[i] then
        if ARGV[1] == 'ganz' then
          e['abgeloest_durch'] = nil
          e['abgeloest_seit'] = nil
        end
        e['nachfolger'] = nil
        redis.call('HSET', KEYS[1], id, cjson.encode(e))
        n = n + 1
      end
    end
  end
end
return n
"""
"""The marks the turns in ARGV[2..] set: taken off whole (`ganz`, the turns taken back), or only
their successor's text (`text`, the successors forgotten: the entry stays ended)."""


async def abloesen(r: Redis, user_id: str, character_id: str, entry_ids: list[str], turn_id: str, nachfolger: str,
                   seit: float) -> int:
    """Mark the entries superseded by the turn `turn_id` (what took their place: `nachfolger`, since
    `seit`, epoch seconds): a search finds them as past (`KzgTreffer.als_text`). An entry marked
    already keeps its first mark; the number marked now."""
    if not entry_ids:
        return 0
    return int(await r.eval(_ABLOESEN, 1, _k(user_id, character_id, "entries"), *entry_ids, turn_id, nachfolger,
                            repr(float(seit))))


async def abloesung_zuruecknehmen(r: Redis, user_id: str, character_id: str, turn_ids: list[str]) -> int:
    """The marks the turns set (`abloesen`) taken off again (the turns taken back); the number."""
    if not turn_ids:
        return 0
    return int(await r.eval(_WIEDER_GUELTIG, 1, _k(user_id, character_id, "entries"), "ganz", *turn_ids))


async def nachfolger_vergessen(r: Redis, user_id: str, character_id: str, turn_ids: list[str]) -> int:
    """The successor's text the turns' marks carry, dropped (those turns' items forgotten): the
    entries stay ended, as a long-term memory whose successor is forgotten does; the number."""
    if not turn_ids:
        return 0
    return int(await r.eval(_WIEDER_GUELTIG, 1, _k(user_id, character_id, "entries"), "text", *turn_ids))


async def eintraege(r: Redis, user_id: str, character_id: str) -> list[dict[str, Any]]:
    """The pair's entries without their vectors, newest first."""
    raw = await r.hgetall(_k(user_id, character_id, "entries"))
    out = [json.loads(v) for v in raw.values()]
    return sorted(out, key=lambda e: (e.get("time") or 0, e.get("id") or ""), reverse=True)


async def count(r: Redis, user_id: str, character_id: str) -> int:
    return await r.hlen(_k(user_id, character_id, "entries"))


async def version(r: Redis, user_id: str, character_id: str) -> int:
    return int(await r.get(_k(user_id, character_id, "version")) or 0)


@dataclass
class KZGIndex:
    """The pair's vectors in memory; brought up to date when the Redis version moves, reading only
    the vectors it does not hold yet."""

    user_id: str
    character_id: str
    _version: int = -1
    _ids: list[str] = field(default_factory=list)
    _matrix: np.ndarray | None = None
    _rows: dict[str, np.ndarray] = field(default_factory=dict)
    _times: dict[str, float] = field(default_factory=dict)
    reads: int = 0
    """Vectors read from Redis so far (what an update costs)."""

    async def refresh(self, r: Redis) -> None:
        v = await version(r, self.user_id, self.character_id)
        if v == self._version:
            return
        order_key = _k(self.user_id, self.character_id, "order")
        if not self._times:  # the first load (or entries of before the order): every vector
            raw = await r.hgetall(_k(self.user_id, self.character_id, "vectors"))
            self._rows = {_s(k): unpack(x) for k, x in raw.items()}
            self._times = {_s(k): t for k, t in await r.zrange(order_key, 0, -1, withscores=True)}
            self.reads += len(self._rows)
        else:  # what was written since, and the oldest number still kept (what is older was trimmed)
            since = max(self._times.values())
            async with r.pipeline(transaction=True) as p:
                p.zrangebyscore(order_key, since, "+inf", withscores=True)
                p.zrange(order_key, 0, 0, withscores=True)
                p.zcard(order_key)
                new, oldest, card = await p.execute()
            floor = oldest[0][1] if oldest else float("inf")
            new = {_s(k): t for k, t in new if not (_s(k) in self._times and self._times[_s(k)] == t)}
            for gone in [i for i, t in self._times.items() if t < floor]:
                self._rows.pop(gone, None)
                self._times.pop(gone, None)
            got = await r.hmget(_k(self.user_id, self.character_id, "vectors"), list(new)) if new else []
            for (i, t), x in zip(new.items(), got):
                if x is not None:
                    self._rows[i], self._times[i] = unpack(x), t
            self.reads += len(new)
            if len(self._rows) != card:  # an entry went other than by the trim (taken back, erased): all again
                self._rows, self._times = {}, {}
                self._version = -1
                return await self.refresh(r)
        self._ids = sorted(self._rows)
        self._matrix = np.stack([self._rows[i] for i in self._ids]) if self._ids else None
        self._version = v

    async def search(self, r: Redis, query, *, threshold: float, top_k: int, refreshed: bool = False) -> list[KzgTreffer]:
        """Entries with cosine ≥ threshold, best first, at most top_k. Ties break by id.
        `refreshed`: the caller has just awaited `refresh` (it ran beside other work)."""
        if not refreshed:
            await self.refresh(r)
        if self._matrix is None:
            return []
        sims = self._matrix @ normalise(query)
        above = np.flatnonzero(sims >= threshold)  # only these are ordered
        order = sorted(above.tolist(), key=lambda i: (-float(sims[i]), self._ids[i]))
        hits = [(self._ids[i], float(sims[i])) for i in order][:top_k]
        if not hits:
            return []
        raw = await r.hmget(_k(self.user_id, self.character_id, "entries"), [h[0] for h in hits])
        out = []
        for (entry_id, sim), data in zip(hits, raw):
            if data is None:
                continue  # deleted between the scan and the read
            out.append(KzgTreffer.model_validate({**json.loads(data), "similarity": round(sim, 6)}))
        return out
