"""What Nova remembers about a person, as the person may see it: the pair's long-term nodes, goals,
appointments, the person's notes and the sentences of the person's profile, each with where it
came from (the turn that wrote it and the message of that turn); and forgetting one of them.

An item's id names its kind and row: `knoten-{id}`, `ziel-{id}`, `termin-{id}`, `notiz-{id}`,
`profil-{field}-{sha1 of the sentence, 12 hex}`. A profile sentence's turn is found in the
profile's before-images (`turn_vorher`): the first turn after which the field holds it.
Forgetting also drops the item from the before-images, so taking a later turn back never brings
it back. What was derived from a forgotten item goes with it (`nachvergessen`, `redis_nachvergessen`):
the sentences of the pair's profile (Nova's view of the person and of herself included) and of the
session summary that share its distinctive words (`verraet`: at least `forget_shared_words` of its
content words, or all of them when it has fewer), the library entries the pixie wrote from its turn,
and the research and impulses still pending from that turn.
"""
from __future__ import annotations

import hashlib
import logging
import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from core.bestand import ErinnerungsEintrag, ErinnerungQuelle, Nachvergessen
from memory.woerter import STOPPWOERTER, inhaltswoerter, verraet  # noqa: F401 (read here and by callers)

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from redis.asyncio import Redis

log = logging.getLogger("novaberg.erinnerungen")

PROFIL_FELDER = ("mensch_kern", "mensch_beziehung", "mensch_themen")
"""The profile's fields about the person (Nova's own fields are her self-image)."""
ID = re.compile(r"^(knoten|ziel|termin|notiz)-(\d{1,18})$|^profil-(mensch_kern|mensch_beziehung|mensch_themen)-([0-9a-f]{12})$")

_ZEILEN: dict[str, str] = {
    "knoten": "SELECT 'knoten-' || k.id, CASE WHEN k.dimension = 'gespraech' THEN 'gespraech' ELSE 'erinnerung' END,"
              " k.inhalt, k.quelle, k.created_at FROM lzg_knoten k"
              " WHERE k.user_id=%(u)s AND k.character_id=%(c)s AND k.aktiv ORDER BY k.created_at DESC, k.id DESC"
              " LIMIT %(n)s",
    "ziel": "SELECT 'ziel-' || z.id, 'ziel', z.inhalt, z.quelle_turn, z.anker FROM ziele z"
            " WHERE z.user_id=%(u)s AND z.character_id=%(c)s AND z.aktiv",
    "termin": "SELECT 'termin-' || t.id, 'termin', t.titel || ' (' || to_char(t.beginn AT TIME ZONE 'UTC',"
              " 'YYYY-MM-DD HH24:MI') || ' UTC)', t.turn_id, t.created_at FROM timeline t"
              " WHERE t.user_id=%(u)s AND t.character_id=%(c)s AND t.typ='termin'",
    "notiz": "SELECT 'notiz-' || n.id, 'notiz', n.name || ': ' || n.inhalt, n.turn_id, n.created_at FROM notizen n"
             " WHERE n.user_id=%(u)s AND n.aktiv",
}


_INHALT = {
    "knoten": "SELECT inhalt FROM lzg_knoten WHERE id=%(id)s AND user_id=%(u)s AND character_id=%(c)s",
    "ziel": "SELECT inhalt FROM ziele WHERE id=%(id)s AND user_id=%(u)s AND character_id=%(c)s",
    "termin": "SELECT titel FROM timeline WHERE id=%(id)s AND user_id=%(u)s AND character_id=%(c)s AND typ='termin'",
    "notiz": "SELECT name || ': ' || inhalt FROM notizen WHERE id=%(id)s AND user_id=%(u)s",
}

ABGELEITETE_FELDER = ("nova_kern", "nova_adaptiv", "nova_beziehung", "mensch_kern", "mensch_beziehung", "mensch_themen")
"""The profile's fields of sentences (one a line) that may repeat what the person said."""

