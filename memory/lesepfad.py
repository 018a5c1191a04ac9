"""The memory read path: what Nova recalls for a question — the one way long-term memory is read.

The enricher, the Thinker's `memory_search`, the pixie, `novaberg memory search` and
`bench.locomo_recall` all call `erinnern` with the pair's `MemoryConfig`; a test fails if anything
else reads the LZG another way (tests/stores/test_lesepfad.py).

Two channels over all of the pair's active nodes, each put on one scale (z-score over the pair's
nodes) and added:
- dense: the cosine of the node's embedding to the question's vector (exact, no ivfflat: seed 001
  §3.3);
- keyword: BM25 of the question's lexemes against the node's surroundings (its own text and the
  nodes within two `nachbar` synapses — the turns around it), stemmed English and German with the
  stop words of both dropped (migration 0011).
The best `lesepfad_k` are the anchors; from the strongest of them activation spreads along the
synapses (seed 001 §3.3, `lzg.ausbreiten`), each memory with its path. At most `lesepfad_k`
memories come back, best first. The levers measured for this path are in memory/LESEPFAD.md.
"""
from __future__ import annotations

import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool

from core.state import Erinnerung, ErinnerungsRahmen, Resonanz
from memory import lzg
from memory.config import MemoryConfig
from memory.lesart import GEGENWART, lesart
from memory.vectors import normalise

log = logging.getLogger("novaberg.lesepfad")

# one round trip: the question's lexemes, BM25 of the surroundings, cosine of every active node, both
# z-scored over the pair (a question without lexemes scores 0 on the keyword channel for every node,
# whose z-score is then 0: the dense channel alone decides)
_FUSION = """
WITH alle AS MATERIALIZED (
    SELECT id, 1 - (embedding <=> %(q)s) AS cos, umfeld_laenge AS dl
    FROM lzg_knoten WHERE user_id = %(u)s AND character_id = %(c)s AND aktiv
), stat AS MATERIALIZED (
    SELECT count(*)::float8 AS n, greatest(avg(dl), 1)::float8 AS avgdl FROM alle
), frage AS MATERIALIZED (
    -- the question's lexemes and how often each occurs in it (a repeated word weighs more)
    SELECT lexeme AS lexem, cardinality(positions) AS qtf FROM unnest(nb_stichworte(%(text)s))
), post AS (
    SELECT knoten_id AS id, lexem, tf, dl FROM lzg_stichworte
    WHERE user_id = %(u)s AND character_id = %(c)s AND lexem = ANY(ARRAY(SELECT lexem FROM frage))
), df AS (
    SELECT lexem, count(*)::float8 AS df FROM post GROUP BY lexem
), bm AS (
    SELECT post.id, sum(f.qtf * ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5))
                        * post.tf * (%(k1)s + 1) / (post.tf + %(k1)s * (1 - %(b)s + %(b)s * post.dl / s.avgdl))) AS bm
    FROM post JOIN df USING (lexem) JOIN frage f USING (lexem) CROSS JOIN stat s GROUP BY post.id
), z AS (
    SELECT a.id, a.cos, coalesce(bm.bm, 0) AS bm,
           coalesce((a.cos - avg(a.cos) OVER ()) / nullif(stddev_pop(a.cos) OVER (), 0), 0) AS zd,
           coalesce((coalesce(bm.bm, 0) - avg(coalesce(bm.bm, 0)) OVER ())
                    / nullif(stddev_pop(coalesce(bm.bm, 0)) OVER (), 0), 0) AS zb
    FROM alle a LEFT JOIN bm ON bm.id = a.id
)
SELECT id, cos, bm, %(wd)s * zd + %(wb)s * zb AS score FROM z ORDER BY score DESC, id LIMIT %(n)s
"""


async def anker(conn, user_id: str, character_id: str, text: str, vector, cfg: MemoryConfig,
                n: int) -> list[dict[str, Any]]:
    """The n best nodes by the fused score, best first: {id, cosinus, stichwort, score}."""
    cur = await conn.execute(_FUSION, {
        "u": user_id, "c": character_id, "q": normalise(vector), "text": text,
        "k1": cfg.lesepfad_bm25_k1, "b": cfg.lesepfad_bm25_b, "wd": cfg.lesepfad_gewicht_dicht,
        "wb": cfg.lesepfad_gewicht_stichwort, "n": n},
        prepare=False)  # a generic plan of this query runs ~15× slower than one planned for its parameters
    return [{"id": i, "cosinus": float(c), "stichwort": float(b), "score": float(s)}
            for i, c, b, s in await cur.fetchall()]


