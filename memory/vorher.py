"""Before-images of a turn's updates (`turn_vorher`, migration 0015): a write of a turn that changes
or deletes a row that was there before keeps the row's columns as they were, in the same
transaction; taking the turn back (`memory/ruecknahme.py`) puts them back, newest first, so the
row ends as it stood before the first retracted turn touched it. A row the turn made has no
before-image (`vorher` NULL): taking the turn back deletes it.

Only the tables in `TABELLEN` take part, each with its key columns; the caller names the columns
it changes (none: the whole row, for a delete or a row replaced as a whole).
"""
from __future__ import annotations

import json
import logging
from typing import Any, Sequence


log = logging.getLogger("novaberg.vorher")

TABELLEN: dict[str, tuple[str, ...]] = {
    "pair_profiles": ("user_id", "character_id"), "nova_emotion": ("user_id", "character_id"),
    "ziele": ("id",), "lzg_knoten": ("id",), "notizen": ("id",), "timeline": ("id",), "direktiven": ("id",),
    "charakter_anweisungen": ("id",), "lzg_synapsen": ("von_id", "nach_id"),
}
"""The tables whose rows a turn updates in place, with their key columns."""


def _tabelle(tabelle: str) -> tuple[str, ...]:
    try:
        return TABELLEN[tabelle]
    except KeyError:
        raise ValueError(f"no before-images for table {tabelle!r}") from None


async def festhalten(conn, user_id: str, character_id: str, turn_id: str | None, tabelle: str,
                     where: str, args: Sequence[Any], spalten: Sequence[str] = ()) -> int:
    """Keep the before-image of the rows of `tabelle` that `where` selects (with `args`): their key
    and `spalten` (all columns when empty). No `turn_id`: nothing is kept (a write outside a
    turn: an operator's, an import's). Returns the rows kept."""
    if not turn_id:
        return 0
    key = _tabelle(tabelle)
    bild = "to_jsonb(t)" if not spalten else \
        "jsonb_build_object(" + ", ".join(f"'{c}', t.{c}" for c in (*key, *spalten)) + ")"
    schluessel = "jsonb_build_object(" + ", ".join(f"'{c}', t.{c}" for c in key) + ")"
    cur = await conn.execute(
        f"INSERT INTO turn_vorher (user_id, character_id, turn_id, tabelle, schluessel, vorher)"
        f" SELECT %s, %s, %s, %s, {schluessel}, {bild} FROM {tabelle} t WHERE {where}",
        (user_id, character_id, turn_id, tabelle, *args))
    return cur.rowcount


async def zeile_festhalten(conn, user_id: str, character_id: str, turn_id: str | None, tabelle: str,
                           schluessel: dict[str, Any], spalten: Sequence[str] = ()) -> None:
    """Keep the before-image of the one row with `schluessel`; none there: record that the turn
    makes it (taking the turn back deletes the row)."""
    if not turn_id:
        return
    if sorted(schluessel) != sorted(_tabelle(tabelle)):
        raise ValueError(f"the key of {tabelle} is {_tabelle(tabelle)}, not {sorted(schluessel)}")
    where = " AND ".join(f"t.{c} = %s" for c in schluessel)
    if not await festhalten(conn, user_id, character_id, turn_id, tabelle, where, list(schluessel.values()), spalten):
        await neu_angelegt(conn, user_id, character_id, turn_id, tabelle, schluessel)


async def neu_angelegt(conn, user_id: str, character_id: str, turn_id: str | None, tabelle: str,
                       schluessel: dict[str, Any]) -> None:
    """Record that the turn made the row with `schluessel`: taking the turn back deletes it."""
    if turn_id:
        _tabelle(tabelle)
        await conn.execute("INSERT INTO turn_vorher (user_id, character_id, turn_id, tabelle, schluessel, vorher)"
                           " VALUES (%s,%s,%s,%s,%s::jsonb,NULL)", (user_id, character_id, turn_id, tabelle, json.dumps(schluessel)))


async def _wieder_einfuegen(conn, tabelle: str, vorher: dict[str, Any]) -> None:
    """A deleted row back from its before-image; one kept in part (the columns an update changed)
    cannot come back, and says so."""
    try:
        async with conn.transaction():  # a savepoint: a failed insert leaves the rest standing
            await conn.execute(f"INSERT INTO {tabelle} SELECT * FROM jsonb_populate_record(NULL::{tabelle}, %s::jsonb)"
                               " ON CONFLICT DO NOTHING", (json.dumps(vorher),))
    except Exception as e:  # psycopg's NotNullViolation and kin
        log.warning("fallback vorher.zeile_weg: a row of %s changed by a retracted turn is gone and its "
                    "before-image holds only some columns; it stays gone (%s)", tabelle, type(e).__name__)


async def zuruecksetzen(conn, user_id: str, character_id: str, turn_ids: Sequence[str]) -> int:
    """Put back what the turns changed, newest first, and forget their before-images (one
    transaction with the caller's, so a second run finds nothing to put back). Returns the rows."""
    cur = await conn.execute("SELECT tabelle, schluessel, vorher FROM turn_vorher WHERE user_id=%s AND"
                             " character_id=%s AND turn_id = ANY(%s) ORDER BY nr DESC",
                             (user_id, character_id, list(turn_ids)))
    rows = await cur.fetchall()
    for tabelle, schluessel, vorher in rows:
        key = _tabelle(tabelle)
        match = " AND ".join(f"t.{c} = r.{c}" for c in key)
        if vorher is None:
            await conn.execute(f"DELETE FROM {tabelle} t USING jsonb_populate_record(NULL::{tabelle}, %s::jsonb) r"
                               f" WHERE {match}", (json.dumps(schluessel),))
            continue
        spalten = [c for c in vorher if c not in key]
        done = 0
        if spalten:
            sets = ", ".join(f"{c} = r.{c}" for c in spalten)
            done = (await conn.execute(f"UPDATE {tabelle} t SET {sets} FROM jsonb_populate_record(NULL::{tabelle}, %s::jsonb) r"
                                       f" WHERE {match}", (json.dumps(vorher),))).rowcount
        if not done:  # the row went since (a turn deleted it): it comes back whole, as kept
            await _wieder_einfuegen(conn, tabelle, vorher)
    await conn.execute("DELETE FROM turn_vorher WHERE user_id=%s AND character_id=%s AND turn_id = ANY(%s)",
                       (user_id, character_id, list(turn_ids)))
    return len(rows)
