"""Notes of a user: create, update, delete, find by keyword and by full text, proactive listing."""
from __future__ import annotations

from typing import Any

from psycopg_pool import AsyncConnectionPool

from core.beziehung import Notiz, NotizUebersicht
from memory import vorher

_COLS = "id, name, inhalt, zusammenfassung, themen, aktiv, updated_at"


def _row(r) -> Notiz:
    return Notiz(id=r[0], name=r[1], inhalt=r[2], zusammenfassung=r[3], themen=list(r[4]), aktiv=r[5],
                 updated_at=r[6].isoformat())


async def create(pool: AsyncConnectionPool, user_id: str, name: str, inhalt: str = "", zusammenfassung: str = "",
                 themen: list[str] | None = None, *, turn_id: str | None = None, schritt: str | None = None) -> int:
    """A new note; with `turn_id` and `schritt` at most once per step of a turn (see timeline.add)."""
    from memory import erasure

    async with pool.connection() as conn, conn.transaction():
        await erasure.pruefen(conn, user_id, "a note")
        cur = await conn.execute(
            "INSERT INTO notizen (user_id, name, inhalt, zusammenfassung, themen, turn_id, schritt)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s)"
            " ON CONFLICT (user_id, turn_id, schritt) WHERE schritt IS NOT NULL"
            " DO UPDATE SET schritt = EXCLUDED.schritt RETURNING id",
            (user_id, name, inhalt, zusammenfassung, themen or [], turn_id, schritt if turn_id else None))
        return (await cur.fetchone())[0]


async def update(pool: AsyncConnectionPool, user_id: str, note_id: int, *, turn: tuple[str, str] | None = None,
                 **fields: Any) -> bool:
    """Change a note's fields. `turn` (character_id, turn_id): a turn's agent changes it, and the
    note as it was is kept for taking that turn back."""
    allowed = {"name", "inhalt", "zusammenfassung", "themen", "aktiv"}
    bad = set(fields) - allowed
    if bad:
        raise ValueError(f"unknown note fields {sorted(bad)}")
    if not fields:
        return False
    sets = ", ".join(f"{k} = %s" for k in fields)
    async with pool.connection() as conn:
        async with conn.transaction():
            await _vorher(conn, user_id, note_id, turn)
            cur = await conn.execute(f"UPDATE notizen SET {sets}, updated_at = now() WHERE id=%s AND user_id=%s",
                                     (*fields.values(), note_id, user_id))
            return cur.rowcount == 1


async def _vorher(conn, user_id: str, note_id: int, turn: tuple[str, str] | None) -> None:
    if turn is not None:
        await vorher.festhalten(conn, user_id, turn[0], turn[1], "notizen", "t.id=%s AND t.user_id=%s",
                                (note_id, user_id))


async def delete(pool: AsyncConnectionPool, user_id: str, note_id: int, *, turn: tuple[str, str] | None = None) -> bool:
    """Delete a note; `turn` as for `update`."""
    async with pool.connection() as conn:
        async with conn.transaction():
            await _vorher(conn, user_id, note_id, turn)
            cur = await conn.execute("DELETE FROM notizen WHERE id=%s AND user_id=%s", (note_id, user_id))
            return cur.rowcount == 1


async def find_by_keyword(pool: AsyncConnectionPool, user_id: str, keyword: str, limit: int = 10) -> list[Notiz]:
    """Name or topics contain the keyword (case-insensitive)."""
    p = f"%{keyword.strip()}%"
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT {_COLS} FROM notizen WHERE user_id=%s AND aktiv AND (name ILIKE %s OR"
            " EXISTS (SELECT 1 FROM unnest(themen) t WHERE t ILIKE %s)) ORDER BY updated_at DESC, id LIMIT %s",
            (user_id, p, p, limit))
        return [_row(r) for r in await cur.fetchall()]


async def find_fulltext(pool: AsyncConnectionPool, user_id: str, text: str, limit: int = 10) -> list[Notiz]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT {_COLS} FROM notizen WHERE user_id=%s AND aktiv AND"
            " to_tsvector('german', name || ' ' || inhalt || ' ' || zusammenfassung) @@ plainto_tsquery('german', %s)"
            " ORDER BY ts_rank(to_tsvector('german', name || ' ' || inhalt || ' ' || zusammenfassung),"
            " plainto_tsquery('german', %s)) DESC, id LIMIT %s", (user_id, text, text, limit))
        return [_row(r) for r in await cur.fetchall()]


async def proactive_listing(pool: AsyncConnectionPool, user_id: str) -> list[NotizUebersicht]:
    """Name, summary and topics of the user's active notes, newest first."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT name, zusammenfassung, themen FROM notizen WHERE user_id=%s AND aktiv ORDER BY updated_at DESC, id",
            (user_id,))
        return [NotizUebersicht(name=r[0], zusammenfassung=r[1], themen=list(r[2])) for r in await cur.fetchall()]
