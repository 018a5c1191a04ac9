"""Long-term memory (LZG): nodes with embeddings and weights, synapse edges between them.

`ausbreiten` starts at anchors and spreads activation along the edges with a decay per hop,
returning each memory with the path it was reached by ("eingefallen über …"). The anchors come from
the memory read path, `memory.lesepfad`, the one way the LZG is read.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Iterable

from psycopg_pool import AsyncConnectionPool

from core.bestand import EpisodeReceipt
from core.state import Erinnerung, ErinnerungsRahmen, Resonanz
from core.wire import Episode, knoten_text
from memory import erasure, vorher
from memory.config import MemoryConfig
from memory.vectors import normalise

_COLS = "id, inhalt, dimension, beobachter, emotion, arousal, gewicht, zuletzt, quelle, zeitpunkt, gueltig_bis"


def _row(r) -> dict[str, Any]:
    keys = ("id", "inhalt", "dimension", "beobachter", "emotion", "arousal", "gewicht", "zuletzt", "quelle",
            "zeitpunkt", "gueltig_bis")
    d = dict(zip(keys, r))
    for k in ("zuletzt", "zeitpunkt", "gueltig_bis"):
        d[k] = d[k].isoformat() if d.get(k) else None
    return d


def effective_weight(gewicht: float, zuletzt: datetime, decay_per_day: float, now: datetime | None = None) -> float:
    """Weight after the forgetting curve: gewicht × (1 − decay)^days since the last activation."""
    now = now or datetime.now(timezone.utc)
    days = max(0.0, (now - zuletzt).total_seconds() / 86400)
    return gewicht * math.pow(1 - decay_per_day, days)


async def _insert_nodes(conn, user_id: str, character_id: str, nodes: Iterable[dict[str, Any]], *,
                        umfeld: bool = True) -> list[int]:
    """Insert nodes; with `umfeld` their keyword surroundings are computed here (without: the
    caller links them `nachbar` next, which computes them)."""
    ids: list[int] = []
    for n in nodes:
        cur = await conn.execute(
            "INSERT INTO lzg_knoten (user_id, character_id, inhalt, dimension, beobachter, emotion, arousal,"
            " gewicht, embedding, quelle, zeitpunkt) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
            (user_id, character_id, n["inhalt"], n.get("dimension", "erlebnis"), n.get("beobachter", "nova"),
             n.get("emotion"), n.get("arousal"), n.get("gewicht", 1.0), normalise(n["embedding"]),
             n.get("quelle"), n.get("zeitpunkt")),
        )
        ids.append((await cur.fetchone())[0])
    if ids and umfeld:  # the keyword channel's lexemes (memory/lesepfad.py): own text and surroundings
        await conn.execute("SELECT nb_umfeld_aktualisieren(%s::bigint[])", (ids,))
    return ids


async def add_nodes(pool: AsyncConnectionPool, user_id: str, character_id: str,
                    nodes: Iterable[dict[str, Any]]) -> list[int]:
    """Insert nodes as they are (inhalt, embedding, and optional dimension, beobachter, emotion,
    arousal, gewicht, quelle, zeitpunkt), unlinked; returns their ids in order. For test fixtures
    and synthetic graphs only: what Nova remembers is written by `episode_schreiben`
    (tests/unit/test_one_write_path.py holds it)."""
    async with pool.connection() as conn:
        async with conn.transaction():
            return await _insert_nodes(conn, user_id, character_id, nodes)


async def _ids_der_quelle(conn, user_id: str, character_id: str, quelle: str) -> list[int]:
    cur = await conn.execute("SELECT id FROM lzg_knoten WHERE user_id=%s AND character_id=%s AND quelle=%s"
                             " ORDER BY id", (user_id, character_id, quelle))
    return [r[0] for r in await cur.fetchall()]


async def knoten_der_quelle(pool: AsyncConnectionPool, user_id: str, character_id: str, quelle: str) -> list[int]:
    """The ids of the pair's nodes written from one source (a turn id), in order, forgotten ones
    included: what imprinting that turn left already."""
    async with pool.connection() as conn:
        return await _ids_der_quelle(conn, user_id, character_id, quelle)


async def count_by_quelle(pool: AsyncConnectionPool, user_id: str, character_id: str,
                          dimension: str | None = None) -> dict[str, int]:
    """Per source (a turn id): how many of the pair's nodes it wrote (of one `dimension`: the
    exchange's utterances are `gespraech`), forgotten ones included."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT quelle, count(*) FROM lzg_knoten WHERE user_id=%s AND character_id=%s"
                                 " AND quelle IS NOT NULL AND (%s::text IS NULL OR dimension = %s) GROUP BY quelle",
                                 (user_id, character_id, dimension, dimension))
        return {r[0]: r[1] for r in await cur.fetchall()}


