"""Timeline per pair: appointments (`termin`) and memory anchors (`erinnerungs_anker`).

Stored in UTC, queried in the configured local time zone: a local day is converted to its UTC
bounds with zoneinfo, so days of 23 or 25 hours (DST) are exact. Anchors are excluded in the
query itself, before the limit — excluding them afterwards would let five anchors fill a limit of
five and return no appointment at all.
"""
from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

from psycopg_pool import AsyncConnectionPool

from core.bestand import FensterTermin, Termin
from memory import vorher

WOCHENTAGE = ("Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag")
_COLS = "id, typ, titel, personen, beginn, ende, turn_id"


def to_utc(local: datetime, tz: str) -> datetime:
    """A local wall time (naive = in `tz`) as an aware UTC datetime."""
    if local.tzinfo is None:
        local = local.replace(tzinfo=ZoneInfo(tz))
    return local.astimezone(timezone.utc)


def day_bounds_utc(day: date, tz: str) -> tuple[datetime, datetime]:
    z = ZoneInfo(tz)
    start = datetime.combine(day, time.min, tzinfo=z)
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=z)
    return start.astimezone(timezone.utc), end.astimezone(timezone.utc)


def relation(day: date, today: date) -> str:
    d = (day - today).days
    named = {0: "heute", 1: "morgen", 2: "uebermorgen", -1: "gestern", -2: "vorgestern"}
    if d in named:
        return named[d]
    return f"in {d} Tagen" if d > 0 else f"vor {-d} Tagen"


def _row(r, tz: str) -> Termin:
    z = ZoneInfo(tz)
    beginn_local = r[4].astimezone(z)
    return Termin(id=r[0], typ=r[1], titel=r[2], personen=list(r[3]), beginn_utc=r[4].isoformat(),
                  beginn_lokal=beginn_local.isoformat(), wochentag=WOCHENTAGE[beginn_local.weekday()],
                  ende_utc=r[5].isoformat() if r[5] else None, turn_id=r[6])


async def add(pool: AsyncConnectionPool, user_id: str, character_id: str, titel: str, beginn: datetime, tz: str, *,
              personen: list[str] | None = None, ende: datetime | None = None, typ: str = "termin",
              turn_id: str | None = None, schritt: str | None = None) -> int:
    """A new entry. With `turn_id` and `schritt` (the step of the turn that writes it) the write
    happens once: the same step of the same turn again returns the entry it wrote the first time."""
    from memory import erasure

    async with pool.connection() as conn, conn.transaction():
        await erasure.pruefen(conn, user_id, f"a {typ}")
        cur = await conn.execute(
            "INSERT INTO timeline (user_id, character_id, typ, titel, personen, beginn, ende, turn_id, schritt)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)"
            " ON CONFLICT (user_id, character_id, turn_id, schritt) WHERE schritt IS NOT NULL"
            " DO UPDATE SET schritt = EXCLUDED.schritt RETURNING id",
            (user_id, character_id, typ, titel, personen or [], to_utc(beginn, tz),
             to_utc(ende, tz) if ende else None, turn_id, schritt if turn_id else None))
        return (await cur.fetchone())[0]


async def count_by_turn(pool: AsyncConnectionPool, user_id: str, character_id: str,
                        typ: str = "erinnerungs_anker") -> dict[str, int]:
    """Per turn id: how many of the pair's entries of one type that turn wrote."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT turn_id, count(*) FROM timeline WHERE user_id=%s AND character_id=%s AND typ=%s"
            " AND turn_id IS NOT NULL GROUP BY turn_id", (user_id, character_id, typ))
        return {r[0]: r[1] for r in await cur.fetchall()}


async def move(pool: AsyncConnectionPool, user_id: str, character_id: str, entry_id: int, beginn: datetime,
               tz: str, *, turn_id: str | None = None) -> bool:
    """Move an entry; with `turn_id` its old start is kept for taking the turn back."""
    async with pool.connection() as conn:
        async with conn.transaction():
            await vorher.festhalten(conn, user_id, character_id, turn_id, "timeline",
                                    "t.id=%s AND t.user_id=%s AND t.character_id=%s",
                                    (entry_id, user_id, character_id), ("beginn",))
            cur = await conn.execute("UPDATE timeline SET beginn=%s WHERE id=%s AND user_id=%s AND character_id=%s",
                                     (to_utc(beginn, tz), entry_id, user_id, character_id))
            return cur.rowcount == 1


async def delete(pool: AsyncConnectionPool, user_id: str, character_id: str, entry_id: int, *,
                 turn_id: str | None = None) -> bool:
    """Delete an entry; with `turn_id` the entry is kept for taking the turn back."""
    async with pool.connection() as conn:
        async with conn.transaction():
            await vorher.festhalten(conn, user_id, character_id, turn_id, "timeline",
                                    "t.id=%s AND t.user_id=%s AND t.character_id=%s", (entry_id, user_id, character_id))
            cur = await conn.execute("DELETE FROM timeline WHERE id=%s AND user_id=%s AND character_id=%s",
                                     (entry_id, user_id, character_id))
            return cur.rowcount == 1


async def find_by_date_range(pool: AsyncConnectionPool, user_id: str, character_id: str, von: date, bis: date,
                             tz: str, *, limit: int = 50, include_anchors: bool = False) -> list[Termin]:
    """Entries whose start lies on a local day from `von` to `bis` (inclusive)."""
    start, _ = day_bounds_utc(von, tz)
    _, end = day_bounds_utc(bis, tz)
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT {_COLS} FROM timeline WHERE user_id=%s AND character_id=%s AND beginn >= %s AND beginn < %s"
            " AND (%s OR typ <> 'erinnerungs_anker') ORDER BY beginn, id LIMIT %s",
            (user_id, character_id, start, end, include_anchors, limit))
        return [_row(r, tz) for r in await cur.fetchall()]


async def find_by_keyword(pool: AsyncConnectionPool, user_id: str, character_id: str, keyword: str, tz: str, *,
                          limit: int = 5, now: datetime | None = None) -> list[Termin]:
    """Titles and persons, in both directions of time (nearest to now first), anchors excluded
    in the query, before the limit."""
    now = now or datetime.now(timezone.utc)
    pattern = f"%{keyword.strip()}%"
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT {_COLS} FROM timeline WHERE user_id=%s AND character_id=%s AND typ <> 'erinnerungs_anker'"
            " AND (titel ILIKE %s OR EXISTS (SELECT 1 FROM unnest(personen) p WHERE p ILIKE %s))"
            " ORDER BY abs(extract(epoch FROM (beginn - %s))), id LIMIT %s",
            (user_id, character_id, pattern, pattern, now, limit))
        return [_row(r, tz) for r in await cur.fetchall()]


async def proaktives_fenster(pool: AsyncConnectionPool, user_id: str, character_id: str, tz: str, *,
                             back_days: int = 3, ahead_days: int = 14, now: datetime | None = None
                             ) -> list[FensterTermin]:
    """Appointments from `back_days` ago to `ahead_days` ahead (local days), each with its German
    weekday and its relation to today."""
    now = now or datetime.now(timezone.utc)
    today = now.astimezone(ZoneInfo(tz)).date()
    rows = await find_by_date_range(pool, user_id, character_id, today - timedelta(days=back_days),
                                    today + timedelta(days=ahead_days), tz)
    return [FensterTermin(**r.model_dump(), bezug=relation(datetime.fromisoformat(r.beginn_lokal).date(), today))
            for r in rows]
