"""Reads for the operators' dashboard: turn and node latencies, recent pairs, one pair's last turns
with their node rows and decisions. Everything is computed from `turns` and `pipeline_log`."""
from __future__ import annotations

from datetime import datetime

from psycopg_pool import AsyncConnectionPool

from core.bestand import NodeDecision, NodeRun, NodeStats, PairTurn, RecentPair, TurnStats


def _ms(x) -> float | None:
    return None if x is None else round(float(x), 2)


async def turn_stats(pool: AsyncConnectionPool, since: datetime) -> TurnStats:
    """Finished turns since `since`: count and latency percentiles (the turn's own total)."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*),"
            " percentile_cont(0.5) WITHIN GROUP (ORDER BY (result->'timings'->>'total_ms')::float8),"
            " percentile_cont(0.95) WITHIN GROUP (ORDER BY (result->'timings'->>'total_ms')::float8),"
            " count(DISTINCT (user_id, character_id))"
            " FROM turns WHERE created_at >= %s", (since,))
        n, p50, p95, pairs = await cur.fetchone()
    return TurnStats(count=n, p50_ms=_ms(p50), p95_ms=_ms(p95), pairs=pairs)


async def node_stats(pool: AsyncConnectionPool, since: datetime) -> list[NodeStats]:
    """Per node: runs and duration percentiles since `since` (reply chains and background)."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT node, count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms),"
            " percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)"
            " FROM pipeline_log WHERE art = 'node' AND created_at >= %s GROUP BY node ORDER BY node", (since,))
        rows = await cur.fetchall()
    return [NodeStats(node=r[0], runs=r[1], p50_ms=_ms(r[2]), p95_ms=_ms(r[3])) for r in rows]


async def recent_pairs(pool: AsyncConnectionPool, since: datetime, limit: int = 50) -> list[RecentPair]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT user_id, character_id, count(*), max(created_at) FROM turns WHERE created_at >= %s"
            " GROUP BY user_id, character_id ORDER BY max(created_at) DESC LIMIT %s", (since, limit))
        rows = await cur.fetchall()
    return [RecentPair(user_id=r[0], character_id=r[1], turns=r[2], last=r[3].isoformat()) for r in rows]


async def pair_turns(pool: AsyncConnectionPool, user_id: str, character_id: str, limit: int = 10) -> list[PairTurn]:
    """The pair's last turns, newest first, each with its node durations and decisions."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT turn_id, created_at, user_text, reply, (result->'timings'->>'total_ms')::float8,"
            " result->>'herkunft' FROM turns WHERE user_id = %s AND character_id = %s"
            " ORDER BY created_at DESC LIMIT %s", (user_id, character_id, limit))
        turns = await cur.fetchall()
        ids = [t[0] for t in turns]
        cur = await conn.execute(
            "SELECT turn_id, seq, node, art, entscheidung, outcome, inputs, duration_ms FROM pipeline_log"
            " WHERE user_id = %s AND character_id = %s AND turn_id = ANY(%s) ORDER BY turn_id, seq",
            (user_id, character_id, ids))
        rows = await cur.fetchall()
    runs: dict[str, list[NodeRun]] = {i: [] for i in ids}
    entscheidungen: dict[str, list[NodeDecision]] = {i: [] for i in ids}
    for turn_id, seq, node, art, ent, outcome, inputs, ms in rows:
        if art == "node":
            runs[turn_id].append(NodeRun(seq=seq, node=node, ms=_ms(ms)))
        else:
            entscheidungen[turn_id].append(NodeDecision(seq=seq, node=node, entscheidung=ent, outcome=outcome,
                                                        inputs=inputs))
    return [PairTurn(turn_id=t[0], created_at=t[1].isoformat(), user_text=t[2], reply=t[3], total_ms=_ms(t[4]),
                     herkunft=t[5], nodes=runs[t[0]], decisions=entscheidungen[t[0]]) for t in turns]
