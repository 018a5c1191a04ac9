"""Uploaded files (`dateien`, seed 001 §3.1a): one row per file a person handed a pair, with the
topic, summary and keywords written once at indexing; its text lies in chunks in `aufzeichnungen`
(one row per chunk, with its embedding), where the enricher's two channels search it. The same
content (its SHA-256) is indexed once per pair; removing a file removes its chunks."""
from __future__ import annotations

import re
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from core.bestand import Datei, DateienUmfang
from memory.vectors import normalise

_COLUMNS = ("id", "name", "art", "inhalt_hash", "bytes", "zeichen", "thema", "zusammenfassung", "stichworte",
            "erschliessung", "created_at")
_SELECT = ", ".join(f"d.{c}" for c in _COLUMNS) + ", (SELECT count(*) FROM aufzeichnungen a WHERE a.datei_id = d.id)"


def _row(r) -> Datei:
    out = dict(zip(_COLUMNS + ("abschnitte",), r))
    out["created_at"] = out["created_at"].isoformat()
    return Datei.model_validate(out)


def pfad(datei_id: int, abschnitt: int) -> str:
    """The chunk's path in `aufzeichnungen` (unique per pair)."""
    return f"datei/{datei_id}/{abschnitt}"


async def finden(pool: AsyncConnectionPool, user_id: str, character_id: str, inhalt_hash: str) -> Datei | None:
    """The pair's file with this content, or None."""
    async with pool.connection() as conn:
        cur = await conn.execute(f"SELECT {_SELECT} FROM dateien d WHERE d.user_id=%s AND d.character_id=%s"
                                 " AND d.inhalt_hash=%s", (user_id, character_id, inhalt_hash))
        r = await cur.fetchone()
    return _row(r) if r else None


async def speichern(pool: AsyncConnectionPool, user_id: str, character_id: str, datei: dict[str, Any],
                    abschnitte: list[dict[str, Any]]) -> tuple[Datei, bool]:
    """The file and its chunks (`inhalt`, `embedding` each) in one transaction: (the file, True).
    A file with the same content arrived first (another upload at the same time): (that file,
    False), and nothing is written."""
    async with pool.connection() as conn:
        async with conn.transaction():
            cur = await conn.execute(
                "INSERT INTO dateien (user_id, character_id, name, art, inhalt_hash, bytes, zeichen, thema,"
                " zusammenfassung, stichworte, erschliessung) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                " ON CONFLICT (user_id, character_id, inhalt_hash) DO NOTHING RETURNING id",
                (user_id, character_id, datei["name"], datei["art"], datei["inhalt_hash"], datei["bytes"],
                 datei["zeichen"], datei["thema"], datei["zusammenfassung"], list(datei["stichworte"]),
                 Jsonb(datei["erschliessung"])))
            row = await cur.fetchone()
            if row is not None:
                # what the keyword channel matches: topic, keywords and the name's words (`bello.md`: bello md)
                suchworte = ", ".join([datei["thema"], *datei["stichworte"], re.sub(r"[._\-]+", " ", datei["name"])])
                async with conn.cursor() as c:
                    await c.executemany(
                        "INSERT INTO aufzeichnungen (user_id, character_id, pfad, titel, stichworte, inhalt, embedding,"
                        " datei_id, abschnitt) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                        [(user_id, character_id, pfad(row[0], i), datei["thema"], suchworte, a["inhalt"],
                          normalise(a["embedding"]), row[0], i) for i, a in enumerate(abschnitte)])
    found = await finden(pool, user_id, character_id, datei["inhalt_hash"])
    if found is None:  # removed between the two statements: a defect of the caller's timing, loud
        raise RuntimeError(f"file {datei['inhalt_hash'][:12]} of {user_id}:{character_id} vanished while stored")
    return found, row is not None


async def umfang(pool: AsyncConnectionPool, user_id: str, character_id: str) -> DateienUmfang:
    """What a pair and its user hold already: the pair's files, the user's bytes over all pairs."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FILTER (WHERE character_id = %s), coalesce(sum(bytes), 0)"
                                 " FROM dateien WHERE user_id = %s", (character_id, user_id))
        n, b = await cur.fetchone()
    return DateienUmfang(dateien_paar=int(n), bytes_user=int(b))


async def liste(pool: AsyncConnectionPool, user_id: str, character_id: str) -> list[Datei]:
    """The pair's files, newest first."""
    async with pool.connection() as conn:
        cur = await conn.execute(f"SELECT {_SELECT} FROM dateien d WHERE d.user_id=%s AND d.character_id=%s"
                                 " ORDER BY d.created_at DESC, d.id DESC", (user_id, character_id))
        return [_row(r) for r in await cur.fetchall()]


async def loeschen(pool: AsyncConnectionPool, user_id: str, character_id: str, datei_id: int) -> bool:
    """Remove one of the pair's files with its chunks; False when the pair has no such file."""
    async with pool.connection() as conn:
        cur = await conn.execute("DELETE FROM dateien WHERE id=%s AND user_id=%s AND character_id=%s",
                                 (datei_id, user_id, character_id))
        return cur.rowcount > 0