async def _synapsen(conn, edges: Iterable[tuple[int, int, float]], art: str) -> None:
    rows = []
    for a, b, w in edges:
        rows += [(a, b, w, art), (b, a, w, art)]
    if not rows:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO lzg_synapsen (von_id, nach_id, gewicht, art) VALUES (%s,%s,%s,%s)"
            " ON CONFLICT (von_id, nach_id) DO UPDATE SET gewicht = GREATEST(lzg_synapsen.gewicht, EXCLUDED.gewicht)",
            rows,
        )
        if art == "nachbar":  # a new neighbour changes the surroundings within two synapses
            ends = sorted({r[0] for r in rows})
            await cur.execute(
                "SELECT nb_umfeld_aktualisieren(ARRAY(SELECT unnest(%s::bigint[]) UNION"
                " SELECT nach_id FROM lzg_synapsen WHERE von_id = ANY(%s) AND art = 'nachbar'))", (ends, ends))


async def add_synapses(pool: AsyncConnectionPool, edges: Iterable[tuple[int, int, float]], art: str = "assoziation") -> None:
    """Undirected association: each edge is stored in both directions; a repeated edge keeps the
    stronger weight."""
    async with pool.connection() as conn:
        await _synapsen(conn, list(edges), art)


NACHBAR_GEWICHT = 0.6
"""The synapse between consecutive utterances (`nachbar`): the read path's keyword channel reads a
node's surroundings along it (memory/LESEPFAD.md)."""
HERKUNFT_GEWICHT = 0.5
"""The synapse between a distilled memory and the utterances it came from (`herkunft`)."""


async def _vorgaenger(conn, user_id: str, character_id: str, ep: Episode) -> int | None:
    """The pair's newest utterance, when it was said at most `anschluss_s` before this episode."""
    if ep.anschluss_s is None:
        return None
    cur = await conn.execute(
        "SELECT id FROM lzg_knoten WHERE user_id=%s AND character_id=%s AND aktiv AND dimension='gespraech'"
        " AND zeitpunkt IS NOT NULL AND zeitpunkt <= %s AND zeitpunkt >= %s - make_interval(secs => %s)"
        " ORDER BY zeitpunkt DESC, id DESC LIMIT 1",
        (user_id, character_id, ep.zeitpunkt, ep.zeitpunkt, ep.anschluss_s))
    row = await cur.fetchone()
    return row[0] if row else None


