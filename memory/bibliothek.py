"""Nova's library (`autonomous_wissen` + topic vectors), written by the pixie, read by the enricher.

Types `wissen` and `bericht`; the reading path returns only `wissen` (seed 001: `Bibliothek=ja`
once announced reports that the read path can never return), threshold 0.50, top_k 3, weights
divided by the cap (10.0) onto 0–1.
"""
from __future__ import annotations


from psycopg_pool import AsyncConnectionPool

from core.bestand import BibliothekBestand, BibliothekEintrag, BibliothekZerfall
from core.state import BibliothekTreffer
from memory import erasure
from memory.config import MemoryConfig
from memory.vectors import normalise


async def add(pool: AsyncConnectionPool, user_id: str, character_id: str, typ: str, titel: str, inhalt: str,
              thema_embedding, gewicht: float = 1.0, *, schluessel: str | None = None) -> int:
    """A library entry and its topic vector. With `schluessel` (the pixie's idempotency key of a
    delegation and type) at most once: a second write with the same key returns the first entry's
    id and changes nothing."""
    async with pool.connection() as conn:
        async with conn.transaction():
            await erasure.pruefen(conn, user_id, f"a library entry ({typ})")
            cur = await conn.execute(
                "INSERT INTO autonomous_wissen (user_id, character_id, typ, titel, inhalt, gewicht, schluessel)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s)"
                " ON CONFLICT (user_id, character_id, schluessel) WHERE schluessel IS NOT NULL DO NOTHING"
                " RETURNING id", (user_id, character_id, typ, titel, inhalt, gewicht, schluessel))
            row = await cur.fetchone()
            if row is None:
                cur = await conn.execute(
                    "SELECT id FROM autonomous_wissen WHERE user_id=%s AND character_id=%s AND schluessel=%s",
                    (user_id, character_id, schluessel))
                return (await cur.fetchone())[0]
            wid = row[0]
            if thema_embedding is not None:
                await conn.execute("INSERT INTO autonomous_wissen_thema (wissen_id, embedding) VALUES (%s,%s)",
                                   (wid, normalise(thema_embedding)))
    return wid


async def vorhanden(pool: AsyncConnectionPool, user_id: str, character_id: str, schluessel: str) -> bool:
    """Whether an entry with this idempotency key exists (active or not)."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM autonomous_wissen WHERE user_id=%s AND character_id=%s AND schluessel=%s)",
            (user_id, character_id, schluessel))
        return (await cur.fetchone())[0]


async def eintraege(pool: AsyncConnectionPool, user_id: str, character_id: str) -> list[BibliothekEintrag]:
    """Every entry of the pair, both types, oldest first (inspection, dashboard, tests)."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, typ, titel, inhalt, gewicht, aktiv, schluessel FROM autonomous_wissen"
            " WHERE user_id=%s AND character_id=%s ORDER BY id", (user_id, character_id))
        rows = await cur.fetchall()
    return [BibliothekEintrag(id=r[0], typ=r[1], titel=r[2], inhalt=r[3], gewicht=r[4], aktiv=r[5], schluessel=r[6])
            for r in rows]


async def bestand(pool: AsyncConnectionPool, user_id: str, character_id: str) -> BibliothekBestand:
    """What the reading path can reach (`wissen` with a topic vector) next to everything active, and
    the character's own background knowledge (`charakter_wissen`, shared by all its pairs)."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE w.typ = 'wissen' AND t.wissen_id IS NOT NULL), count(*)"
            " FROM autonomous_wissen w LEFT JOIN autonomous_wissen_thema t ON t.wissen_id = w.id"
            " WHERE w.user_id=%s AND w.character_id=%s AND w.aktiv", (user_id, character_id))
        lesbar, alle = await cur.fetchone()
        cur = await conn.execute("SELECT count(*) FROM charakter_wissen WHERE character_id=%s AND aktiv",
                                 (character_id,))
        charakter = (await cur.fetchone())[0]
    return BibliothekBestand(lesbar=lesbar, aktiv=alle, charakter=charakter)


async def suchen(pool: AsyncConnectionPool, user_id: str, character_id: str, vector, cfg: MemoryConfig,
                 top_k: int | None = None) -> list[BibliothekTreffer]:
    q = normalise(vector)
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT w.id, w.titel, w.inhalt, w.gewicht, 1 - (t.embedding <=> %s) AS sim"
            " FROM autonomous_wissen w JOIN autonomous_wissen_thema t ON t.wissen_id = w.id"
            " WHERE w.user_id=%s AND w.character_id=%s AND w.aktiv AND w.typ = 'wissen'"
            "   AND 1 - (t.embedding <=> %s) >= %s"
            " ORDER BY t.embedding <=> %s, w.id LIMIT %s",
            (q, user_id, character_id, q, cfg.library_threshold, q, top_k or cfg.library_top_k))
        rows = await cur.fetchall()
    return [BibliothekTreffer(id=r[0], titel=r[1], inhalt=r[2], similarity=round(float(r[4]), 6),
                              gewicht=round(min(max(r[3] / cfg.library_weight_cap, 0.0), 1.0), 6)) for r in rows]


ZERFALL_SCHRITT_TAGE = 1.0
"""The library's weights are decayed once their last decay is a day old (the exponent is exact, so
the step changes no value, only how often a row is written: once a day, not every round)."""

_ZERFALL = """
UPDATE autonomous_wissen SET
    gewicht = LEAST(%(cap)s, gewicht * power(1 - %(rate)s, extract(epoch FROM now() - zerfall_stand) / 86400.0)),
    zerfall_stand = now()
WHERE aktiv AND zerfall_stand <= now() - make_interval(secs => %(schritt_s)s)
RETURNING gewicht
"""


async def zerfall(pool: AsyncConnectionPool, cfg: MemoryConfig,
                  schritt_tage: float = ZERFALL_SCHRITT_TAGE) -> BibliothekZerfall:
    """`gewicht_decay` (seed 001 §3.2a): the library's weights on the LZG nodes' forgetting curve,
    gewicht × (1 − `lzg_decay_per_day`)^days since each entry's `zerfall_stand`, capped at
    `library_weight_cap` (LZG_KNOTEN_GEWICHT_CAP, 10.0), no floor. Every pair's active entries,
    both types, whose last decay is `schritt_tage` old; an inactive one catches up if it comes back.
    Returns how many decayed (`verfallen`) and the smallest weight now among them (`kleinstes`, or None)."""
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute(_ZERFALL, {"cap": cfg.library_weight_cap, "rate": cfg.lzg_decay_per_day,
                                            "schritt_s": schritt_tage * 86400})
        weights = [r[0] for r in await cur.fetchall()]
    return BibliothekZerfall(verfallen=len(weights), kleinstes=round(min(weights), 6) if weights else None)


async def aus_turns_loeschen(conn, user_id: str, character_id: str, turn_ids: list[str]) -> int:
    """Delete the pair's entries the pixie wrote from a delegation of one of the turns (their key
    `delegation:{turn}:…`, actors/delegation.py; the topic vectors go with them), on the caller's
    connection. Returns how many went."""
    ids = [t for t in turn_ids if t]
    if not ids:
        return 0
    cur = await conn.execute("DELETE FROM autonomous_wissen WHERE user_id=%s AND character_id=%s"
                             " AND schluessel LIKE 'delegation:%%' AND split_part(schluessel, ':', 2) = ANY(%s)",
                             (user_id, character_id, ids))
    return cur.rowcount
