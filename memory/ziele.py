"""Goals (`ziele`) per pair, their activation and perception gravity (seed 001 §3.3a).

The two chains hold the pair in opposite order — the human chain `(mensch, nova)`, the character
chain `(nova, mensch)` — so every reader goes through `ziel_paar_bestimmen`; using the turn pair
directly reads nothing on one of the two paths.

The goals are Nova's, one set per relationship (seed 001 §5; the decision and its words are in
`pipeline/nodes/zielbildung.py`). They are formed in the background chain from what the human
says he wants or plans, and fade on a forgetting curve per horizon: a goal whose retention fell
below `VERGESSEN_SCHWELLE` is forgotten (made inactive) when its pair's goals are read next, and
the others activate with their faded motivation. An activated medium-term goal restarts its curve
(`verstaerken`, seed 001 §5), the anchor stays; a goal the human states again restarts it too
(`wiederholung_verstaerken`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np
from typing import TYPE_CHECKING

from core.beziehung import PaarZiel, ZielEreignis, Zielbildung
from core.state import AktiviertesZiel
from memory import vorher
from memory.config import MemoryConfig
from memory.vectors import cosine, normalise, to_list

if TYPE_CHECKING:  # the pair actor imports this module for the pure parts: no driver there
    from psycopg_pool import AsyncConnectionPool

Graph = Literal["human", "character"]
HORIZONTE = ("kurz", "mittel", "lang")
HALBWERTSZEIT_TAGE: dict[str, float] = {"kurz": 3.0, "mittel": 30.0, "lang": 365.0}
"""Days after which an unreinforced goal holds half its motivation (retention 0.5 ** (days / this),
counted from `verstaerkt_am`). The seed names the curve, not its speed: these are ours."""
VERGESSEN_SCHWELLE = 0.10
"""A goal whose retention fell below this is forgotten (kurz ≈ 10, mittel ≈ 100, lang ≈ 1200 days)."""
WIEDERHOLT_MERKEN = 32
"""How many repeating turns a goal remembers (enough to recognise a redelivered job)."""

log = logging.getLogger("novaberg.ziele")


def ziel_paar_bestimmen(turn_pair: tuple[str, str], graph: Graph) -> tuple[str, str]:
    """The goal pair (character_id, user_id) from the pair as the given chain holds it."""
    if graph == "human":
        mensch, nova = turn_pair
        return nova, mensch
    if graph == "character":
        nova, mensch = turn_pair
        return nova, mensch
    raise ValueError(f"unknown chain {graph!r}")


async def add_goal(pool: AsyncConnectionPool, character_id: str, user_id: str, inhalt: str, horizont: str,
                   motivation: float, embedding) -> int:
    return (await bilden(pool, character_id, user_id, inhalt, horizont, motivation, embedding)).id


async def bilden(pool: AsyncConnectionPool, character_id: str, user_id: str, inhalt: str, horizont: str,
                 motivation: float, embedding, quelle_turn: str | None = None) -> Zielbildung:
    """A new goal (`neu` True). With `quelle_turn` at most one goal per turn and pair: a second
    call for the same turn (a redelivered job) returns the first goal with `neu` False."""
    from memory import erasure

    vec = normalise(embedding) if embedding is not None else None
    async with pool.connection() as conn, conn.transaction():
        await erasure.pruefen(conn, user_id, "a goal")
        cur = await conn.execute(
            "INSERT INTO ziele (character_id, user_id, inhalt, horizont, motivation, embedding, quelle_turn)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s)"
            " ON CONFLICT (character_id, user_id, quelle_turn) WHERE quelle_turn IS NOT NULL DO NOTHING RETURNING id",
            (character_id, user_id, inhalt, horizont, motivation, vec, quelle_turn))
        row = await cur.fetchone()
        if row is not None:
            return Zielbildung(id=row[0], neu=True)
        cur = await conn.execute("SELECT id FROM ziele WHERE character_id=%s AND user_id=%s AND quelle_turn=%s",
                                 (character_id, user_id, quelle_turn))
        return Zielbildung(id=(await cur.fetchone())[0], neu=False)


async def turn_ereignis(pool: AsyncConnectionPool, character_id: str, user_id: str,
                        turn_id: str) -> ZielEreignis | None:
    """What this turn did to the pair's goals already (formed or reinforced one), or None."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, quelle_turn IS NOT DISTINCT FROM %s FROM ziele WHERE character_id=%s AND user_id=%s"
            " AND (quelle_turn = %s OR %s = ANY(wiederholt_in)) ORDER BY id LIMIT 1",
            (turn_id, character_id, user_id, turn_id, turn_id))
        row = await cur.fetchone()
    return None if row is None else ZielEreignis(id=row[0], art="gebildet" if row[1] else "verstaerkt")


