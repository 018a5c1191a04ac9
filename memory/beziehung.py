"""The relationship of a pair (its `Beziehungsprofil`, seed 004): directives, character
instructions (at most three active), both sides' profiles and Nova's emotion state."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from core.beziehung import (Anweisung, AnweisungsAenderung, AnweisungsLage, AnweisungsSchritt, Beziehungsprofil,
                            Direktive, NovaEmotion, ProfilGewachsen)
from core.errors import RefusedError
from memory import erasure, vorher
from memory.woerter import inhaltswoerter, verraet

PROFILE_FIELDS: tuple[str, ...] = tuple(Beziehungsprofil.model_fields)
"""The profile's fields, in their columns' order (`core.beziehung.Beziehungsprofil`)."""


class TooManyInstructions(RefusedError, ValueError):
    """A fourth active instruction: the caller asks the human to consolidate (seed 004)."""


async def add_directive(pool: AsyncConnectionPool, user_id: str, character_id: str, text: str, *,
                        turn_id: str | None = None, schritt: str | None = None) -> int:
    """A directive; with `turn_id` and `schritt` at most once per step of a turn."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "INSERT INTO direktiven (user_id, character_id, text, turn_id, schritt) VALUES (%s,%s,%s,%s,%s)"
            " ON CONFLICT (user_id, character_id, turn_id, schritt) WHERE schritt IS NOT NULL"
            " DO UPDATE SET schritt = EXCLUDED.schritt RETURNING id",
            (user_id, character_id, text, turn_id, schritt if turn_id else None))
        return (await cur.fetchone())[0]


async def set_directive_active(pool: AsyncConnectionPool, user_id: str, character_id: str, directive_id: int,
                               aktiv: bool, *, turn_id: str | None = None) -> bool:
    """With `turn_id`: the directive as it was is kept for taking the turn back."""
    async with pool.connection() as conn:
        async with conn.transaction():
            await vorher.festhalten(conn, user_id, character_id, turn_id, "direktiven",
                                    "t.id=%s AND t.user_id=%s AND t.character_id=%s",
                                    (directive_id, user_id, character_id), ("aktiv",))
            cur = await conn.execute("UPDATE direktiven SET aktiv=%s WHERE id=%s AND user_id=%s AND character_id=%s",
                                     (aktiv, directive_id, user_id, character_id))
            return cur.rowcount == 1


async def directives(pool: AsyncConnectionPool, user_id: str, character_id: str) -> list[Direktive]:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT id, text FROM direktiven WHERE user_id=%s AND character_id=%s AND aktiv"
                                 " ORDER BY id", (user_id, character_id))
        return [Direktive(id=r[0], text=r[1]) for r in await cur.fetchall()]


async def add_instruction(pool: AsyncConnectionPool, user_id: str, character_id: str, text: str,
                          max_active: int = 3, *, turn_id: str | None = None, schritt: str | None = None) -> int:
    """An instruction; with `turn_id` and `schritt` at most once per step of a turn (a repeat
    returns the first one's id, and is not counted against the limit)."""
    async with pool.connection() as conn:
        async with conn.transaction():
            # serialise per pair so two concurrent adds cannot both pass the count
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"anweisung:{user_id}:{character_id}",))
            if turn_id and schritt:
                cur = await conn.execute("SELECT id FROM charakter_anweisungen WHERE user_id=%s AND character_id=%s"
                                         " AND turn_id=%s AND schritt=%s", (user_id, character_id, turn_id, schritt))
                done = await cur.fetchone()
                if done:
                    return done[0]
            cur = await conn.execute("SELECT count(*) FROM charakter_anweisungen WHERE user_id=%s AND character_id=%s"
                                     " AND aktiv", (user_id, character_id))
            if (await cur.fetchone())[0] >= max_active:
                raise TooManyInstructions(f"{max_active} instructions are active already; consolidate first")
            cur = await conn.execute("INSERT INTO charakter_anweisungen (user_id, character_id, text, turn_id, schritt)"
                                     " VALUES (%s,%s,%s,%s,%s) RETURNING id",
                                     (user_id, character_id, text, turn_id, schritt if turn_id else None))
            return (await cur.fetchone())[0]


