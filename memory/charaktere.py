"""Characters as resources (the `characters` table) and their background knowledge
(`charakter_wissen`, a Character Card's lorebook), which every pair of the character reads.

A character's fields are what the responder, the Verfasser and the tribunal need of it: name,
identitaet (who she is), sprechweise (how she speaks), szenario, begruessung (first message),
beispieldialog and charakter_anweisung (the instructions, seed 004's user-defined seed).
`karte_rest` keeps every Character Card field that has no place of its own, so an export gives
it back.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from core.errors import InputError
from core.bestand import Charakter, CharakterWissen, CharakterZeile
from core.state import BibliothekTreffer
from memory import wissen_schluessel
from memory.config import MemoryConfig
from memory.vectors import normalise

FIELDS = ("name", "identitaet", "sprechweise", "szenario", "begruessung", "beispieldialog", "charakter_anweisung",
          "karte_rest")
_COLUMNS = ", ".join(("character_id",) + FIELDS + ("created_at", "updated_at"))


log = logging.getLogger("novaberg.memory")


class CharacterExists(InputError, ValueError):
    """A character with that id exists already."""


KARTE_REST_MAX_TIEFE = 200
"""The deepest `karte_rest` a read gives back as it is stored; a part nested deeper comes back as its
JSON text (an answer's serialiser stops at 255 levels, and a character must stay readable)."""


def _gekappt(v: Any, tiefe: int, gekappt: list[int]) -> Any:
    """`v` with every object or list below `KARTE_REST_MAX_TIEFE` levels as its JSON text."""
    if not isinstance(v, (dict, list)):
        return v
    if tiefe >= KARTE_REST_MAX_TIEFE:
        gekappt[0] += 1
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return [_gekappt(x, tiefe + 1, gekappt) for x in v]
    return {k: _gekappt(x, tiefe + 1, gekappt) for k, x in v.items()}


def _row(r) -> dict[str, Any]:
    keys = ("character_id",) + FIELDS + ("created_at", "updated_at")
    out = dict(zip(keys, r))
    out["created_at"] = out["created_at"].isoformat()
    out["updated_at"] = out["updated_at"].isoformat()
    gekappt = [0]
    out["karte_rest"] = _gekappt(out["karte_rest"], 1, gekappt)
    if gekappt[0]:
        log.warning("character %s: %d parts of its kept card fields nest deeper than %d levels; they are read as "
                    "their JSON text (fallback charakter.karte_rest_zu_tief)",
                    out["character_id"], gekappt[0], KARTE_REST_MAX_TIEFE)
    return out


async def create(pool: AsyncConnectionPool, character_id: str, fields: dict[str, Any],
                 wissen: list[dict[str, Any]] | None = None, *, replace: bool = False) -> Charakter:
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
                    " sekundaer, selektiv, logik, ganze_woerter, reihenfolge, scan_tiefe, embedding)"
                    " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                    (character_id, w["titel"], w["inhalt"], list(w.get("schluessel") or []),
                     bool(w.get("gross_klein")), bool(w.get("immer")), bool(w.get("aktiv", True)),
                     list(w.get("sekundaer") or []), bool(w.get("selektiv")), w.get("logik") or "and_any",
                     bool(w.get("ganze_woerter")), int(w.get("reihenfolge", 100)), w.get("scan_tiefe"),
                     normalise(w["embedding"])))
    return Charakter.model_validate(_row(row))


async def get(pool: AsyncConnectionPool, character_id: str) -> Charakter | None:
    async with pool.connection() as conn:
        cur = await conn.execute(f"SELECT {_COLUMNS} FROM characters WHERE character_id=%s", (character_id,))
        r = await cur.fetchone()
    return None if r is None else Charakter.model_validate(_row(r))


async def exists(pool: AsyncConnectionPool, character_id: str) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT 1 FROM characters WHERE character_id=%s", (character_id,))
        return await cur.fetchone() is not None


