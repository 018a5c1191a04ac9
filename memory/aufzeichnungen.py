"""The file index (`aufzeichnungen`): two channels — keywords through PostgreSQL full text on the
stored keywords (no floor) and dense similarity with a floor — merged, capped, excerpted."""
from __future__ import annotations

import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool

from memory.config import MemoryConfig
from memory.vectors import normalise

log = logging.getLogger("novaberg.memory.aufzeichnungen")


async def add(pool: AsyncConnectionPool, user_id: str, character_id: str, pfad: str, titel: str,
              stichworte: str, inhalt: str, embedding) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "INSERT INTO aufzeichnungen (user_id, character_id, pfad, titel, stichworte, inhalt, embedding)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (user_id, character_id, pfad) DO UPDATE SET"
            " titel=EXCLUDED.titel, stichworte=EXCLUDED.stichworte, inhalt=EXCLUDED.inhalt, embedding=EXCLUDED.embedding"
            " RETURNING id",
            (user_id, character_id, pfad, titel, stichworte, inhalt,
             normalise(embedding) if embedding is not None else None))
        return (await cur.fetchone())[0]


async def suchen(pool: AsyncConnectionPool, user_id: str, character_id: str, text: str, vector,
                 cfg: MemoryConfig) -> dict[str, Any]:
    q = normalise(vector)
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM aufzeichnungen WHERE user_id=%s AND character_id=%s", (user_id, character_id))
        bestand = (await cur.fetchone())[0]
        cur = await conn.execute(
            "SELECT id, pfad, titel, inhalt, CASE WHEN embedding IS NULL THEN NULL ELSE 1 - (embedding <=> %s) END,"
            " ts_rank(to_tsvector('german', stichworte), plainto_tsquery('german', %s)) AS rank"
            " FROM aufzeichnungen WHERE user_id=%s AND character_id=%s"
            "   AND to_tsvector('german', stichworte) @@ plainto_tsquery('german', %s)"
            " ORDER BY rank DESC, id LIMIT %s", (q, text, user_id, character_id, text, cfg.files_cap))
        keyword = await cur.fetchall()
        cur = await conn.execute(
            "SELECT id, pfad, titel, inhalt, 1 - (embedding <=> %s) AS sim FROM aufzeichnungen"
            " WHERE user_id=%s AND character_id=%s AND embedding IS NOT NULL AND 1 - (embedding <=> %s) >= %s"
            " ORDER BY embedding <=> %s, id LIMIT %s",
            (q, user_id, character_id, q, cfg.files_dense_floor, q, cfg.files_cap))
        dense = await cur.fetchall()
    hits: dict[int, dict[str, Any]] = {}
    for r in keyword:
        hits[r[0]] = {"id": r[0], "pfad": r[1], "titel": r[2], "auszug": r[3][: cfg.files_excerpt_chars],
                      "cosinus": None if r[4] is None else round(float(r[4]), 6), "kanal": "stichwort"}
    for r in dense:
        if r[0] in hits:
            hits[r[0]]["kanal"] = "beide"
        else:
            hits[r[0]] = {"id": r[0], "pfad": r[1], "titel": r[2], "auszug": r[3][: cfg.files_excerpt_chars],
                          "cosinus": round(float(r[4]), 6), "kanal": "dicht"}
    # keyword hits first (exact mention), then by cosine
    ordered = sorted(hits.values(), key=lambda h: (h["kanal"] == "dicht", -(h["cosinus"] or -1.0), h["id"]))
    treffer = ordered[: cfg.files_cap]
    cosines = [h["cosinus"] for h in treffer if h["cosinus"] is not None]
    schwaechster = min(cosines) if cosines else None
    log.info("aufzeichnungen: %d Treffer, Bestand %d, schwaechster Kosinus %s", len(treffer), bestand,
             "-" if schwaechster is None else f"{schwaechster:.4f}")
    return {"treffer": treffer, "bestand": bestand, "schwaechster_kosinus": schwaechster}