async def deactivate_instruction(pool: AsyncConnectionPool, user_id: str, character_id: str, instruction_id: int) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute("UPDATE charakter_anweisungen SET aktiv=false WHERE id=%s AND user_id=%s"
                                 " AND character_id=%s", (instruction_id, user_id, character_id))
        return cur.rowcount == 1


async def instructions(pool: AsyncConnectionPool, user_id: str, character_id: str) -> list[Anweisung]:
    async with pool.connection() as conn:
        return await _aktive(conn, user_id, character_id)


def _anweisung_text(text: str) -> str:
    return " ".join(str(text).split())


async def _anweisungen_sperren(conn, user_id: str, character_id: str) -> None:
    """Serialise the pair's instruction changes (the same lock as `add_instruction`)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"anweisung:{user_id}:{character_id}",))


async def _aktive(conn, user_id: str, character_id: str) -> list[Anweisung]:
    cur = await conn.execute("SELECT id, text FROM charakter_anweisungen WHERE user_id=%s AND character_id=%s"
                             " AND aktiv ORDER BY id", (user_id, character_id))
    return [Anweisung(id=r[0], text=r[1]) for r in await cur.fetchall()]


async def _schritt_stand(conn, user_id: str, character_id: str, turn_id: str | None,
                         schritt: str | None) -> AnweisungsSchritt | None:
    """What a step (`turn_id`, `schritt`) changed already, as `anweisungen_aendern` answered it
    then: `erledigt` with the instructions it added and lifted, or `voll` with the one it kept
    aside; None when the step wrote nothing (or carries no key)."""
    if not (turn_id and schritt):
        return None
    cur = await conn.execute(
        "SELECT id, text, vorgemerkt FROM charakter_anweisungen WHERE user_id=%s AND character_id=%s"
        " AND turn_id=%s AND split_part(schritt, '#', 1)=%s ORDER BY id", (user_id, character_id, turn_id, schritt))
    geschrieben = await cur.fetchall()
    cur = await conn.execute(
        "SELECT id, text FROM charakter_anweisungen WHERE user_id=%s AND character_id=%s"
        " AND aufgehoben_turn_id=%s AND aufgehoben_schritt=%s ORDER BY id", (user_id, character_id, turn_id, schritt))
    aufgehoben = [Anweisung(id=r[0], text=r[1]) for r in await cur.fetchall()]
    neu = [Anweisung(id=r[0], text=r[1]) for r in geschrieben if not r[2]]
    vorgemerkt = next((Anweisung(id=r[0], text=r[1]) for r in geschrieben if r[2]), None)
    if neu or aufgehoben:
        return AnweisungsSchritt(status="erledigt", neu=neu, aufgehoben=aufgehoben)
    if vorgemerkt:
        return AnweisungsSchritt(status="voll", vorgemerkt=vorgemerkt)
    return None


async def anweisungen_lage(pool: AsyncConnectionPool, user_id: str, character_id: str, vormerk_frist_s: int = 3600,
                           *, turn_id: str | None = None, schritt: str | None = None) -> AnweisungsLage:
    """What the character agent decides on: the pair's active instructions (`aktiv`, oldest
    first), the instruction kept aside at the limit that still waits for the human's answer
    (`vorgemerkt`: kept within the last `vormerk_frist_s` seconds, else None), and what the step
    (`turn_id`, `schritt`) changed already (`schritt`, see `_schritt_stand`; None: nothing)."""
    async with pool.connection() as conn:
        aktiv = await _aktive(conn, user_id, character_id)
        cur = await conn.execute(
            "SELECT id, text FROM charakter_anweisungen WHERE user_id=%s AND character_id=%s AND vorgemerkt_offen"
            " AND created_at > now() - make_interval(secs => %s) ORDER BY id DESC LIMIT 1",
            (user_id, character_id, max(0, int(vormerk_frist_s))))
        r = await cur.fetchone()
        stand = await _schritt_stand(conn, user_id, character_id, turn_id, schritt)
    return AnweisungsLage(aktiv=aktiv, vorgemerkt=Anweisung(id=r[0], text=r[1]) if r else None, schritt=stand)


async def _vormerkung_zu(conn, user_id: str, character_id: str, turn_id: str | None) -> None:
    """No kept-aside instruction of the pair waits any more (the rows as they were kept for the turn)."""
    where = "t.user_id=%s AND t.character_id=%s AND t.vorgemerkt_offen"
    await vorher.festhalten(conn, user_id, character_id, turn_id, "charakter_anweisungen", where,
                            (user_id, character_id), ("vorgemerkt_offen",))
    await conn.execute("UPDATE charakter_anweisungen SET vorgemerkt_offen=false WHERE user_id=%s"
                       " AND character_id=%s AND vorgemerkt_offen", (user_id, character_id))


def _neue_texte(neu: Sequence[str], bleiben: list[Anweisung]) -> list[str]:
    """The texts of `neu` to add: each once, none that is active already (`_gleich`)."""
    texte: list[str] = []
    for t in map(_anweisung_text, neu):
        if t and not any(_gleich(t, x.text) for x in bleiben) and not any(_gleich(t, x) for x in texte):
            texte.append(t)
    return texte


async def _vormerken(conn, user_id: str, character_id: str, text: str, key: tuple[str | None, str | None]
                     ) -> Anweisung:
    """The instruction kept aside, inactive, as the pair's one waiting for the consolidation
    answer (an older one stops waiting)."""
    await _vormerkung_zu(conn, user_id, character_id, key[0])
    cur = await conn.execute(
        "INSERT INTO charakter_anweisungen (user_id, character_id, text, aktiv, vorgemerkt,"
        " vorgemerkt_offen, turn_id, schritt) VALUES (%s,%s,%s,false,true,true,%s,%s) RETURNING id",
        (user_id, character_id, text, *key))
    return Anweisung(id=(await cur.fetchone())[0], text=text)


async def _aufheben(conn, user_id: str, character_id: str, ids: set[int],
                    key: tuple[str | None, str | None]) -> None:
    """The instructions `ids` inactive, marked with the step `key` that lifted them."""
    await conn.execute(
        "UPDATE charakter_anweisungen SET aktiv=false, aufgehoben_turn_id=%s, aufgehoben_schritt=%s"
        " WHERE user_id=%s AND character_id=%s AND id = ANY(%s)",
        (*key, user_id, character_id, sorted(ids)))


async def _hinzufuegen(conn, user_id: str, character_id: str, texte: list[str],
                       key: tuple[str | None, str | None]) -> list[Anweisung]:
    """The texts as active instructions; the step's second and later ones as `schritt#2`, …"""
    dazu = []
    for i, t in enumerate(texte):
        schritt_i = key[1] if i == 0 or key[1] is None else f"{key[1]}#{i + 1}"
        cur = await conn.execute("INSERT INTO charakter_anweisungen (user_id, character_id, text, turn_id,"
                                 " schritt) VALUES (%s,%s,%s,%s,%s) RETURNING id",
                                 (user_id, character_id, t, key[0], schritt_i))
        dazu.append(Anweisung(id=(await cur.fetchone())[0], text=t))
    return dazu