async def episode_schreiben(pool: AsyncConnectionPool, user_id: str, character_id: str, ep: Episode) -> EpisodeReceipt:
    """The one write of long-term memory nodes, for live turns and imports alike (memory/LESEPFAD.md,
    "One write path"): the exchange's utterances verbatim and dated (dimension `gespraech`,
    observer by speaker), consecutive ones linked `nachbar`, the first to the pair's newest
    utterance of the same session; the memories distilled from it linked to its utterances
    (`herkunft`). Once per source: under a lock on the pair and `ep.quelle`, an episode whose
    source (or one of its utterances' sources) has nodes already gets those back and nothing is
    written, so two deliveries racing past a check still write once.
    Returns what it did (`EpisodeReceipt`)."""
    quellen = sorted({ep.quelle, *(a.quelle for a in ep.aeusserungen if a.quelle)})
    async with pool.connection() as conn, conn.transaction():
        await erasure.pruefen(conn, user_id, f"the episode of {ep.quelle}")
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"lzg_quelle:{user_id}:{character_id}:{ep.quelle}",))
        cur = await conn.execute("SELECT id FROM lzg_knoten WHERE user_id=%s AND character_id=%s AND quelle = ANY(%s)"
                                 " ORDER BY id", (user_id, character_id, quellen))
        found = [r[0] for r in await cur.fetchall()]
        if found:
            return EpisodeReceipt(neu=False, ids=found, episode=[], verdichtungen=[], anschluss=None, resonanz=[])
        vorher = await _vorgaenger(conn, user_id, character_id, ep)
        verbunden = vorher is not None or len(ep.aeusserungen) > 1  # the nachbar links compute their surroundings
        gesagt = await _insert_nodes(conn, user_id, character_id, [
            {"inhalt": knoten_text(ep.zeitpunkt, ep.zeitzone, a.sprecher, a.text), "embedding": a.embedding,
             "dimension": "gespraech", "beobachter": a.beobachter, "emotion": a.emotion, "arousal": a.arousal,
             "quelle": a.quelle or ep.quelle, "zeitpunkt": ep.zeitpunkt} for a in ep.aeusserungen], umfeld=not verbunden)
        verdichtet = await _insert_nodes(conn, user_id, character_id, [
            {"inhalt": v.inhalt, "embedding": v.embedding, "dimension": v.dimension[:30], "beobachter": "nova",
             "emotion": v.emotion, "arousal": v.arousal, "quelle": ep.quelle, "zeitpunkt": ep.zeitpunkt}
            for v in ep.verdichtungen])
        kette = ([vorher] if vorher is not None else []) + gesagt
        await _synapsen(conn, [(a, b, NACHBAR_GEWICHT) for a, b in zip(kette, kette[1:])], "nachbar")
        await _synapsen(conn, [(v, g, HERKUNFT_GEWICHT) for v in verdichtet for g in gesagt], "herkunft")
        resonanz = await _eigene(conn, user_id, character_id, ep.resonanz) if verdichtet else []
        if resonanz:  # in the same transaction: a delivery cut off here leaves nothing to skip past
            await _synapsen(conn, [(v, r, ep.resonanz_gewicht) for v in verdichtet for r in resonanz], "praegung")
            await _touch(conn, resonanz, (user_id, character_id, ep.quelle))
        abgeloest = await _abloesungen(conn, user_id, character_id, ep, gesagt, verdichtet)
    return EpisodeReceipt(neu=True, ids=gesagt + verdichtet, episode=gesagt, verdichtungen=verdichtet,
                          anschluss=vorher, resonanz=resonanz, abgeloest=abgeloest)


async def _abloesungen(conn, user_id: str, character_id: str, ep: Episode, gesagt: list[int],
                       verdichtet: list[int]) -> list[int]:
    """The episode's supersession marks (`ep.abloesungen`), in its transaction: the successor is its
    first distilled memory, else the human's utterance, else its first node."""
    neu = verdichtet + [i for i, a in zip(gesagt, ep.aeusserungen) if a.beobachter == "mensch"] + gesagt
    if not ep.abloesungen or not neu:
        return []
    return [alt for alt in dict.fromkeys(ep.abloesungen) if alt not in neu
            and await _abloesen(conn, user_id, character_id, alt, neu[0], ep.quelle, ep.zeitpunkt)]


_NACHBARN_2 = """
SELECT DISTINCT x FROM (
    SELECT s1.nach_id AS x FROM lzg_synapsen s1 WHERE s1.von_id = ANY(%(ids)s) AND s1.art = 'nachbar'
    UNION
    SELECT s2.nach_id FROM lzg_synapsen s1 JOIN lzg_synapsen s2 ON s2.von_id = s1.nach_id AND s2.art = 'nachbar'
    WHERE s1.von_id = ANY(%(ids)s) AND s1.art = 'nachbar'
) n WHERE x <> ALL(%(ids)s)
"""


async def knoten_loeschen(conn, user_id: str, character_id: str, *, ids: list[int] | None = None,
                          quellen: list[str] | None = None) -> int:
    """Delete the pair's nodes (by id or by source), their synapses and postings with them, and
    bring the keyword surroundings of their neighbours up to date: a deleted node's words leave
    its neighbours' postings too, so what is forgotten or taken back is not found through the
    utterance beside it. Runs in the caller's transaction; returns how many nodes went."""
    cur = await conn.execute("SELECT id FROM lzg_knoten WHERE user_id=%s AND character_id=%s"
                             " AND (id = ANY(%s) OR quelle = ANY(%s))", (user_id, character_id, ids or [], quellen or []))
    weg = [r[0] for r in await cur.fetchall()]
    if not weg:
        return 0
    cur = await conn.execute(_NACHBARN_2, {"ids": weg})
    nachbarn = [r[0] for r in await cur.fetchall()]
    n = (await conn.execute("DELETE FROM lzg_knoten WHERE id = ANY(%s)", (weg,))).rowcount
    if nachbarn:
        await conn.execute("SELECT nb_umfeld_aktualisieren(%s::bigint[])", (nachbarn,))
    return n


