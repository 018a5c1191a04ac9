"""Short-term memory (KZG): entries with embeddings per pair, in Redis.

Keys: `kzg:{user}:{character}:entries` (hash id → JSON of the entry without its vector) and
`kzg:{user}:{character}:vectors` (hash id → float32 bytes). KNN is an exact cosine scan over the
pair's vectors with an absolute floor (`kzg_threshold`) and `kzg_top_k`. `KZGIndex` is the pair
actor's in-memory cache of those vectors; Redis stays the truth.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from redis.asyncio import Redis

from memory.vectors import normalise, pack, unpack


def _k(user_id: str, character_id: str, what: str) -> str:
    return f"kzg:{user_id}:{character_id}:{what}"


async def add_entry(r: Redis, user_id: str, character_id: str, inhalt: str, embedding, *,
                    emotion: str | None = None, arousal: float | None = None, quelle: str | None = None,
                    entry_id: str | None = None) -> str:
    entry_id = entry_id or uuid.uuid4().hex
    entry = {"id": entry_id, "inhalt": inhalt, "emotion": emotion, "arousal": arousal, "quelle": quelle,
             "time": time.time()}
    async with r.pipeline(transaction=True) as p:
        p.hset(_k(user_id, character_id, "entries"), entry_id, json.dumps(entry))
        p.hset(_k(user_id, character_id, "vectors"), entry_id, pack(normalise(embedding)))
        p.incr(_k(user_id, character_id, "version"))
        await p.execute()
    return entry_id


async def count(r: Redis, user_id: str, character_id: str) -> int:
    return await r.hlen(_k(user_id, character_id, "entries"))


async def version(r: Redis, user_id: str, character_id: str) -> int:
    return int(await r.get(_k(user_id, character_id, "version")) or 0)


@dataclass
class KZGIndex:
    """The pair's vectors in memory; reloaded when the Redis version moves."""

    user_id: str
    character_id: str
    _version: int = -1
    _ids: list[str] = field(default_factory=list)
    _matrix: np.ndarray | None = None

    async def refresh(self, r: Redis) -> None:
        v = await version(r, self.user_id, self.character_id)
        if v == self._version:
            return
        raw = await r.hgetall(_k(self.user_id, self.character_id, "vectors"))
        vecs = {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}
        ids = sorted(vecs)
        self._ids = ids
        self._matrix = np.stack([unpack(vecs[i]) for i in ids]) if ids else None
        self._version = v

    async def search(self, r: Redis, query, *, threshold: float, top_k: int, refreshed: bool = False) -> list[dict[str, Any]]:
        """Entries with cosine ≥ threshold, best first, at most top_k. Ties break by id.
        `refreshed`: the caller has just awaited `refresh` (it ran beside other work)."""
        if not refreshed:
            await self.refresh(r)
        if self._matrix is None:
            return []
        sims = self._matrix @ normalise(query)
        order = sorted(range(len(self._ids)), key=lambda i: (-float(sims[i]), self._ids[i]))
        hits = [(self._ids[i], float(sims[i])) for i in order if sims[i] >= threshold][:top_k]
        if not hits:
            return []
        raw = await r.hmget(_k(self.user_id, self.character_id, "entries"), [h[0] for h in hits])
        out = []
        for (entry_id, sim), data in zip(hits, raw):
            if data is None:
                continue  # deleted between the scan and the read
            e = json.loads(data)
            e["similarity"] = round(sim, 6)
            out.append(e)
        return out