async def list_all(pool: AsyncConnectionPool, limit: int = 500) -> list[CharakterZeile]:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT character_id, name, left(identitaet, 200), begruessung <> '',"
                                 " extract(epoch FROM created_at)::bigint FROM characters"
                                 " ORDER BY character_id LIMIT %s", (limit,))
        rows = await cur.fetchall()
    return [CharakterZeile(character_id=r[0], name=r[1], identitaet=r[2], hat_begruessung=r[3], created=r[4])
            for r in rows]


async def update(pool: AsyncConnectionPool, character_id: str, fields: dict[str, Any]) -> Charakter | None:
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
    return None if r is None else Charakter.model_validate(_row(r))


async def delete(pool: AsyncConnectionPool, character_id: str) -> bool:
    """Remove the character and its knowledge; the pairs' own memories stay (they are the users')."""
    async with pool.connection() as conn:
        cur = await conn.execute("DELETE FROM characters WHERE character_id=%s", (character_id,))
        return cur.rowcount == 1


_WISSEN_COLUMNS = ("id", "titel", "inhalt", "schluessel", "gross_klein", "immer", "aktiv", "sekundaer", "selektiv",
                   "logik", "ganze_woerter", "reihenfolge", "scan_tiefe")


def _wissen_row(r) -> dict[str, Any]:
    out = dict(zip(_WISSEN_COLUMNS, r))
    out["schluessel"], out["sekundaer"] = list(out["schluessel"]), list(out["sekundaer"])
    return out


async def wissen(pool: AsyncConnectionPool, character_id: str) -> list[CharakterWissen]:
    """The character's knowledge entries, in the order they were added (for export and review)."""
    async with pool.connection() as conn:
        cur = await conn.execute(f"SELECT {', '.join(_WISSEN_COLUMNS)} FROM charakter_wissen"
                                 " WHERE character_id=%s ORDER BY id", (character_id,))
        rows = await cur.fetchall()
    return [CharakterWissen.model_validate(_wissen_row(r)) for r in rows]


async def wissen_bestand(pool: AsyncConnectionPool, character_id: str) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM charakter_wissen WHERE character_id=%s AND aktiv",
                                 (character_id,))
        return (await cur.fetchone())[0]


def _buch_zahl(v: Any, low: int, high: int) -> int | None:
    """A number the card's book holds (`scan_depth`, `token_budget`); anything else is no setting."""
    try:
        n = int(v)
    except (TypeError, ValueError):
        return None
    return n if low <= n <= high else None


CANDIDATES = 200
"""The most entries one turn reads of a lorebook (keyed and regex candidates first)."""
_REGEX_BUDGET_S = [wissen_schluessel.REGEX_BUDGET_S]


def regex_budget_setzen(sekunden: float) -> None:
    """The time all regex keys of one turn may search together in this process (the store
    deployment sets its `lorebook_regex_budget_s` when it starts)."""
    _REGEX_BUDGET_S[0] = sekunden