async def erinnern(pool: AsyncConnectionPool, user_id: str, character_id: str, text: str, vector,
                   cfg: MemoryConfig, *, k: int | None = None, ausbreiten: bool = True, cluster: str | None = None,
                   nova_sektor: str | None = None, boden: bool = True) -> Resonanz:
    """What Nova recalls for `text` (its embedding `vector`): at most k (default `cfg.lesepfad_k`)
    memories best first, each with its path, channel scores and activation (the top anchor 1.0,
    the others by their share of its fused score).
    `ausbreiten=False` reads the anchors alone (the Thinker's memory_search: seed 000 §4.3).
    With `boden` (all readers but the Thinker's fact check, which takes no floor: seed 000), a read
    whose best anchor's cosine stays below `cfg.lesepfad_boden` returns nothing: the named fallback
    `cold_start` (seed 001 §3.3: "Cold Start ist bei ankerlosen Prompts die richtige Antwort";
    `rahmen.kaltstart` and `rahmen.bester_kosinus` say so)."""
    k = k or cfg.lesepfad_k
    rahmen = ErinnerungsRahmen(cluster=cluster or "paradox", nova_sektor=lzg.sektor(nova_sektor))
    async with pool.connection() as conn:
        found = await anker(conn, user_id, character_id, text, vector, cfg, k)
        if not found:
            return Resonanz(rahmen=rahmen)
        bester = max(a["cosinus"] for a in found)
        if boden and bester < cfg.lesepfad_boden:
            log.info("lesepfad: fallback cold_start: the best anchor's cosine %.3f is below the floor %.2f; "
                     "nothing is recalled (%s:%s)", bester, cfg.lesepfad_boden, user_id, character_id)
            return Resonanz(rahmen=rahmen.model_copy(update={"kaltstart": True, "bester_kosinus": round(bester, 6)}))
        top = max(found[0]["score"], 1e-9)
        anchors = [(a["id"], max(0.0, min(1.0, a["score"] / top))) for a in found]
        out = await lzg.ausbreiten(conn, anchors, cfg, limit=k, tiefe=None if ausbreiten else 0, cluster=cluster,
                                   nova_sektor=nova_sektor)
        out = await zeitfolge(conn, out, cfg, k, frage=text)
    kanal = {a["id"]: a for a in found}
    for e in out.erinnerungen:
        a = kanal.get(e.id)
        if a:
            e.cosinus, e.stichwort, e.score = round(a["cosinus"], 6), round(a["stichwort"], 6), round(a["score"], 6)
    return out


# ------------------------------------------------------------------------------ knowledge that changes
_NACHFOLGER = """
WITH RECURSIVE kette(alt, id, schritt) AS (
    SELECT k.id, k.abgeloest_durch, 1 FROM lzg_knoten k WHERE k.id = ANY(%(ids)s) AND k.abgeloest_durch IS NOT NULL
    UNION ALL
    SELECT kette.alt, n.abgeloest_durch, kette.schritt + 1 FROM kette JOIN lzg_knoten n ON n.id = kette.id
    WHERE n.abgeloest_durch IS NOT NULL AND kette.schritt < 5
)
SELECT kette.alt, kette.schritt, n.*
FROM kette JOIN LATERAL (SELECT {cols} FROM lzg_knoten WHERE id = kette.id AND aktiv) n ON true
ORDER BY kette.alt, kette.schritt
"""
"""The successors of superseded nodes, step by step along `abgeloest_durch` (a successor since
forgotten is not there: the old node stays ended without one)."""


async def _nachfolger(conn, erinnerungen: list[Erinnerung], cfg: MemoryConfig) -> dict[int, tuple[Erinnerung, str]]:
    """Per recalled superseded memory: the current memory at the end of its chain (built as reached
    from it) and its direct successor's text."""
    alt = [e for e in erinnerungen if e.gueltig_bis]
    if not alt:
        return {}
    cur = await conn.execute(_NACHFOLGER.format(cols=lzg._COLS), {"ids": [e.id for e in alt]})
    ketten: dict[int, list[dict[str, Any]]] = {}
    for r in await cur.fetchall():
        ketten.setdefault(r[0], []).append(lzg._row(r[2:]))
    out = {}
    for e in alt:
        kette = ketten.get(e.id)
        if not kette:
            continue
        jetzt = next((n for n in kette if not n["gueltig_bis"]), kette[-1])
        nodes = {e.id: {"inhalt": e.inhalt}, jetzt["id"]: jetzt}
        r = {"id": jetzt["id"], "aktivierung": e.aktivierung, "tiefe": e.tiefe + 1,
             "pfad": [*(e.pfad or [e.id]), jetzt["id"]]}
        out[e.id] = (lzg._erinnerung(nodes, r, cfg), kette[0]["inhalt"])
    return out