def saetze(text: str) -> list[str]:
    """A derived text's sentences (lines, and the sentences within a line)."""
    return [s for zeile in (text or "").split("\n") for s in re.split(r"(?<=[.!?])\s+", zeile) if s.strip()]


def satz_id(feld: str, satz: str) -> str:
    return f"profil-{feld}-{hashlib.sha1(satz.encode()).hexdigest()[:12]}"


def _zeilen(text: str | None) -> list[str]:
    return [x for x in (text or "").split("\n") if x.strip()]


async def _profil(conn, user_id: str, character_id: str) -> list[dict[str, Any]]:
    cur = await conn.execute(f"SELECT {', '.join(PROFIL_FELDER)} FROM pair_profiles WHERE user_id=%s"
                             " AND character_id=%s", (user_id, character_id))
    row = await cur.fetchone()
    if row is None:
        return []
    cur = await conn.execute("SELECT turn_id, vorher, created_at FROM turn_vorher WHERE user_id=%s AND character_id=%s"
                             " AND tabelle='pair_profiles' ORDER BY nr", (user_id, character_id))
    bilder = await cur.fetchall()
    out = []
    for i, feld in enumerate(PROFIL_FELDER):
        jetzt = _zeilen(row[i])
        staende = [_zeilen((v or {}).get(feld)) for _, v, _ in bilder] + [jetzt]
        for satz in jetzt:
            # the first turn after which the field holds the sentence (and has since)
            quelle = next(((bilder[j][0], bilder[j][2]) for j in range(len(bilder))
                           if satz not in staende[j] and all(satz in s for s in staende[j + 1:])), (None, None))
            out.append({"id": satz_id(feld, satz), "art": f"profil.{feld}", "inhalt": satz, "turn_id": quelle[0],
                        "seit": quelle[1]})
    return out


async def auflisten(pool: AsyncConnectionPool, user_id: str, character_id: str, q: str | None = None,
                    limit: int = 200) -> list[ErinnerungsEintrag]:
    """What Nova remembers about the person with the character, newest first, each with its turn
    and that turn's message (`aus`: None when the turn record is gone or the item came from no
    turn); `q` keeps the items whose text holds it (case-insensitive)."""
    args = {"u": user_id, "c": character_id, "n": limit if not q else 10_000}  # a search reads further
    async with pool.connection() as conn:
        items = []
        for sql in _ZEILEN.values():
            cur = await conn.execute(sql, args)
            items += [{"id": r[0], "art": r[1], "inhalt": r[2], "turn_id": r[3], "seit": r[4]}
                      for r in await cur.fetchall()]
        items += await _profil(conn, user_id, character_id)
        if q:
            items = [i for i in items if q.casefold() in i["inhalt"].casefold()]
        items.sort(key=lambda i: (i["seit"] is not None, i["seit"] or 0), reverse=True)
        items = items[:limit]
        await _abgeloest(conn, items)
        turn_ids = sorted({i["turn_id"] for i in items if i["turn_id"]})
        cur = await conn.execute("SELECT turn_id, user_text, created_at FROM turns WHERE user_id=%s AND character_id=%s"
                                 " AND turn_id = ANY(%s)", (user_id, character_id, turn_ids))
        turns = {r[0]: {"text": r[1], "time": r[2].isoformat()} for r in await cur.fetchall()}
    for i in items:
        i["aus"] = turns.get(i["turn_id"]) if i["turn_id"] else None
        i["seit"] = i["seit"].isoformat() if i["seit"] is not None else None
    return [ErinnerungsEintrag.model_validate(i) for i in items]