async def anweisungen_aendern(pool: AsyncConnectionPool, user_id: str, character_id: str, *,
                              neu: Sequence[str] = (), aufheben: Sequence[int] = (), max_active: int = 3,
                              vormerken: bool = False, vormerkung_schliessen: bool = False,
                              turn_id: str | None = None, schritt: str | None = None) -> AnweisungsAenderung:
    """One change of the pair's instructions, in one transaction under the pair's lock: lift the
    active instructions `aufheben`, then add the texts `neu` — add, lift, replace (one lifted,
    one added) and merge (several lifted, one added) are the same operation. A new text that is
    active already (the same sentence, `_gleich`) is not added twice.

    Returns an `AnweisungsAenderung`: `aktiv` is the pair's active instructions afterwards, `neu`
    and `aufgehoben` the instructions added and lifted. The status:
    - `erledigt`: lifted and added;
    - `voll`: the change would leave more than `max_active` active — nothing changed; with
      `vormerken`, a single new text (nothing lifted) is kept aside, inactive, as the pair's one
      instruction waiting for the consolidation answer (`vorgemerkt`; an older one stops waiting);
    - `nicht_aktiv`: an instruction to lift is not active (any more) — nothing changed;
    - `vorhanden`: every new text is active already and nothing is to be lifted — nothing changed.
    `vormerkung_schliessen`: once changed, no kept-aside instruction waits any more (it was added
    now, or the human consolidated otherwise).

    With `turn_id` and `schritt` the step changes at most once: a repeat answers what the step
    did the first time (`wiederholt`: True) and changes nothing."""
    async with pool.connection() as conn:
        async with conn.transaction():
            await _anweisungen_sperren(conn, user_id, character_id)
            stand = await _schritt_stand(conn, user_id, character_id, turn_id, schritt)
            if stand is not None:
                return AnweisungsAenderung(**dict(stand), aktiv=await _aktive(conn, user_id, character_id),
                                           wiederholt=True)
            aktiv = await _aktive(conn, user_id, character_id)
            weg_ids = set(int(i) for i in aufheben)
            weg = [a for a in aktiv if a.id in weg_ids]
            if len(weg) != len(weg_ids):
                return AnweisungsAenderung(status="nicht_aktiv", aktiv=aktiv)
            bleiben = [a for a in aktiv if a.id not in weg_ids]
            texte = _neue_texte(neu, bleiben)
            if not texte and not weg:
                return AnweisungsAenderung(status="vorhanden", aktiv=aktiv)
            key = (turn_id, schritt if turn_id else None)
            if len(bleiben) + len(texte) > max_active:
                vorgemerkt = await _vormerken(conn, user_id, character_id, texte[0], key) \
                    if vormerken and len(texte) == 1 and not weg else None
                return AnweisungsAenderung(status="voll", aktiv=aktiv, vorgemerkt=vorgemerkt)
            if weg:
                await _aufheben(conn, user_id, character_id, weg_ids, key)
            dazu = await _hinzufuegen(conn, user_id, character_id, texte, key)
            if vormerkung_schliessen:
                await _vormerkung_zu(conn, user_id, character_id, turn_id)
            return AnweisungsAenderung(status="erledigt", aktiv=await _aktive(conn, user_id, character_id), neu=dazu,
                                       aufgehoben=weg)


