"""The file index (`aufzeichnungen`, seed 001 §3.1a): two channels — keywords through PostgreSQL
full text on the stored keywords (no floor: an exact term does not estimate) and dense similarity
with a floor — merged, one hit per file, capped, excerpted. The rows are the chunks of uploaded
files (memory/dateien.py); a row without a file stands for itself.

The keyword channel matches on any content word of the question: its words become an OR query
(`a | b | c`) under the German configuration, which drops the stop words and stems the rest; a
file is relevant when one of them is among its keywords, and `ts_rank_cd` (keywords weighted
above the chunk's own text) orders the hits and picks a file's best chunk."""
from __future__ import annotations

import logging
import re
from typing import Any

from psycopg_pool import AsyncConnectionPool

from core.state import DateiTreffer, Dateisuche
from memory.config import MemoryConfig
from memory.vectors import normalise

log = logging.getLogger("novaberg.memory.aufzeichnungen")

_WORT = re.compile(r"[^\W_]+")
ANFRAGE_WOERTER = 64
"""The most distinct words of a question that go into the keyword query."""
_AUSZUG_OPTIONEN = "StartSel=\"\", StopSel=\"\", MaxWords=50, MinWords=35, ShortWord=2, MaxFragments=0"


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


def oder_anfrage(text: str) -> str | None:
    """The question's words as an OR query for `to_tsquery` (`steuer | finanzamt`); None without
    a word. Only letters and digits reach it, so no word is read as an operator."""
    seen: list[str] = []
    for w in _WORT.findall(text.lower()):
        if w not in seen:
            seen.append(w)
        if len(seen) >= ANFRAGE_WOERTER:
            break
    return " | ".join(seen) or None


async def bestand(pool: AsyncConnectionPool, user_id: str, character_id: str) -> int:
    """How many files (a row without a file counts as one) the pair's index holds."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(DISTINCT coalesce(datei_id, -id)) FROM aufzeichnungen"
                                 " WHERE user_id=%s AND character_id=%s", (user_id, character_id))
        return (await cur.fetchone())[0]


_STICHWORT_SQL = (
    "WITH q AS (SELECT to_tsquery('german', %(anfrage)s) AS q)"
    " SELECT b.id, b.datei_id, b.pfad, b.titel, d.name, d.zusammenfassung,"
    "        ts_headline('german', b.inhalt, q.q, %(optionen)s), b.sim, b.rang FROM ("
    "   SELECT DISTINCT ON (coalesce(a.datei_id, -a.id)) a.id, a.datei_id, a.pfad, a.titel, a.inhalt,"
    "          CASE WHEN a.embedding IS NULL THEN NULL ELSE 1 - (a.embedding <=> %(v)s) END AS sim,"
    "          ts_rank_cd(setweight(to_tsvector('german', a.stichworte), 'A')"
    "                     || setweight(to_tsvector('german', a.inhalt), 'D'), q.q) AS rang"
    "   FROM aufzeichnungen a, q WHERE a.user_id=%(u)s AND a.character_id=%(c)s"
    "     AND to_tsvector('german', a.stichworte) @@ q.q"
    "   ORDER BY coalesce(a.datei_id, -a.id), rang DESC, a.id) b"
    " CROSS JOIN q LEFT JOIN dateien d ON d.id = b.datei_id"
    " ORDER BY b.rang DESC, b.id LIMIT %(cap)s")

_DICHT_SQL = (
    "SELECT b.id, b.datei_id, b.pfad, b.titel, d.name, d.zusammenfassung, b.inhalt, b.sim FROM ("
    "   SELECT DISTINCT ON (coalesce(datei_id, -id)) id, datei_id, pfad, titel, inhalt,"
    "          1 - (embedding <=> %(v)s) AS sim"
    "   FROM aufzeichnungen WHERE user_id=%(u)s AND character_id=%(c)s AND embedding IS NOT NULL"
    "     AND 1 - (embedding <=> %(v)s) >= %(boden)s"
    "   ORDER BY coalesce(datei_id, -id), embedding <=> %(v)s, id) b"
    " LEFT JOIN dateien d ON d.id = b.datei_id"
    " ORDER BY b.sim DESC, b.id LIMIT %(cap)s")


def _treffer(r, kanal: str, cfg: MemoryConfig) -> dict[str, Any]:
    return {"id": r[0], "datei_id": r[1], "pfad": r[2], "titel": r[3], "datei": r[4], "zusammenfassung": r[5],
            "auszug": r[6][: cfg.files_excerpt_chars], "cosinus": None if r[7] is None else round(float(r[7]), 6),
            "kanal": kanal, "rang": round(float(r[8]), 6) if kanal == "stichwort" else None}


async def suchen(pool: AsyncConnectionPool, user_id: str, character_id: str, text: str, vector,
                 cfg: MemoryConfig) -> Dateisuche:
    """The pair's files for a question: `text` for the keyword channel, `vector` for the dense one.
    At most `files_cap` hits, one per file: the keyword channel's first (by rank), then the dense
    channel's (by cosine)."""
    params = {"v": normalise(vector), "u": user_id, "c": character_id, "cap": cfg.files_cap,
              "anfrage": oder_anfrage(text), "optionen": _AUSZUG_OPTIONEN, "boden": cfg.files_dense_floor}
    n = await bestand(pool, user_id, character_id)
    async with pool.connection() as conn:
        keyword = await (await conn.execute(_STICHWORT_SQL, params)).fetchall() if params["anfrage"] else []
        dense = await (await conn.execute(_DICHT_SQL, params)).fetchall()
    hits: dict[int, dict[str, Any]] = {}
    for r in keyword:
        hits[r[1] if r[1] is not None else -r[0]] = _treffer(r, "stichwort", cfg)
    for r in dense:
        key = r[1] if r[1] is not None else -r[0]
        if key in hits:
            hits[key]["kanal"] = "beide"
            hits[key]["cosinus"] = max(hits[key]["cosinus"] or -1.0, round(float(r[7]), 6))
        else:
            hits[key] = _treffer((*r, None), "dicht", cfg)
    # the keyword channel first (an exact mention, by rank), then by cosine
    ordered = sorted(hits.values(), key=lambda h: (h["kanal"] == "dicht", -(h["rang"] or 0.0),
                                                   -(h["cosinus"] or -1.0), h["id"]))
    treffer = ordered[: cfg.files_cap]
    cosines = [h["cosinus"] for h in treffer if h["cosinus"] is not None]
    schwaechster = min(cosines) if cosines else None
    log.info("aufzeichnungen: %d Treffer, Bestand %d, schwaechster Kosinus %s", len(treffer), n,
             "-" if schwaechster is None else f"{schwaechster:.4f}")
    return Dateisuche(treffer=[DateiTreffer.model_validate(h) for h in treffer], bestand=n,
                              schwaechster_kosinus=schwaechster)