async def vergessen(conn, user_id: str, character_id: str, knoten_id: int) -> bool:
    """Forget one of the pair's nodes the person names, and what is its provenance: a distilled
    memory goes with the utterances it came from, an utterance with what was distilled from it
    (`herkunft`) — a forgotten memory is not recalled through its source. False: no such node."""
    cur = await conn.execute(
        "SELECT k.id FROM lzg_knoten k WHERE k.user_id=%s AND k.character_id=%s AND k.id=%s"
        " UNION SELECT s.nach_id FROM lzg_synapsen s JOIN lzg_knoten k ON k.id = s.von_id"
        " WHERE k.user_id=%s AND k.character_id=%s AND s.von_id=%s AND s.art = 'herkunft'",
        (user_id, character_id, knoten_id, user_id, character_id, knoten_id))
    ids = [r[0] for r in await cur.fetchall()]
    if knoten_id not in ids:
        return False
    return await knoten_loeschen(conn, user_id, character_id, ids=ids) >= 1


async def has_nodes(pool: AsyncConnectionPool, user_id: str, character_id: str) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM lzg_knoten WHERE user_id=%s AND character_id=%s AND aktiv)",
            (user_id, character_id))
        return bool((await cur.fetchone())[0])


async def count_nodes(pool: AsyncConnectionPool, user_id: str, character_id: str) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM lzg_knoten WHERE user_id=%s AND character_id=%s AND aktiv",
                                 (user_id, character_id))
        return (await cur.fetchone())[0]


# the synapses to active nodes of every node within `tiefe - 1` synapses of the start: every
# frontier the spreading can reach in `tiefe` steps, in one round trip instead of one per step
_UMGEBUNG = """
WITH RECURSIVE nah(id, tiefe) AS (
    SELECT unnest(%(ids)s::bigint[]), 0
    UNION
    SELECT s.nach_id, nah.tiefe + 1 FROM nah
    JOIN lzg_synapsen s ON s.von_id = nah.id JOIN lzg_knoten k ON k.id = s.nach_id
    WHERE k.aktiv AND nah.tiefe + 1 < %(tiefe)s
)
SELECT s.von_id, s.nach_id, s.gewicht, k.emotion FROM lzg_synapsen s JOIN lzg_knoten k ON k.id = s.nach_id
WHERE s.von_id = ANY(ARRAY(SELECT DISTINCT id FROM nah)) AND k.aktiv ORDER BY s.von_id, s.nach_id
"""


async def _neighbours(conn, ids: list[int], tiefe: int) -> dict[int, list[tuple[int, float, str | None]]]:
    """The synapses to active nodes from `ids` and from every node within `tiefe - 1` synapses of
    them, by node, each node's in `nach_id` order, with the emotion of the node it leads to."""
    cur = await conn.execute(_UMGEBUNG, {"ids": ids, "tiefe": tiefe})
    out: dict[int, list[tuple[int, float, str | None]]] = {}
    for von, nach, w, emotion in await cur.fetchall():
        out.setdefault(von, []).append((nach, float(w), emotion))
    return out


SEKTOREN = ("freude", "vertrauen", "angst", "ueberraschung", "traurigkeit", "ekel", "aerger", "erwartung")
"""Plutchik's wheel, in its order (pipeline/vocab.py `SEKTOR` maps each emotion onto one of them;
tests/unit/test_lesepfad_rahmen.py keeps the two alike)."""
EMOTION_SEKTOR = {"zufriedenheit": "freude", "frustration": "aerger"}
"""The emotions that are no sector themselves, and the sector each lies in."""


def sektor(emotion: str | None) -> str | None:
    """The sector of the wheel an emotion lies in; None for one that has none (neutral, unknown)."""
    s = EMOTION_SEKTOR.get(emotion, emotion) if emotion else None
    return s if s in SEKTOREN else None


def sektor_faktor(nova_sektor: str | None, emotion: str | None, cfg: MemoryConfig) -> float:
    """How much of the activation flows into a memory of `emotion` while Nova is in `nova_sektor`
    (seed 001 §3.3: the spreading read takes Nova's dominant emotion): 1 − `spreading_sector_damping`
    × the two sectors' distance on the wheel (0–4). A side without a sector (neutral, none, unknown)
    colours nothing: 1."""
    a, b = sektor(nova_sektor), sektor(emotion)
    if a is None or b is None:
        return 1.0
    d = abs(SEKTOREN.index(a) - SEKTOREN.index(b))
    return 1.0 - cfg.spreading_sector_damping * min(d, len(SEKTOREN) - d)


