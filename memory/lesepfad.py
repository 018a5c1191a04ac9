"""The memory read path: what Nova recalls for a question.

Anchors come from two channels over the pair's long-term memory — dense (exact cosine) and
keyword (PostgreSQL full text over the node text) — fused by reciprocal rank; from the anchors,
activation spreads along the synapses (`lzg.spreading_lesen`'s walk). The enricher, the
Thinker's memory search and `novaberg memory search` all read through here.
"""
from __future__ import annotations

import re
from typing import Any

from psycopg_pool import AsyncConnectionPool

from memory.config import MemoryConfig
from memory.vectors import normalise

RRF_K = 60
_WORD = re.compile(r"\w{3,}", re.UNICODE)
_STOP = {"the", "and", "did", "what", "when", "how", "who", "was", "does", "for", "with", "that", "this", "her",
         "his", "has", "have", "are", "you", "your", "she", "they", "them", "from", "which", "would", "about",
         "der", "die", "das", "und", "wie", "was", "wer", "ist", "hat", "mit", "ein", "eine", "den", "dem",
         "nicht", "ich", "du", "sie", "wir", "ihr", "mein", "dein", "sein", "auf", "für", "von", "zu", "im"}


def keyword_query(text: str) -> str | None:
    """An OR query over the content words: one matching word is enough, ts_rank orders."""
    words = sorted({w.lower() for w in _WORD.findall(text)} - _STOP)
    return " | ".join(words) if words else None


async def _dense(conn, user_id, character_id, q, n):
    cur = await conn.execute(
        "SELECT id, 1 - (embedding <=> %s) FROM lzg_knoten WHERE user_id=%s AND character_id=%s AND aktiv"
        " ORDER BY embedding <=> %s, id LIMIT %s", (q, user_id, character_id, q, n))
    return await cur.fetchall()


async def _keyword(conn, user_id, character_id, text, n):
    tsq = keyword_query(text)
    if tsq is None:
        return []
    cur = await conn.execute(
        "SELECT id, ts_rank_cd(to_tsvector('simple', inhalt), to_tsquery('simple', %s)) AS r FROM lzg_knoten"
        " WHERE user_id=%s AND character_id=%s AND aktiv AND to_tsvector('simple', inhalt) @@ to_tsquery('simple', %s)"
        " ORDER BY r DESC, id LIMIT %s", (tsq, user_id, character_id, tsq, n))
    return await cur.fetchall()


async def erinnern(pool: AsyncConnectionPool, user_id: str, character_id: str, text: str, vector,
                   cfg: MemoryConfig, *, k: int = 10, candidates: int = 50, spread: bool = True) -> list[dict[str, Any]]:
    """The k memories best fitting the question, best first, each with its score and source."""
    q = normalise(vector)
    async with pool.connection() as conn:
        dense = await _dense(conn, user_id, character_id, q, candidates)
        kw = await _keyword(conn, user_id, character_id, text, candidates)
        score: dict[int, float] = {}
        cos = {i: float(s) for i, s in dense}
        for rank, (i, _) in enumerate(dense):
            score[i] = score.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        for rank, (i, _) in enumerate(kw):
            score[i] = score.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        ranked = sorted(score, key=lambda i: (-score[i], i))
        if spread and ranked and cfg.spreading_depth > 0:
            # neighbours of the strongest anchors inherit a decayed share of their score
            anchors = ranked[: cfg.lzg_anchor_count]
            cur = await conn.execute(
                "SELECT von_id, nach_id, gewicht FROM lzg_synapsen WHERE von_id = ANY(%s) ORDER BY von_id, nach_id",
                (anchors,))
            for von, nach, w in await cur.fetchall():
                inherited = score[von] * float(w) * cfg.spreading_decay
                if inherited > score.get(nach, 0.0):
                    score[nach] = inherited
            ranked = sorted(score, key=lambda i: (-score[i], i))
        top = ranked[:k]
        cur = await conn.execute("SELECT id, inhalt, quelle, dimension, beobachter FROM lzg_knoten WHERE id = ANY(%s)",
                                 (top,))
        rows = {r[0]: r for r in await cur.fetchall()}
    return [{"id": i, "inhalt": rows[i][1], "quelle": rows[i][2], "dimension": rows[i][3],
             "beobachter": rows[i][4], "score": round(score[i], 6), "cosinus": cos.get(i)} for i in top]
