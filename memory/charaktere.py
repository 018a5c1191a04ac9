"""Characters as resources (the `characters` table) and their background knowledge
(`charakter_wissen`, a Character Card's lorebook), which every pair of the character reads.

A character's fields are what the responder, the Verfasser and the tribunal need of it: name,
identitaet (who she is), sprechweise (how she speaks), szenario, begruessung (first message),
beispieldialog and charakter_anweisung (the instructions, seed 004's user-defined seed).
`karte_rest` keeps every Character Card field that has no place of its own, so an export gives
it back.
"""
from __future__ import annotations

import re
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from core.errors import InputError
from memory.config import MemoryConfig
from memory.vectors import normalise

FIELDS = ("name", "identitaet", "sprechweise", "szenario", "begruessung", "beispieldialog", "charakter_anweisung",
          "karte_rest")
_COLUMNS = ", ".join(("character_id",) + FIELDS + ("created_at", "updated_at"))


class CharacterExists(InputError, ValueError):
    """A character with that id exists already."""


def _row(r) -> dict[str, Any]:
    keys = ("character_id",) + FIELDS + ("created_at", "updated_at")
    out = dict(zip(keys, r))
    out["created_at"] = out["created_at"].isoformat()
    out["updated_at"] = out["updated_at"].isoformat()
    return out


async def create(pool: AsyncConnectionPool, character_id: str, fields: dict[str, Any],
                 wissen: list[dict[str, Any]] | None = None, *, replace: bool = False) -> dict[str, Any]:
    """Insert a character (and its knowledge entries, each with its `embedding`) in one transaction.
    `replace`: an existing character with that id is overwritten, its knowledge replaced."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown character fields {sorted(unknown)}")
    values = {k: fields.get(k, {} if k == "karte_rest" else "") for k in FIELDS}
    values["karte_rest"] = Jsonb(values["karte_rest"])
    cols = ", ".join(FIELDS)
    marks = ", ".join(["%s"] * len(FIELDS))
    conflict = ("DO UPDATE SET " + ", ".join(f"{k}=EXCLUDED.{k}" for k in FIELDS) + ", updated_at=now()") \
        if replace else "DO NOTHING"
    async with pool.connection() as conn:
        async with conn.transaction():
            cur = await conn.execute(
                f"INSERT INTO characters (character_id, {cols}) VALUES (%s, {marks})"
                f" ON CONFLICT (character_id) {conflict} RETURNING {_COLUMNS}",
                (character_id, *values.values()))
            row = await cur.fetchone()
            if row is None:
                raise CharacterExists(character_id)
            if replace:
                await conn.execute("DELETE FROM charakter_wissen WHERE character_id=%s", (character_id,))
            for w in wissen or []:
                await conn.execute(
                    "INSERT INTO charakter_wissen (character_id, titel, inhalt, schluessel, gross_klein, immer, aktiv,"
                    " embedding) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                    (character_id, w["titel"], w["inhalt"], list(w.get("schluessel") or []),
                     bool(w.get("gross_klein")), bool(w.get("immer")), bool(w.get("aktiv", True)),
                     normalise(w["embedding"])))
    return _row(row)


async def get(pool: AsyncConnectionPool, character_id: str) -> dict[str, Any] | None:
    async with pool.connection() as conn:
        cur = await conn.execute(f"SELECT {_COLUMNS} FROM characters WHERE character_id=%s", (character_id,))
        r = await cur.fetchone()
    return None if r is None else _row(r)


async def exists(pool: AsyncConnectionPool, character_id: str) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT 1 FROM characters WHERE character_id=%s", (character_id,))
        return await cur.fetchone() is not None


async def list_all(pool: AsyncConnectionPool, limit: int = 500) -> list[dict[str, Any]]:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT character_id, name, left(identitaet, 200), begruessung <> '' FROM characters"
                                 " ORDER BY character_id LIMIT %s", (limit,))
        rows = await cur.fetchall()
    return [{"character_id": r[0], "name": r[1], "identitaet": r[2], "hat_begruessung": r[3]} for r in rows]


async def update(pool: AsyncConnectionPool, character_id: str, fields: dict[str, Any]) -> dict[str, Any] | None:
    """Set the given fields; None when there is no such character."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown character fields {sorted(unknown)}")
    if not fields:
        return await get(pool, character_id)
    sets = ", ".join(f"{k}=%s" for k in fields)
    vals = [Jsonb(v) if k == "karte_rest" else v for k, v in fields.items()]
    async with pool.connection() as conn:
        cur = await conn.execute(f"UPDATE characters SET {sets}, updated_at=now() WHERE character_id=%s"
                                 f" RETURNING {_COLUMNS}", (*vals, character_id))
        r = await cur.fetchone()
    return None if r is None else _row(r)