async def _abgeloest(conn, items: list[dict[str, Any]]) -> None:
    """The long-term items that no longer hold get their end and their successor (`abgeloest`); one
    whose successor was forgotten stays ended and says so (`nachfolger_vergessen`)."""
    ids = [int(i["id"][len("knoten-"):]) for i in items if i["id"].startswith("knoten-")]
    if not ids:
        return
    cur = await conn.execute("SELECT k.id, k.gueltig_bis, k.abgeloest_durch, n.id, n.inhalt FROM lzg_knoten k"
                             " LEFT JOIN lzg_knoten n ON n.id = k.abgeloest_durch AND n.aktiv"
                             " WHERE k.id = ANY(%s) AND k.gueltig_bis IS NOT NULL", (ids,))
    ende = {f"knoten-{r[0]}": {"seit": r[1].isoformat(), "durch": f"knoten-{r[3]}" if r[3] else None,
                               "inhalt": r[4], "nachfolger_vergessen": r[2] is not None and r[3] is None}
            for r in await cur.fetchall()}
    for i in items:
        if i["id"] in ende:
            i["abgeloest"] = ende[i["id"]]


_VERGESSEN = {
    "knoten": ("lzg_knoten", None),  # lzg.vergessen: the node with its provenance
    "ziel": ("ziele", "DELETE FROM ziele WHERE id=%(id)s AND user_id=%(u)s AND character_id=%(c)s"),
    "termin": ("timeline", "DELETE FROM timeline WHERE id=%(id)s AND user_id=%(u)s AND character_id=%(c)s"
                           " AND typ='termin'"),
    "notiz": ("notizen", "DELETE FROM notizen WHERE id=%(id)s AND user_id=%(u)s"),
}
"""A row forgotten, with what hangs on it (a node's synapses and postings by `ON DELETE CASCADE`)."""


_HERKUNFT = {
    "knoten": "SELECT quelle FROM lzg_knoten WHERE id=%(id)s AND user_id=%(u)s AND character_id=%(c)s",
    "ziel": "SELECT quelle_turn FROM ziele WHERE id=%(id)s AND user_id=%(u)s AND character_id=%(c)s",
    "termin": "SELECT turn_id FROM timeline WHERE id=%(id)s AND user_id=%(u)s AND character_id=%(c)s",
    "notiz": "SELECT turn_id FROM notizen WHERE id=%(id)s AND user_id=%(u)s",
}


def kurzzeit(eintraege: list[dict[str, Any]], q: str | None = None) -> list[ErinnerungsEintrag]:
    """The short-term memory's entries (memory/kzg.py, newest first) as items of the memory view:
    `kzg-{entry id}`, with the turn they came from."""
    out = []
    for e in eintraege:
        if q and q.casefold() not in (e.get("inhalt") or "").casefold():
            continue
        seit = datetime.fromtimestamp(e["time"], timezone.utc).isoformat() if e.get("time") else None
        ende = {"seit": datetime.fromtimestamp(e["abgeloest_seit"], timezone.utc).isoformat(), "durch": None,
                "inhalt": e.get("nachfolger")} if e.get("abgeloest_seit") else None
        out.append(ErinnerungsEintrag(id=f"kzg-{e['id']}", art="kurzzeit", inhalt=e.get("inhalt") or "",
                              turn_id=e.get("quelle"), seit=seit, aus=None, abgeloest=ende))
    return out


async def vergessen(pool: AsyncConnectionPool, user_id: str, character_id: str, item_id: str) -> bool:
    """Forget one item (an id `auflisten` gave) and drop it from the before-images, in one
    transaction. False: no such item of the pair (an id of another kind raises ValueError)."""
    from memory import lzg

    m = ID.match(item_id)
    if m is None:
        raise ValueError(f"not a memory id: {item_id!r}")
    async with pool.connection() as conn, conn.transaction():
        if m.group(1):
            tabelle, sql = _VERGESSEN[m.group(1)]
            row_id = int(m.group(2))
            if m.group(1) == "knoten":  # with what it came from or what came from it; neighbours forget its words
                done = await lzg.vergessen(conn, user_id, character_id, row_id)
            else:
                done = (await conn.execute(sql, {"id": row_id, "u": user_id, "c": character_id})).rowcount == 1
            if done:
                await conn.execute("DELETE FROM turn_vorher WHERE user_id=%s AND tabelle=%s AND schluessel->>'id' = %s",
                                   (user_id, tabelle, str(row_id)))
            return done
        return await _satz_vergessen(conn, user_id, character_id, m.group(3), m.group(4))