async def wiederholung_verstaerken(pool: AsyncConnectionPool, ziel_id: int, turn_id: str, motivation: float) -> bool:
    """The human stated an active goal again: its forgetting curve restarts (the anchor stays), its
    motivation becomes the stronger of old and new, and the turn is remembered. False when this
    turn had reinforced it already (a redelivered job) or the goal is no longer active."""
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute("SELECT user_id, character_id FROM ziele WHERE id = %s AND aktiv"
                                 " AND NOT (%s = ANY(wiederholt_in))", (ziel_id, turn_id))
        if (paar := await cur.fetchone()) is not None:  # the pair in the goal's own order (ziel_paar_bestimmen)
            await vorher.festhalten(conn, paar[0], paar[1], turn_id, "ziele", "t.id = %s", (ziel_id,),
                                    ("verstaerkt_am", "motivation", "wiederholt_in"))
        cur = await conn.execute(
            "UPDATE ziele SET verstaerkt_am = now(), motivation = GREATEST(motivation, %s),"
            " wiederholt_in = (wiederholt_in || %s::text)[greatest(1, cardinality(wiederholt_in) + 2 - %s):]"
            " WHERE id = %s AND aktiv AND NOT (%s = ANY(wiederholt_in)) RETURNING id",
            (motivation, turn_id, WIEDERHOLT_MERKEN, ziel_id, turn_id))
        return await cur.fetchone() is not None


def behalten(horizont: str, verstaerkt_am: datetime, jetzt: datetime) -> float:
    """Retention in (0, 1]: the share of its motivation an unreinforced goal still holds."""
    tage = max(0.0, (jetzt - verstaerkt_am).total_seconds() / 86400.0)
    return 0.5 ** (tage / HALBWERTSZEIT_TAGE.get(horizont, HALBWERTSZEIT_TAGE["mittel"]))