async def delete(pool: AsyncConnectionPool, character_id: str) -> bool:
    """Remove the character and its knowledge; the pairs' own memories stay (they are the users')."""
    async with pool.connection() as conn:
        cur = await conn.execute("DELETE FROM characters WHERE character_id=%s", (character_id,))
        return cur.rowcount == 1


async def wissen(pool: AsyncConnectionPool, character_id: str) -> list[dict[str, Any]]:
    """The character's knowledge entries, in the order they were added (for export and review)."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT id, titel, inhalt, schluessel, gross_klein, immer, aktiv FROM charakter_wissen"
                                 " WHERE character_id=%s ORDER BY id", (character_id,))
        rows = await cur.fetchall()
    return [{"id": r[0], "titel": r[1], "inhalt": r[2], "schluessel": list(r[3]), "gross_klein": r[4],
             "immer": r[5], "aktiv": r[6]} for r in rows]


async def wissen_bestand(pool: AsyncConnectionPool, character_id: str) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM charakter_wissen WHERE character_id=%s AND aktiv",
                                 (character_id,))
        return (await cur.fetchone())[0]


def schluessel_trifft(schluessel: list[str], text: str, gross_klein: bool) -> bool:
    """A key matches as a whole word (or phrase) of the text; case-insensitive unless the entry says so."""
    flags = 0 if gross_klein else re.IGNORECASE
    return any(k.strip() and re.search(rf"(?<!\w){re.escape(k.strip())}(?!\w)", text, flags) for k in schluessel)


async def wissen_suchen(pool: AsyncConnectionPool, character_id: str, vector, text: str | None, cfg: MemoryConfig,
                        top_k: int | None = None) -> list[dict[str, Any]]:
    """The character's knowledge for one turn, best first: entries marked `immer`, entries one of
    whose keys occurs in the text as a word (the card's own trigger), then entries whose topic lies
    within the library threshold of the search vector. Weights on the library's 0–1 scale.

    Postgres narrows the candidates (a key anywhere in the text, or the topic within the threshold)
    and bounds them, so a large lorebook is not read whole on every turn."""
    k = top_k or cfg.library_top_k
    q = normalise(vector)
    async with pool.connection() as conn:
        cur = await conn.execute(
            "WITH w AS (SELECT id, titel, inhalt, schluessel, gross_klein, immer, 1 - (embedding <=> %(q)s) AS sim,"
            "   EXISTS (SELECT 1 FROM unnest(schluessel) s WHERE btrim(s) <> ''"
            "           AND strpos(lower(%(t)s), lower(btrim(s))) > 0) AS kandidat"
            " FROM charakter_wissen WHERE character_id = %(c)s AND aktiv)"
            " SELECT id, titel, inhalt, schluessel, gross_klein, immer, sim FROM w"
            " WHERE immer OR kandidat OR sim >= %(thr)s"
            " ORDER BY immer DESC, kandidat DESC, sim DESC, id LIMIT %(lim)s",
            {"q": q, "t": text or "", "c": character_id, "thr": cfg.library_threshold, "lim": k * 4})
        rows = await cur.fetchall()
    hits = []
    for r in rows:
        sim = float(r[6])
        if r[5]:
            weg, gewicht = "immer", 1.0
        elif text and schluessel_trifft(list(r[3]), text, r[4]):
            weg, gewicht = "schluessel", 1.0
        elif sim >= cfg.library_threshold:
            weg, gewicht = "thema", max(0.0, min(1.0, sim))
        else:
            continue
        hits.append({"id": r[0], "titel": r[1], "inhalt": r[2], "gewicht": round(gewicht, 6), "weg": weg,
                     "similarity": round(sim, 6)})
    hits.sort(key=lambda h: (-h["gewicht"], -h["similarity"], h["id"]))
    return hits[:k]