async def ausbreiten(conn, anchors: list[tuple[int, float]], cfg: MemoryConfig, *, limit: int,
                     tiefe: int | None = None, cluster: str | None = None,
                     nova_sektor: str | None = None) -> Resonanz:
    """Spreading activation along the synapses from anchors given as (id, activation), best
    first; returns at most `limit` memories, each with its path ("eingefallen über …"), spreading
    `tiefe` synapses far (default `cfg.spreading_depth`; 0: the anchors alone). Nova's sector
    colours the paths: a step into a memory whose emotion lies far from it on Plutchik's wheel
    carries less (`sektor_faktor`). The cluster (the previous turn's) chose the anchors through the
    search key (seed 001 §3.3a); with the sector it frames the result (`rahmen`, rendered with the
    memories in [GEDAECHTNIS]).
    Deterministic: the frontier is handled by activation (then id), neighbours by id; a node keeps
    its strongest path. The memory read path (memory/lesepfad.py) is its one caller."""
    reached: dict[int, dict[str, Any]] = {}
    for i, act in anchors:
        reached[i] = {"id": i, "aktivierung": act, "tiefe": 0, "pfad": [i]}
    frontier = sorted(reached.values(), key=lambda x: (-x["aktivierung"], x["id"]))[: cfg.lzg_anchor_count]
    max_depth, tiefe = 0, cfg.spreading_depth if tiefe is None else tiefe
    nbrs = await _neighbours(conn, [f["id"] for f in frontier], tiefe) if frontier and tiefe else {}
    for depth in range(1, tiefe + 1):
        if not frontier:
            break
        nxt: dict[int, dict[str, Any]] = {}
        for f in frontier:
            for nid, w, emotion in nbrs.get(f["id"], []):
                act = f["aktivierung"] * w * cfg.spreading_decay * sektor_faktor(nova_sektor, emotion, cfg)
                if act < cfg.spreading_min_activation:
                    continue
                best = reached.get(nid) or nxt.get(nid)
                if best is not None and best["aktivierung"] >= act:
                    continue
                nxt[nid] = {"id": nid, "aktivierung": act, "tiefe": depth, "pfad": f["pfad"] + [nid]}
        if nxt:
            max_depth = depth
        reached.update(nxt)
        frontier = sorted(nxt.values(), key=lambda x: (-x["aktivierung"], x["id"]))
    ranked = sorted(reached.values(), key=lambda x: (-x["aktivierung"], x["id"]))[:limit]
    ids = sorted({i for r in ranked for i in r["pfad"]})
    cur = await conn.execute(f"SELECT {_COLS} FROM lzg_knoten WHERE id = ANY(%s)", (ids,))
    nodes = {r[0]: _row(r) for r in await cur.fetchall()}
    rahmen = ErinnerungsRahmen(anker_anzahl=len(anchors), sprung_tiefe=max_depth, cluster=cluster or "paradox",
                               nova_sektor=sektor(nova_sektor))
    return Resonanz(rahmen=rahmen, erinnerungen=[_erinnerung(nodes, r, cfg) for r in ranked],
                    ids=[r["id"] for r in ranked])


def _erinnerung(nodes: dict[int, dict[str, Any]], r: dict[str, Any], cfg: MemoryConfig) -> Erinnerung:
    n = nodes[r["id"]]
    wirksam = effective_weight(n["gewicht"], datetime.fromisoformat(n["zuletzt"]), cfg.lzg_decay_per_day,
                               datetime.now(timezone.utc))
    ueber = "Anker" if r["tiefe"] == 0 else f"eingefallen über »{nodes[r['pfad'][-2]]['inhalt'][:80]}«"
    return Erinnerung(**n, aktivierung=round(r["aktivierung"], 6), tiefe=r["tiefe"], pfad=r["pfad"],
                      gewicht_wirksam=round(wirksam, 6), eingefallen_ueber=ueber)


async def _touch(conn, ids: list[int], turn: tuple[str, str, str] | None) -> None:
    if turn is not None:
        await vorher.festhalten(conn, *turn, "lzg_knoten", "t.id = ANY(%s)", (ids,), ("zuletzt",))
    await conn.execute("UPDATE lzg_knoten SET zuletzt = now() WHERE id = ANY(%s)", (ids,))


