"""Goals (`ziele`) per pair, their activation and perception gravity (seed 001 §3.3a).

The two chains hold the pair in opposite order — the human chain `(mensch, nova)`, the character
chain `(nova, mensch)` — so every reader goes through `ziel_paar_bestimmen`; using the turn pair
directly reads nothing on one of the two paths.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from typing import TYPE_CHECKING

from memory.config import MemoryConfig
from memory.vectors import cosine, normalise, to_list

if TYPE_CHECKING:  # the pair actor imports this module for the pure parts: no driver there
    from psycopg_pool import AsyncConnectionPool

Graph = Literal["human", "character"]


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
    async with pool.connection() as conn:
        cur = await conn.execute(
            "INSERT INTO ziele (character_id, user_id, inhalt, horizont, motivation, embedding)"
            " VALUES (%s,%s,%s,%s,%s,%s) RETURNING id",
            (character_id, user_id, inhalt, horizont, motivation,
             normalise(embedding) if embedding is not None else None))
        return (await cur.fetchone())[0]


async def load_goals(pool: AsyncConnectionPool, character_id: str, user_id: str) -> list[dict[str, Any]]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, inhalt, horizont, motivation, embedding, anker, verstaerkt_am FROM ziele"
            " WHERE character_id=%s AND user_id=%s AND aktiv ORDER BY id", (character_id, user_id))
        rows = await cur.fetchall()
    return [{"id": r[0], "inhalt": r[1], "horizont": r[2], "motivation": r[3],
             "embedding": to_list(r[4]),
             "anker": r[5].isoformat(), "verstaerkt_am": r[6].isoformat()} for r in rows]


@dataclass
class Aktivierung:
    aktivierte: list[dict[str, Any]]
    """Goals at or above the threshold, with `aktivierungs_staerke`; without vectors."""
    ziel_vektoren: dict[int, list[float]]
    zielsog_roh: float
    """The strongest ungated strength of the turn."""
    ohne_embedding: list[int]


def aktivieren(goals: list[dict[str, Any]], raw_query, threshold: float) -> Aktivierung:
    """activation = similarity(raw query, goal) × motivation. Always against the raw embedding:
    the shifted key would be its own input."""
    aktivierte, vektoren, ohne = [], {}, []
    roh = 0.0
    for g in goals:
        if g["embedding"] is None:
            ohne.append(g["id"])
            continue
        staerke = cosine(raw_query, g["embedding"]) * g["motivation"]
        roh = max(roh, staerke)
        if staerke >= threshold:
            aktivierte.append({k: g[k] for k in ("id", "inhalt", "horizont", "motivation")}
                              | {"aktivierungs_staerke": round(staerke, 6)})
            vektoren[g["id"]] = g["embedding"]
    return Aktivierung(aktivierte, vektoren, round(roh, 6), ohne)


async def verstaerken(pool: AsyncConnectionPool, aktivierte: list[dict[str, Any]]) -> list[int]:
    """An activated medium-term goal restarts its forgetting curve; its anchor stays."""
    ids = [g["id"] for g in aktivierte if g["horizont"] == "mittel"]
    if ids:
        async with pool.connection() as conn:
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
        v = aktivierung.ziel_vektoren.get(g["id"])
        if v is None:
            return raw, "kein_ziel_embedding", {"ziel": g["id"]}
        v = np.asarray(v, dtype=np.float64)
        if v.shape != q.shape:
            return raw, "dimension_ungleich", {"ziel": g["id"], "dim": int(v.shape[0]), "erwartet": int(q.shape[0])}
        pull += v * g["aktivierungs_staerke"]
    shifted = q * (1 - f) + pull * f
    cos = cosine(q, shifted)
    if not (0.0 < cos <= 1.0 + 1e-9):
        return raw, "verworfen_ausser_spanne", {"cosinus": cos, "faktor": f}
    return shifted.astype(np.float32).tolist(), "verschoben", {"cosinus": round(cos, 6), "faktor": f,
                                                               "ziele": len(aktivierung.aktivierte)}