async def set_profile(pool: AsyncConnectionPool, user_id: str, character_id: str, **fields: str) -> None:
    bad = set(fields) - set(PROFILE_FIELDS)
    if bad:
        raise ValueError(f"unknown profile fields {sorted(bad)}")
    cols = ", ".join(fields)
    vals = ", ".join(["%s"] * len(fields))
    upd = ", ".join(f"{k}=EXCLUDED.{k}" for k in fields)
    async with pool.connection() as conn, conn.transaction():
        await erasure.pruefen(conn, user_id, "a profile")
        await conn.execute(
            f"INSERT INTO pair_profiles (user_id, character_id, {cols}) VALUES (%s,%s,{vals})"
            f" ON CONFLICT (user_id, character_id) DO UPDATE SET {upd}, updated_at=now()",
            (user_id, character_id, *fields.values()))


PROFIL_SCHRITTE_MAX = 64
"""Steps (`{node}:{turn_id}`) a profile row remembers: a redelivered background job comes back
within minutes, long before 64 later steps have grown the profile."""


def _saetze(text: str) -> list[str]:
    return [x for x in text.split("\n") if x.strip()]


def _gleich(a: str, b: str) -> bool:
    """The same sentence, ignoring case, spacing and the final stop."""
    def norm(x: str) -> str:
        return " ".join(x.casefold().split()).rstrip(".!")
    return norm(a) == norm(b)