async def _eigene(conn, user_id: str, character_id: str, ids: list[int]) -> list[int]:
    """Those of `ids` that are live nodes of the pair, in the given order."""
    if not ids:
        return []
    cur = await conn.execute("SELECT id FROM lzg_knoten WHERE user_id=%s AND character_id=%s AND aktiv AND id = ANY(%s)",
                             (user_id, character_id, ids))
    da = {r[0] for r in await cur.fetchall()}
    return [i for i in dict.fromkeys(ids) if i in da]


async def touch(pool: AsyncConnectionPool, ids: list[int], *, turn: tuple[str, str, str] | None = None) -> None:
    """Activation restarts a node's forgetting curve. `turn` (user_id, character_id, turn_id): the
    curves as they were are kept for taking the turn back."""
    if ids:
        async with pool.connection() as conn, conn.transaction():
            await _touch(conn, ids, turn)


# ------------------------------------------------------------------------------------ supersession
ABLOESUNG_GEWICHT = 0.8
"""The synapse from a superseded memory to its successor (`abgeloest_durch`, one direction): the
old one, recalled, brings the current one with it."""


async def _abloesen(conn, user_id: str, character_id: str, alt_id: int, neu_id: int | None, turn_id: str | None,
                    seit: datetime) -> bool:
    """The mark in the caller's transaction: `gueltig_bis` once (an ended node keeps its first end),
    the synapse to the successor, each with its before-image for taking the turn back."""
    if neu_id is not None and int(neu_id) == int(alt_id):
        return False
    ids = [int(alt_id)] + ([int(neu_id)] if neu_id is not None else [])
    cur = await conn.execute("SELECT id, gueltig_bis FROM lzg_knoten WHERE user_id=%s AND character_id=%s AND id = ANY(%s)",
                             (user_id, character_id, ids))
    da = {r[0]: r[1] for r in await cur.fetchall()}
    if any(i not in da for i in ids):
        return False
    neu = da[int(alt_id)] is None
    if neu:
        await vorher.festhalten(conn, user_id, character_id, turn_id, "lzg_knoten", "t.id = %s", (int(alt_id),),
                                ("gueltig_bis", "abgeloest_durch"))
        await conn.execute("UPDATE lzg_knoten SET gueltig_bis = %s, abgeloest_durch = %s WHERE id = %s",
                           (seit, None if neu_id is None else int(neu_id), int(alt_id)))
    if neu_id is not None:
        await vorher.zeile_festhalten(conn, user_id, character_id, turn_id, "lzg_synapsen",
                                      {"von_id": int(alt_id), "nach_id": int(neu_id)})
        cur = await conn.execute(
            "INSERT INTO lzg_synapsen (von_id, nach_id, gewicht, art) VALUES (%s,%s,%s,'abgeloest_durch')"
            " ON CONFLICT (von_id, nach_id) DO UPDATE SET art = 'abgeloest_durch',"
            " gewicht = GREATEST(lzg_synapsen.gewicht, EXCLUDED.gewicht) WHERE lzg_synapsen.art <> 'abgeloest_durch'",
            (int(alt_id), int(neu_id), ABLOESUNG_GEWICHT))
        neu = neu or cur.rowcount > 0
    return neu


async def abloesen(conn, user_id: str, character_id: str, alt_id: int, neu_id: int | None, turn_id: str | None, *,
                   seit: datetime | None = None) -> bool:
    """Mark the pair's node `alt_id` superseded by `neu_id` (None: ended, nothing takes its place):
    `gueltig_bis` = `seit` (default now; kept when the node was ended before) and a synapse
    `abgeloest_durch` from old to new. With `turn_id` the before-images are kept, so taking the
    turn back removes the mark. `conn`: a connection (the caller's transaction: the episode's
    write) or the pool (its own transaction). Idempotent; False: nothing changed (marked already,
    or a node is not the pair's)."""
    seit = seit or datetime.now(timezone.utc)
    if isinstance(conn, AsyncConnectionPool):
        async with conn.connection() as c, c.transaction():
            return await _abloesen(c, user_id, character_id, alt_id, neu_id, turn_id, seit)
    return await _abloesen(conn, user_id, character_id, alt_id, neu_id, turn_id, seit)