def _gleichauf(a: Erinnerung, b: Erinnerung, cfg: MemoryConfig) -> bool:
    """Whether `b` (ranked after `a`) may pass it by recency: both current and dated, `b` newer and
    near-equal."""
    return (not a.gueltig_bis and not b.gueltig_bis and bool(a.zeitpunkt and b.zeitpunkt)
            and b.zeitpunkt > a.zeitpunkt and b.aktivierung >= a.aktivierung - cfg.lesepfad_gleichauf)


async def _kosinus(conn, erinnerungen: list[Erinnerung], cfg: MemoryConfig) -> dict[tuple[int, int], float]:
    """The cosines between the recalled memories that could pass one another by recency."""
    paare = {(a.id, b.id) for i, a in enumerate(erinnerungen) for b in erinnerungen[i + 1:] if _gleichauf(a, b, cfg)}
    if not paare:
        return {}
    ids = sorted({i for p in paare for i in p})
    cur = await conn.execute("SELECT a.id, b.id, 1 - (a.embedding <=> b.embedding) FROM lzg_knoten a"
                             " JOIN lzg_knoten b ON a.id <> b.id WHERE a.id = ANY(%s) AND b.id = ANY(%s)", (ids, ids))
    return {(a, b): float(c) for a, b, c in await cur.fetchall() if (a, b) in paare}


async def zeitfolge(conn, out: Resonanz, cfg: MemoryConfig, k: int, frage: str | None = None) -> Resonanz:
    """The read knows time (memory/LESEPFAD.md, "Knowledge that changes"): a recalled memory that
    was superseded comes after the current one of its chain (brought in right before it when the
    read did not reach it) and carries its end and its successor (`gueltig_bis`, `nachfolger`: the
    prompt reads it as past). When the question `frage` asks about the present state
    (`memory.lesart`; no question reads as present), between two current memories of the same
    subject (`lesepfad_thema_kosinus`), near-equal (`lesepfad_gleichauf`), the newer ranks first;
    a question about a past event keeps the read's relevance order (the decision is logged as
    `zeitfolge: reading …`). At most `k`."""
    erinnerungen = list(out.erinnerungen)
    nachfolger = await _nachfolger(conn, erinnerungen, cfg)
    if (reading := lesart(frage or "")).name == GEGENWART:
        erinnerungen = await _recency(conn, erinnerungen, cfg)
    log.debug("lesepfad: zeitfolge: reading %s (%s): %s", reading.name, reading.marker or "no past marker",
              "the newer of near-equal memories of one subject first" if reading.name == GEGENWART
              else "relevance order kept")
    da = {e.id: e for e in erinnerungen}
    gereiht: list[Erinnerung] = []
    for e in erinnerungen:
        if e.id in {g.id for g in gereiht}:
            continue
        if e.id in nachfolger:
            jetzt, direkt = nachfolger[e.id]
            e.nachfolger = direkt
            if jetzt.id not in {g.id for g in gereiht}:
                gereiht.append(da.get(jetzt.id, jetzt))
        gereiht.append(e)
    gereiht = gereiht[:k]
    return out.model_copy(update={"erinnerungen": gereiht, "ids": [e.id for e in gereiht]})


async def _recency(conn, erinnerungen: list[Erinnerung], cfg: MemoryConfig) -> list[Erinnerung]:
    """Recency between near-equal current memories of one subject, as pairs: the newer moved right
    before the older it passes (`paarweise`)."""
    return paarweise(erinnerungen, await _kosinus(conn, erinnerungen, cfg), cfg)


def paarweise(erinnerungen: list[Erinnerung], kosinus: dict[tuple[int, int], float],
              cfg: MemoryConfig) -> list[Erinnerung]:
    """A newer memory passes at most one older memory of its subject, and an older one is passed at
    most once: the pairs (older, newer) whose cosine reaches `lesepfad_thema_kosinus` are taken most
    alike first, each memory in one pair at most, and in each the newer moves right before the
    older. A newer memory replaces one fact, the one most like it; a conversation's run of related
    turns does not carry its newest to the top past all of them (memory/LESEPFAD.md)."""
    erinnerungen = list(erinnerungen)
    da = {e.id: e for e in erinnerungen}
    paare = sorted(((c, a, b) for (a, b), c in kosinus.items() if c >= cfg.lesepfad_thema_kosinus
                    and a in da and b in da and _gleichauf(da[a], da[b], cfg)), key=lambda p: (-p[0], p[1], p[2]))
    vergeben: set[int] = set()
    for _, a, b in paare:
        if a in vergeben or b in vergeben:
            continue
        vergeben |= {a, b}
        reihe = [e.id for e in erinnerungen]
        if reihe.index(b) > reihe.index(a):
            erinnerungen.insert(reihe.index(a), erinnerungen.pop(reihe.index(b)))
    return erinnerungen