async def profil_schritt_erledigt(pool: AsyncConnectionPool, user_id: str, character_id: str, schritt: str) -> bool:
    """Whether the step (`{node}:{turn_id}`) has grown the pair's profiles already."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT %s = ANY(profil_schritte) FROM pair_profiles"
                                 " WHERE user_id=%s AND character_id=%s", (schritt, user_id, character_id))
        r = await cur.fetchone()
    return bool(r and r[0])


class Beobachtung(TypedDict):
    """A value perceived in one turn for a profile field, and the sentence it stands for once it
    recurs: at least `mindestens` times among the field's last `fenster` values."""

    wert: str
    satz: str
    """Empty: the value is counted and never becomes a sentence (it says nothing)."""
    fenster: int
    mindestens: int


def _zaehlen(zaehlung: dict[str, list[str]], beobachtet: dict[str, Beobachtung]
             ) -> tuple[dict[str, list[str]], dict[str, str], dict[str, int]]:
    """Each observation joins its field's tally (the oldest dropped beyond its window). Returns the
    new tally, the sentences of the values that recur now, and how often each value stands there."""
    zaehlung, saetze, wie_oft = dict(zaehlung), {}, {}
    for feld, b in beobachtet.items():
        werte = (list(zaehlung.get(feld, [])) + [b["wert"]])[-max(1, b["fenster"]):]
        zaehlung[feld], wie_oft[feld] = werte, werte.count(b["wert"])
        if b["satz"].strip() and wie_oft[feld] >= b["mindestens"]:
            saetze[feld] = b["satz"]
    return zaehlung, saetze, wie_oft


def _angefuegt(felder: list[str], alt_werte: tuple, saetze: dict[str, str], grenzen: dict[str, int]) -> dict[str, str]:
    """The fields a new sentence grows: it joins the last ones, the oldest dropped beyond the
    field's limit; a sentence the field holds already is not added again."""
    neu: dict[str, str] = {}
    for feld, alt in zip(felder, alt_werte):
        satz, alt = " ".join(saetze.get(feld, "").split()), _saetze(alt)
        if satz and not any(_gleich(satz, x) for x in alt):
            neu[feld] = "\n".join((alt + [satz])[-max(1, grenzen[feld]):])
    return neu


ABLOESBARE_FELDER = ("mensch_kern", "mensch_themen")
"""The person's fields whose sentences follow a supersession (praegung's `abgeloest`)."""


def _ohne_abgeloeste(felder: list[str], alt_werte: tuple, neu: dict[str, str], saetze: dict[str, str],
                     abgeloest: list[str]) -> dict[str, str]:
    """The person's fields without the sentences that repeat a superseded memory (at least two of
    its distinctive words); the step's own new sentence stays."""
    woerter = [w for w in map(inhaltswoerter, abgeloest) if w]
    out: dict[str, str] = {}
    for feld, alt in zip(felder, alt_werte):
        if feld not in ABLOESBARE_FELDER or not woerter:
            continue
        text, eigen = neu.get(feld, alt or ""), " ".join(saetze.get(feld, "").split())
        rest = "\n".join(x for x in _saetze(text) if x == eigen or not verraet(x, woerter, 2))
        if rest != "\n".join(_saetze(text)):
            out[feld] = rest
    return out