def _ohne(text: str | None, feld: str, hash12: str) -> str:
    return "\n".join(s for s in _zeilen(text) if satz_id(feld, s) != f"profil-{feld}-{hash12}")


async def _satz_vergessen(conn, user_id: str, character_id: str, feld: str, hash12: str) -> bool:
    cur = await conn.execute(f"SELECT {feld} FROM pair_profiles WHERE user_id=%s AND character_id=%s FOR UPDATE",
                             (user_id, character_id))
    row = await cur.fetchone()
    if row is None or _ohne(row[0], feld, hash12) == "\n".join(_zeilen(row[0])):
        return False
    await conn.execute(f"UPDATE pair_profiles SET {feld}=%s, updated_at=now() WHERE user_id=%s AND character_id=%s",
                       (_ohne(row[0], feld, hash12), user_id, character_id))
    cur = await conn.execute("SELECT nr, vorher FROM turn_vorher WHERE user_id=%s AND character_id=%s"
                             " AND tabelle='pair_profiles' AND vorher IS NOT NULL", (user_id, character_id))
    for nr, vorher in await cur.fetchall():
        if feld in vorher:
            await conn.execute("UPDATE turn_vorher SET vorher = jsonb_set(vorher, %s, to_jsonb(%s::text)) WHERE nr=%s",
                               ([feld], _ohne(vorher[feld], feld, hash12), nr))
    return True


async def beschreiben(pool: AsyncConnectionPool, user_id: str, character_id: str,
                      item_id: str) -> ErinnerungQuelle | None:
    """An item's text and the turn it came from ({inhalt, turn_id}), read before it is forgotten
    (what was derived from it is found by its words and its turn); None: no such item."""
    m = ID.match(item_id)
    if m is None:
        raise ValueError(f"not a memory id: {item_id!r}")
    async with pool.connection() as conn:
        if not m.group(1):
            return next((ErinnerungQuelle(inhalt=i["inhalt"], turn_id=None)
                         for i in await _profil(conn, user_id, character_id)
                         if i["id"] == item_id), None)
        args = {"id": int(m.group(2)), "u": user_id, "c": character_id}
        row = await (await conn.execute(_INHALT[m.group(1)], args)).fetchone()
        if row is None:
            return None
        quelle = await (await conn.execute(_HERKUNFT[m.group(1)], args)).fetchone()
    return ErinnerungQuelle(inhalt=row[0] or "", turn_id=quelle[0] if quelle and quelle[0] else None)


async def nachvergessen(pool: AsyncConnectionPool, user_id: str, character_id: str, texte: list[str],
                        turn_ids: list[str], mindestens: int = 2) -> Nachvergessen:
    """What Postgres derived from forgotten items, in one transaction: the profile's sentences that
    repeat one of `texte` (`verraet`), in the profile and its before-images, and the library's
    entries the pixie wrote from one of `turn_ids`. Returns what went, by kind."""
    from memory import beziehung, bibliothek

    woerter = [w for w in (inhaltswoerter(t) for t in texte) if w]
    async with pool.connection() as conn, conn.transaction():
        profil = await beziehung.saetze_vergessen(conn, user_id, character_id, ABGELEITETE_FELDER,
                                                  lambda s: verraet(s, woerter, mindestens)) if woerter else 0
        wissen = await bibliothek.aus_turns_loeschen(conn, user_id, character_id, turn_ids)
        verlauf = await _turns_vergessen(conn, user_id, character_id, woerter,
                                         lambda s: verraet(s, woerter, mindestens)) if woerter else 0
    if profil:
        log.info("vergessen.profil_saetze: %d sentences of %s:%s's profile repeated a forgotten item",
                 profil, user_id, character_id)
    if wissen:
        log.info("vergessen.bibliothek: %d library entries of %s:%s came from a forgotten turn",
                 wissen, user_id, character_id)
    return Nachvergessen(profil_saetze=profil, bibliothek=wissen, turn_saetze=verlauf)