async def wissen_suchen(pool: AsyncConnectionPool, character_id: str, vector, nachrichten: Sequence[str] | str | None,
                        cfg: MemoryConfig, top_k: int | None = None) -> list[BibliothekTreffer]:
    """The character's knowledge for one turn: the lorebook's activated entries (`constant`, or
    their keys in the scanned messages, memory/wissen_schluessel.py) within the token budget, in
    their placement order, then up to `top_k` further entries whose topic lies within the library
    threshold of the search vector. `nachrichten`: the newest messages, newest first (the current
    one first). Weights on the library's 0–1 scale.

    Postgres narrows the candidates (a key anywhere in the messages, a regex key, or the topic
    within the threshold) and bounds them, so a large lorebook is not read whole on every turn.
    The keys are matched in a worker thread, the regex keys within one time budget for the turn
    (`regex_budget_setzen`), so a card's slow patterns hold up neither the caller's event loop
    nor anyone else's turn."""
    if isinstance(nachrichten, str) or nachrichten is None:
        nachrichten = [nachrichten] if nachrichten else []
    k = top_k or cfg.library_top_k
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT karte_rest #>> '{character_book,scan_depth}', karte_rest #>> '{character_book,token_budget}'"
            " FROM characters WHERE character_id = %s", (character_id,))
        buch = await cur.fetchone() or (None, None)
        cur = await conn.execute(
            f"WITH w AS (SELECT {', '.join(_WISSEN_COLUMNS)}, 1 - (embedding <=> %(q)s) AS sim,"
            "   EXISTS (SELECT 1 FROM unnest(schluessel) s WHERE btrim(s) <> ''"
            "           AND (strpos(lower(%(t)s), lower(btrim(s))) > 0 OR btrim(s) ~ '^/.+/[gimsuy]*$')) AS kandidat"
            " FROM charakter_wissen WHERE character_id = %(c)s AND aktiv)"
            " SELECT * FROM w WHERE immer OR kandidat OR sim >= %(thr)s"
            " ORDER BY immer DESC, kandidat DESC, sim DESC, id LIMIT %(lim)s",
            {"q": normalise(vector), "t": "\n".join(nachrichten), "c": character_id,
             "thr": cfg.library_threshold, "lim": CANDIDATES})
        rows = await cur.fetchall()
    tiefe = _buch_zahl(buch[0], 0, 1000)
    budget = _buch_zahl(buch[1], 1, 1_000_000) or cfg.lorebook_token_budget
    return await asyncio.to_thread(
        _auswahl, [(_wissen_row(r[:-2]), float(r[-2])) for r in rows], list(nachrichten),
        cfg.lorebook_scan_depth if tiefe is None else tiefe, budget, k, cfg, character_id,
        wissen_schluessel.RegexBudget(_REGEX_BUDGET_S[0]))


def _auswahl(rows: list[tuple[dict[str, Any], float]], nachrichten: Sequence[str], tiefe: int, budget: int,
             k: int, cfg: MemoryConfig, character_id: str,
             zeit: wissen_schluessel.RegexBudget | None = None) -> list[dict[str, Any]]:
    """The activated entries within the budget, then the topic's nearest (not activated) ones.
    `zeit`: the turn's time for its regex keys, all entries together."""
    zeit = zeit or wissen_schluessel.RegexBudget(_REGEX_BUDGET_S[0])
    aktiv, weg, sims = [], {}, {}
    for w, sim in rows:
        e = wissen_schluessel.Eintrag(**{f: w[f] for f in wissen_schluessel.Eintrag.__dataclass_fields__})
        sims[e.id] = (w, sim)
        if e.immer or wissen_schluessel.durch_schluessel(e, nachrichten, tiefe, zeit):
            aktiv.append(e)
            weg[e.id] = "immer" if e.immer else "schluessel"
    if zeit.uebersprungen:
        log.warning("lorebook: %s: the turn's regex budget (%.2f s) is spent after %d regex keys; %d more "
                    "skipped, plain keys still matched (fallback lorebook.regex_budget)",
                    character_id, zeit.sekunden, zeit.ausgewertet, zeit.uebersprungen)
    drin, draussen = wissen_schluessel.im_budget(aktiv, budget)
    if draussen:
        log.info("lorebook: %s: %d activated entries over the token budget (%d) left out: %s",
                 character_id, len(draussen), budget, [e.id for e in draussen])
    hits = [BibliothekTreffer(id=e.id, titel=sims[e.id][0]["titel"], inhalt=e.inhalt, gewicht=1.0, weg=weg[e.id],
                              similarity=round(sims[e.id][1], 6)) for e in drin]
    gewaehlt = set(weg)
    thema = sorted(((w, sim) for w, sim in sims.values() if w["id"] not in gewaehlt and sim >= cfg.library_threshold),
                   key=lambda x: (-x[1], x[0]["id"]))[:k]
    return hits + [BibliothekTreffer(id=w["id"], titel=w["titel"], inhalt=w["inhalt"], weg="thema",
                                     gewicht=round(max(0.0, min(1.0, sim)), 6), similarity=round(sim, 6))
                   for w, sim in thema]