async def _profil_vorher(conn, user_id: str, character_id: str, schritt: str, neu_angelegt: bool) -> None:
    """The profile as it was before the step's turn (`{node}:{turn_id}`) grows it: kept for taking
    the turn back; a row the step made goes with it."""
    turn_id = schritt.split(":", 1)[1] if ":" in schritt else None
    if neu_angelegt and turn_id:
        await vorher.neu_angelegt(conn, user_id, character_id, turn_id, "pair_profiles",
                                  {"user_id": user_id, "character_id": character_id})
    else:
        await vorher.zeile_festhalten(conn, user_id, character_id, turn_id, "pair_profiles",
                                      {"user_id": user_id, "character_id": character_id})


async def profil_wachsen(pool: AsyncConnectionPool, user_id: str, character_id: str, schritt: str,
                         saetze: dict[str, str], grenzen: dict[str, int], *,
                         beobachtet: dict[str, Beobachtung] | None = None,
                         abgeloest: list[str] | None = None) -> ProfilGewachsen:
    """Slow growth, once per step: each field's new sentence joins its last ones, the oldest
    dropped beyond the field's limit (`grenzen`, sentences); a sentence the field holds already is
    not added again. `beobachtet` counts a value per field (`profil_zaehlung`); a value that recurs
    in its window grows the field by its sentence. The step (`{node}:{turn_id}`) is recorded with
    the profile and the tally in the same transaction, under the row's lock: a second delivery of
    the step changes nothing. Returns `neu` False for a step done already, else `neu` True, the
    fields grown (`gewachsen`) and how often each observed value stands in its tally (`wie_oft`).
    `abgeloest`: the texts of memories the step supersedes; the person's sentences that repeat one
    (`erinnerungen.verraet`) leave `ABLOESBARE_FELDER` in the step, the step's own new sentence stays
    (the before-image brings them back when the turn is taken back)."""
    beobachtet = beobachtet or {}
    bad = (set(saetze) | set(beobachtet)) - set(PROFILE_FIELDS) or (set(saetze) | set(beobachtet)) - set(grenzen) \
        or set(saetze) & set(beobachtet)
    if bad:
        raise ValueError(f"unknown profile fields, no limit given or a field both said and observed: {sorted(bad)}")
    felder = list(dict.fromkeys((*saetze, *beobachtet, *(ABLOESBARE_FELDER if abgeloest else ()))))
    async with pool.connection() as conn:
        async with conn.transaction():
            await erasure.pruefen(conn, user_id, f"the profile step {schritt}")
            cur = await conn.execute("INSERT INTO pair_profiles (user_id, character_id) VALUES (%s,%s)"
                                     " ON CONFLICT (user_id, character_id) DO NOTHING RETURNING 1", (user_id, character_id))
            neu_angelegt = await cur.fetchone() is not None
            cur = await conn.execute(f"SELECT {', '.join(('profil_schritte', 'profil_zaehlung', *felder))}"
                                     " FROM pair_profiles WHERE user_id=%s AND character_id=%s FOR UPDATE",
                                     (user_id, character_id))
            row = await cur.fetchone()
            if schritt in row[0]:
                return ProfilGewachsen(neu=False)
            await _profil_vorher(conn, user_id, character_id, schritt, neu_angelegt)
            zaehlung, wiederkehrend, wie_oft = _zaehlen(row[1] or {}, beobachtet)
            neu = _angefuegt(felder, row[2:], {**saetze, **wiederkehrend}, grenzen)
            neu.update(_ohne_abgeloeste(felder, row[2:], neu, saetze, abgeloest or []))
            sets = "".join(f"{k}=%s, " for k in neu)
            await conn.execute(f"UPDATE pair_profiles SET {sets}profil_zaehlung=%s, profil_schritte=%s,"
                               " updated_at=now() WHERE user_id=%s AND character_id=%s",
                               (*neu.values(), Jsonb(zaehlung), (list(row[0]) + [schritt])[-PROFIL_SCHRITTE_MAX:],
                                user_id, character_id))
    return ProfilGewachsen(neu=True, gewachsen=list(neu), wie_oft=wie_oft)