async def _turns_vergessen(conn, user_id: str, character_id: str, woerter: list[frozenset[str]], weg) -> int:
    """The turn records (the human's message, the reply; a session lost in Redis is rebuilt from
    them) without their sentences that repeat a forgotten item; only records that hold one of its
    words are read. Returns the sentences dropped."""
    from psycopg.types.json import Jsonb

    from memory import session

    muster = sorted({"%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
                     for ws in woerter for w in ws})
    cur = await conn.execute("SELECT turn_id, user_text, reply, result FROM turns WHERE user_id=%s AND character_id=%s"
                             " AND (user_text ILIKE ANY(%s) OR reply ILIKE ANY(%s)) FOR UPDATE",
                             (user_id, character_id, muster, muster))
    n = 0
    for turn_id, user_text, reply, result in await cur.fetchall():
        mensch, a = session.ohne_saetze(user_text or "", weg)
        antwort, b = session.ohne_saetze(reply or "", weg)
        if not a + b:
            continue
        n += a + b
        result = {**(result or {}), **({"reply": antwort or session.VERGESSEN_PLATZHALTER} if b else {})}
        await conn.execute("UPDATE turns SET user_text=%s, reply=%s, result=%s WHERE user_id=%s AND character_id=%s"
                           " AND turn_id=%s", (mensch or session.VERGESSEN_PLATZHALTER if a else user_text,
                                               antwort or session.VERGESSEN_PLATZHALTER if b else reply, Jsonb(result),
                                               user_id, character_id, turn_id))
    if n:
        log.info("vergessen.turn_saetze: %d sentences of %s:%s's turn records repeated a forgotten item",
                 n, user_id, character_id)
    return n


async def redis_nachvergessen(r: Redis, user_id: str, character_id: str, texte: list[str], turn_ids: list[str],
                              mindestens: int = 2) -> dict[str, int]:
    """What Redis holds derived from forgotten items: the session summary's sentences that repeat
    one of `texte` (in the summary and its before-images), the research still queued or under way
    from one of `turn_ids` and the impulses planned from them, and the text of a successor from one
    of `turn_ids` that short-term entries it superseded carry. Returns what went, by kind (the
    successor's text is logged, not counted)."""
    from memory import kzg, ruecknahme, session

    woerter = [w for w in (inhaltswoerter(t) for t in texte) if w]
    ids = {t for t in turn_ids if t}
    out = {"zusammenfassung_saetze": 0, "verlauf_saetze": 0, "recherchen": 0, "impulse": 0}
    if woerter:
        out["zusammenfassung_saetze"] = await session.zusammenfassung_vergessen(
            r, user_id, character_id, lambda s: verraet(s, woerter, mindestens))
        out["verlauf_saetze"] = await session.verlauf_vergessen(
            r, user_id, character_id, lambda s: verraet(s, woerter, mindestens))
    if ids:
        out["recherchen"] = await ruecknahme._liste(r, f"delegationen:{user_id}:{character_id}", ids, "turn_id") \
            + await ruecknahme._liste(r, f"delegationen_in_arbeit:{user_id}:{character_id}", ids, "turn_id")
        out["impulse"] = await ruecknahme._impulse(r, user_id, character_id, ids)
        if n := await kzg.nachfolger_vergessen(r, user_id, character_id, sorted(ids)):
            log.info("vergessen.kzg_nachfolger: %d short-term entries of %s:%s keep their end, not the forgotten "
                     "successor's text", n, user_id, character_id)
    if out["recherchen"] or out["impulse"]:
        log.info("vergessen.recherche_verworfen: %d pending research tasks and %d planned impulses of %s:%s came "
                 "from a forgotten turn", out["recherchen"], out["impulse"], user_id, character_id)
    return out