async def load_goals(pool: AsyncConnectionPool, character_id: str, user_id: str) -> list[PaarZiel]:
    """The pair's active goals with their faded motivation (`motivation_basis` as stored,
    `behalten` the retention). Goals whose retention fell below VERGESSEN_SCHWELLE are forgotten
    here, on their own read, and are not returned."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, inhalt, horizont, motivation, embedding, anker, verstaerkt_am, now() FROM ziele"
            " WHERE character_id=%s AND user_id=%s AND aktiv ORDER BY id", (character_id, user_id))
        rows = [(r, behalten(r[2], r[6], r[7])) for r in await cur.fetchall()]
        vergessen = [(r, b) for r, b in rows if b < VERGESSEN_SCHWELLE]
        if vergessen:
            await conn.execute("UPDATE ziele SET aktiv = false WHERE id = ANY(%s)", ([r[0] for r, _ in vergessen],))
    for r, b in vergessen:
        log.info("ziele: goal %d (%s, %r) of %s:%s forgotten: retention %.3f below %.2f since %s", r[0], r[2], r[1],
                 character_id, user_id, b, VERGESSEN_SCHWELLE, r[6].isoformat())
    return [PaarZiel(id=r[0], inhalt=r[1], horizont=r[2], motivation=round(r[3] * b, 6), motivation_basis=r[3],
                     behalten=round(b, 6), embedding=to_list(r[4]), anker=r[5].isoformat(),
                     verstaerkt_am=r[6].isoformat()) for r, b in rows if b >= VERGESSEN_SCHWELLE]


@dataclass
class Aktivierung:
    aktivierte: list[AktiviertesZiel]
    """Goals at or above the threshold, with their `aktivierungs_staerke`; without vectors."""
    ziel_vektoren: dict[int, list[float]]
    zielsog_roh: float
    """The strongest ungated strength of the turn."""
    ohne_embedding: list[int]
    aktiviert_je_horizont: dict[str, int] = field(default_factory=dict)
    """Per horizon: the goals whose activation was computed (those with an embedding)."""
    ueber_schwelle_je_horizont: dict[str, int] = field(default_factory=dict)
    """Per horizon: the goals at or above the threshold (seed 001: in the node's log entry, both chains)."""


def aktivieren(goals: list[PaarZiel], raw_query, threshold: float) -> Aktivierung:
    """activation = similarity(raw query, goal) × motivation. Always against the raw embedding:
    the shifted key would be its own input."""
    aktivierte, vektoren, ohne = [], {}, []
    geprueft: dict[str, int] = {}
    ueber: dict[str, int] = {}
    roh = 0.0
    for g in goals:
        if g.embedding is None:
            ohne.append(g.id)
            continue
        staerke = cosine(raw_query, g.embedding) * g.motivation
        roh = max(roh, staerke)
        geprueft[g.horizont] = geprueft.get(g.horizont, 0) + 1
        if staerke >= threshold:
            ueber[g.horizont] = ueber.get(g.horizont, 0) + 1
            aktivierte.append(AktiviertesZiel(id=g.id, inhalt=g.inhalt, horizont=g.horizont, motivation=g.motivation,
                                              aktivierungs_staerke=round(staerke, 6)))
            vektoren[g.id] = g.embedding
    return Aktivierung(aktivierte, vektoren, round(roh, 6), ohne, geprueft, ueber)


async def verstaerken(pool: AsyncConnectionPool, aktivierte: list[AktiviertesZiel], *,
                      turn: tuple[str, str, str] | None = None) -> list[int]:
    """An activated medium-term goal restarts its forgetting curve; its anchor stays. `turn`
    (user_id, character_id, turn_id): the curves as they were are kept for taking the turn back."""
    ids = [g.id for g in aktivierte if g.horizont == "mittel"]
    if ids:
        async with pool.connection() as conn:
            async with conn.transaction():
                if turn is not None:
                    await vorher.festhalten(conn, *turn, "ziele", "t.id = ANY(%s)", (ids,), ("verstaerkt_am",))
                await conn.execute("UPDATE ziele SET verstaerkt_am = now() WHERE id = ANY(%s)", (ids,))
    return ids


def wahrnehmung_verschieben(raw_query, aktivierung: Aktivierung | None, cluster: str | None, cfg: MemoryConfig, *,
                            gedaechtnis_suche: bool = True, intention_anweisung: bool = False
                            ) -> tuple[list[float] | None, str, dict[str, Any]]:
    """e_nova = e_query·(1−f) + Σ(e_goal·strength)·f, f per landscape cluster.

    Returns (search vector, exit, details). Every exit but `verschoben` searches with the raw
    embedding. The sum is not normalised; a result whose cosine to the raw query leaves (0, 1] is
    rejected, not clipped.
    """
    if not gedaechtnis_suche:
        return (None if raw_query is None else list(raw_query)), "keine_gedaechtnis_suche", {}
    if raw_query is None:
        return None, "kein_anfrage_embedding", {}
    raw = list(raw_query)
    if intention_anweisung:
        return raw, "anweisung", {}
    if aktivierung is None or not aktivierung.aktivierte:
        return raw, "keine_ziele", {}
    if not aktivierung.ziel_vektoren:
        return raw, "kein_ziel_embedding", {}
    if cluster not in cfg.cluster_gravitation:
        return raw, "cluster_unbekannt", {"cluster": cluster}
    f = cfg.cluster_gravitation[cluster]
    q = np.asarray(raw, dtype=np.float64)
    pull = np.zeros_like(q)
    for g in aktivierung.aktivierte:
        v = aktivierung.ziel_vektoren.get(g.id)
        if v is None:
            return raw, "kein_ziel_embedding", {"ziel": g.id}
        v = np.asarray(v, dtype=np.float64)
        if v.shape != q.shape:
            return raw, "dimension_ungleich", {"ziel": g.id, "dim": int(v.shape[0]), "erwartet": int(q.shape[0])}
        pull += v * g.aktivierungs_staerke
    shifted = q * (1 - f) + pull * f
    cos = cosine(q, shifted)
    if not (0.0 < cos <= 1.0 + 1e-9):
        return raw, "verworfen_ausser_spanne", {"cosinus": cos, "faktor": f}
    return shifted.astype(np.float32).tolist(), "verschoben", {"cosinus": round(cos, 6), "faktor": f,
                                                               "ziele": len(aktivierung.aktivierte)}