async def profile(pool: AsyncConnectionPool, user_id: str, character_id: str) -> Beziehungsprofil:
    """Both sides' profiles of the pair; every field "" for a pair without one."""
    async with pool.connection() as conn:
        cur = await conn.execute(f"SELECT {', '.join(PROFILE_FIELDS)} FROM pair_profiles"
                                 " WHERE user_id=%s AND character_id=%s", (user_id, character_id))
        r = await cur.fetchone()
    return Beziehungsprofil(**{k: (r[i] or "") for i, k in enumerate(PROFILE_FIELDS)} if r else {})


async def save_emotion(pool: AsyncConnectionPool, user_id: str, character_id: str, emotion: str, arousal: float,
                       vektor: str | None = None, verlauf: list[dict] | None = None) -> None:
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO nova_emotion (user_id, character_id, emotion, arousal, vektor, verlauf)"
            " VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (user_id, character_id) DO UPDATE SET emotion=EXCLUDED.emotion,"
            " arousal=EXCLUDED.arousal, vektor=EXCLUDED.vektor, verlauf=EXCLUDED.verlauf, updated_at=now()",
            (user_id, character_id, emotion, arousal, vektor, Jsonb(verlauf or [])))


async def load_emotion(pool: AsyncConnectionPool, user_id: str, character_id: str) -> NovaEmotion | None:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT emotion, arousal, vektor, verlauf FROM nova_emotion"
                                 " WHERE user_id=%s AND character_id=%s", (user_id, character_id))
        r = await cur.fetchone()
    return None if r is None else NovaEmotion(emotion=r[0], arousal=r[1], vektor=r[2], verlauf=r[3] or [])


def _ohne_saetze(text: str | None, weg) -> str:
    return "\n".join(s for s in (text or "").split("\n") if s.strip() and not weg(s))


async def saetze_vergessen(conn, user_id: str, character_id: str, felder: Sequence[str], weg) -> int:
    """Drop the profile's sentences (one a line) for which `weg(sentence)` holds, from the fields
    and from the profile's before-images (no later rewind brings one back); on the caller's
    connection, in its transaction. Returns how many sentences left the profile itself."""
    bad = set(felder) - set(PROFILE_FIELDS)
    if bad:
        raise ValueError(f"unknown profile fields: {sorted(bad)}")
    cur = await conn.execute(f"SELECT {', '.join(felder)} FROM pair_profiles WHERE user_id=%s AND character_id=%s"
                             " FOR UPDATE", (user_id, character_id))
    row = await cur.fetchone()
    if row is None:
        return 0
    neu = {f: _ohne_saetze(alt, weg) for f, alt in zip(felder, row) if alt and _ohne_saetze(alt, weg) != alt.strip()}
    weg_n = sum(len([s for s in (alt or "").split("\n") if s.strip() and weg(s)]) for alt in row)
    if neu:
        await conn.execute(f"UPDATE pair_profiles SET {''.join(f'{f}=%s, ' for f in neu)}updated_at=now()"
                           " WHERE user_id=%s AND character_id=%s", (*neu.values(), user_id, character_id))
    cur = await conn.execute("SELECT nr, vorher FROM turn_vorher WHERE user_id=%s AND character_id=%s"
                             " AND tabelle='pair_profiles' AND vorher IS NOT NULL", (user_id, character_id))
    for nr, bild in await cur.fetchall():
        geaendert = {f: _ohne_saetze(bild[f], weg) for f in felder
                     if isinstance(bild.get(f), str) and _ohne_saetze(bild[f], weg) != bild[f].strip()}
        if geaendert:
            await conn.execute("UPDATE turn_vorher SET vorher = vorher || %s WHERE nr=%s", (Jsonb(geaendert), nr))
    return weg_n
