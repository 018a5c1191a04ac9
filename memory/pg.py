"""PostgreSQL access for the spine: API keys, characters and profiles, turn records, pipeline_log.

All SQL of the project lives in `memory/`. Callers pass a psycopg `AsyncConnectionPool` (owned by
the store deployment or an outbox worker), never a connection per pair.
"""
from __future__ import annotations

import hashlib
import logging
import secrets
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, AsyncIterator

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from core.bestand import ApiKeyInfo, DecisionRate, StoredTurn
from core.state import NovaZustandRecord
from core.wire import NodeLogRow, SwitchLogRow, TurnJob
from memory import erasure, vorher
from memory.seams import store_calls

log = logging.getLogger("novaberg.memory.pg")


class StorePool(AsyncConnectionPool):
    """The pool as a seam (`memory.seams.store_calls`): what fails in a connection's block because
    Postgres is away (refused, lost, the pool's wait timed out or it closed) raises
    `core.errors.StoreUnavailable` from psycopg's error; every other error passes as it is."""

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[AsyncConnection]:
        with store_calls():
            async with super().connection(timeout) as conn:
                yield conn


def open_pool(database_url: str, min_size: int, max_size: int) -> AsyncConnectionPool:
    async def _configure(conn):
        from pgvector.psycopg import register_vector_async

        await register_vector_async(conn)
        await conn.set_autocommit(True)

    return StorePool(
        database_url, min_size=min_size, max_size=max_size, open=False, configure=_configure
    )


# ---------------------------------------------------------------- API keys
def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


async def create_api_key(pool: AsyncConnectionPool, user_id: str | None, *, operator: bool = False,
                         label: str = "", expires_days: int | None = None) -> str:
    """Create a key and return it in plain text; only its hash is stored. `expires_days`: it stops
    working that many days from now (None: it does not expire). A key for an erased user lifts the
    user's erasure mark in Postgres (`geloeschte_user`): the user is made again."""
    key = ("nbo_" if operator else "nbk_") + secrets.token_urlsafe(32)
    async with pool.connection() as conn, conn.transaction():
        if user_id is not None:
            await conn.execute("DELETE FROM geloeschte_user WHERE user_id = %s", (user_id,))
        await conn.execute(
            "INSERT INTO api_keys (key_hash, user_id, is_operator, label, expires_at) VALUES (%s, %s, %s, %s,"
            " CASE WHEN %s::int IS NULL THEN NULL ELSE now() + make_interval(days => %s::int) END)",
            (hash_key(key), user_id, operator, label, expires_days, expires_days),
        )
    return key


async def list_api_keys(pool: AsyncConnectionPool) -> list[ApiKeyInfo]:
    """Every key without its secret, newest first: id, user, operator or not, label, created,
    expires, revoked, and whether it works now."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, user_id, is_operator, label, created_at, expires_at, revoked_at,"
            " revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) FROM api_keys ORDER BY id DESC")
        rows = await cur.fetchall()
    iso = lambda t: t.isoformat() if t is not None else None  # noqa: E731
    return [ApiKeyInfo(id=r[0], user_id=r[1], is_operator=r[2], label=r[3], created_at=iso(r[4]), expires_at=iso(r[5]),
                       revoked_at=iso(r[6]), active=r[7]) for r in rows]


async def lookup_api_key(pool: AsyncConnectionPool, key: str) -> dict | None:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT user_id, is_operator FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL"
            " AND (expires_at IS NULL OR expires_at > now())",
            (hash_key(key),),
        )
        row = await cur.fetchone()
    return None if row is None else {"user_id": row[0], "is_operator": bool(row[1])}


# ---------------------------------------------------------------- characters and profiles
async def load_pair(pool: AsyncConnectionPool, user_id: str, character_id: str) -> dict[str, Any]:
    """The character row and the pair's profiles; found=False fields say what is missing."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT name, charakter_anweisung, identitaet, sprechweise, szenario, beispieldialog FROM characters"
            " WHERE character_id = %s", (character_id,)
        )
        ch = await cur.fetchone()
        cur = await conn.execute(
            "SELECT nova_kern, nova_adaptiv, nova_emotions, nova_intentionen, nova_beziehung, mensch_kern,"
            " mensch_beziehung, mensch_themen FROM pair_profiles WHERE user_id = %s AND character_id = %s",
            (user_id, character_id),
        )
        pr = await cur.fetchone()
        cur = await conn.execute("SELECT text FROM direktiven WHERE user_id=%s AND character_id=%s AND aktiv ORDER BY id",
                                 (user_id, character_id))
        direktiven = [r[0] for r in await cur.fetchall()]
        cur = await conn.execute("SELECT text FROM charakter_anweisungen WHERE user_id=%s AND character_id=%s AND aktiv"
                                 " ORDER BY id", (user_id, character_id))
        anweisungen = [r[0] for r in await cur.fetchall()]
        cur = await conn.execute("SELECT emotion, arousal, updated_at FROM nova_emotion WHERE user_id=%s AND character_id=%s",
                                 (user_id, character_id))
        emo = await cur.fetchone()
    out: dict[str, Any] = {
        "character_found": ch is not None,
        "character_name": ch[0] if ch else None,
        "charakter_anweisung": ch[1] if ch else "",
        "identitaet": ch[2] if ch else "",
        "sprechweise": ch[3] if ch else "",
        "szenario": ch[4] if ch else "",
        "beispieldialog": ch[5] if ch else "",
        "profile_found": pr is not None,
        "direktiven": direktiven,
        "anweisungen": anweisungen,
        "nova_emotion": emo[0] if emo else "neutral",
        "nova_arousal": float(emo[1]) if emo else 0.3,
        "emotion_found": emo is not None,
        "emotion_stand": emo[2].isoformat() if emo else None,
    }
    keys = ("nova_kern", "nova_adaptiv", "nova_emotions", "nova_intentionen", "nova_beziehung", "mensch_kern",
            "mensch_beziehung", "mensch_themen")
    for i, k in enumerate(keys):
        out[k] = pr[i] if pr else ""
    return out


# ---------------------------------------------------------------- background writes
async def write_turn_job(pool: AsyncConnectionPool, job: TurnJob) -> None:
    """Persist one finished turn: its record and its pipeline_log rows, in one transaction.

    Idempotent (a second delivery changes nothing), because a re-claimed job may have committed
    already when its first worker died before acknowledging it. A record kept without a reply (the
    human's message alone, Nova's chain failed) takes the reply of the turn's later success. A turn
    taken back (`zurueckgenommene_turns`, memory/ruecknahme.py) is not written again: a job that
    slipped past the outbox's fence finds the record in the same transaction.
    """
    t = job.turn
    async with pool.connection() as conn:
        async with conn.transaction():
            await erasure.pruefen(conn, t.user_id, f"the record of turn {t.turn_id}")
            cur = await conn.execute("SELECT 1 FROM zurueckgenommene_turns WHERE user_id=%s AND character_id=%s"
                                     " AND turn_id=%s", (t.user_id, t.character_id, t.turn_id))
            if await cur.fetchone() is not None:
                log.warning("outbox: fallback zurueckgenommen: turn %s of %s:%s was taken back; its record is not "
                            "written", t.turn_id, t.user_id, t.character_id)
                return
            await conn.execute(
                "INSERT INTO turns (user_id, character_id, turn_id, user_text, reply, user_embedding,"
                " result, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (user_id, character_id, turn_id) DO UPDATE SET reply = EXCLUDED.reply,"
                " result = EXCLUDED.result, user_embedding = COALESCE(EXCLUDED.user_embedding, turns.user_embedding)"
                " WHERE turns.reply = '' AND EXCLUDED.reply <> ''",
                (
                    t.user_id, t.character_id, t.turn_id, t.mensch.inhalt, t.reply, _vec(t.user_embedding),
                    Jsonb(t.result.model_dump(mode="json", exclude_unset=True)), datetime.fromisoformat(t.created_at),
                ),
            )
            await _insert_log_rows(conn, t.user_id, t.character_id, t.turn_id, job.log)
            if t.nova_zustand:
                await vorher.zeile_festhalten(conn, t.user_id, t.character_id, t.turn_id, "nova_emotion",
                                              {"user_id": t.user_id, "character_id": t.character_id})
                await _save_zustand(conn, t.user_id, t.character_id, t.nova_zustand)


async def _save_zustand(conn, user_id: str, character_id: str, z: NovaZustandRecord) -> None:
    """Nova's emotion state after a turn, unless a later turn's is stored already: jobs may be
    applied twice or out of order (a re-claimed job), the later turn's state holds."""
    await conn.execute(
        "INSERT INTO nova_emotion (user_id, character_id, emotion, arousal, vektor, verlauf, updated_at)"
        " VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (user_id, character_id) DO UPDATE SET emotion=EXCLUDED.emotion,"
        " arousal=EXCLUDED.arousal, vektor=EXCLUDED.vektor, verlauf=EXCLUDED.verlauf, updated_at=EXCLUDED.updated_at"
        " WHERE nova_emotion.updated_at <= EXCLUDED.updated_at",
        (user_id, character_id, z.emotion, z.arousal, z.vektor, Jsonb(z.verlauf), z.stand))


async def _insert_log_rows(conn, user_id: str, character_id: str, turn_id: str,
                           rows: list[NodeLogRow | SwitchLogRow]) -> None:
    if not rows:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO pipeline_log (user_id, character_id, turn_id, seq, node, art, entscheidung,"
            " outcome, inputs, threshold, duration_ms, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (user_id, character_id, turn_id, seq) DO NOTHING",
            [_log_columns(user_id, character_id, turn_id, r) for r in rows],
        )


def _log_columns(user_id: str, character_id: str, turn_id: str, r: NodeLogRow | SwitchLogRow) -> tuple:
    """A pipeline_log row's columns: a node row has its duration, a decision entry its name and threshold."""
    match r:
        case SwitchLogRow():
            entscheidung, threshold, duration_ms = r.entscheidung, r.threshold, None
        case NodeLogRow():
            entscheidung, threshold, duration_ms = None, None, r.duration_ms
    return (user_id, character_id, turn_id, r.seq, r.node, r.art, entscheidung, r.outcome, Jsonb(r.inputs),
            threshold, duration_ms, datetime.fromisoformat(r.at))


def _vec(v):
    if v is None:
        return None
    import numpy as np

    return np.asarray(v, dtype=np.float32)


# ---------------------------------------------------------------- reads for operators and tests
async def turn_record(pool: AsyncConnectionPool, user_id: str, character_id: str, turn_id: str) -> dict | None:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT user_text, reply, result, vector_dims(user_embedding) FROM turns"
            " WHERE user_id = %s AND character_id = %s AND turn_id = %s",
            (user_id, character_id, turn_id),
        )
        row = await cur.fetchone()
    if row is None:
        return None
    return {"user_text": row[0], "reply": row[1], "result": row[2], "embedding_dim": row[3]}


async def pipeline_rows(pool: AsyncConnectionPool, user_id: str, character_id: str,
                        turn_id: str | None = None) -> list[dict]:
    sql = ("SELECT turn_id, seq, node, art, entscheidung, outcome, inputs, threshold, duration_ms"
           " FROM pipeline_log WHERE user_id = %s AND character_id = %s")
    args: list[Any] = [user_id, character_id]
    if turn_id is not None:
        sql += " AND turn_id = %s"
        args.append(turn_id)
    sql += " ORDER BY created_at, seq"
    async with pool.connection() as conn:
        cur = await conn.execute(sql, args)
        rows = await cur.fetchall()
    cols = ("turn_id", "seq", "node", "art", "entscheidung", "outcome", "inputs", "threshold", "duration_ms")
    return [dict(zip(cols, r)) for r in rows]


async def count_turn_records(pool: AsyncConnectionPool, user_id: str, character_id: str) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM turns WHERE user_id = %s AND character_id = %s", (user_id, character_id)
        )
        return (await cur.fetchone())[0]


async def recent_turn_records(pool: AsyncConnectionPool, user_id: str, character_id: str,
                              limit: int) -> list[StoredTurn]:
    """The pair's last `limit` stored turns, oldest first: what the session history is rebuilt from."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT turn_id, user_text, reply, result, created_at FROM (SELECT * FROM turns WHERE user_id = %s"
            " AND character_id = %s ORDER BY created_at DESC LIMIT %s) t ORDER BY created_at",
            (user_id, character_id, limit))
        return [StoredTurn(turn_id=r[0], user_text=r[1], reply=r[2], result=r[3], created_at=r[4].isoformat())
                for r in await cur.fetchall()]


async def database_bytes(pool: AsyncConnectionPool) -> int:
    """The database's size on disk (tables, indexes, TOAST), in bytes."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT pg_database_size(current_database())")
        return int((await cur.fetchone())[0])


async def turn_ids(pool: AsyncConnectionPool, user_id: str, character_id: str) -> list[str]:
    """The turn ids of the pair's stored turns, one per row (a turn stored twice shows twice)."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT turn_id FROM turns WHERE user_id = %s AND character_id = %s ORDER BY turn_id", (user_id, character_id)
        )
        return [r[0] for r in await cur.fetchall()]


async def decision_rates(pool: AsyncConnectionPool, since: datetime | None = None) -> list[DecisionRate]:
    """How often each branching node took each outcome (art = switch), since a point in time."""
    sql = ("SELECT entscheidung, outcome, count(*) FROM pipeline_log WHERE art = 'switch'"
           + (" AND created_at >= %s" if since else "") + " GROUP BY entscheidung, outcome ORDER BY entscheidung, outcome")
    async with pool.connection() as conn:
        cur = await conn.execute(sql, (since,) if since else ())
        rows = await cur.fetchall()
    totals: dict[str, int] = {}
    for e, _, n in rows:
        totals[e] = totals.get(e, 0) + n
    return [DecisionRate(entscheidung=e, outcome=o, count=n, rate=round(n / totals[e], 6)) for e, o, n in rows]


PRUNE_BATCH = 5000
"""Rows one retention statement deletes at most; it repeats until none older is left, so a long
backlog never holds one long transaction."""


async def prune(pool: AsyncConnectionPool, *, log_before: datetime | None,
                turns_before: datetime | None, undo_before: datetime | None = None) -> dict[str, int]:
    """Retention: delete `pipeline_log` rows written before `log_before`, turn records made
    before `turns_before` and the turns' before-images and retraction records made before
    `undo_before` (None: that table is kept). Returns the rows deleted per table."""
    deleted = {"pipeline_log": 0, "turns": 0, "turn_vorher": 0, "zurueckgenommene_turns": 0}
    statements = (
        ("turn_vorher", undo_before, "DELETE FROM turn_vorher WHERE nr IN"
                                     " (SELECT nr FROM turn_vorher WHERE created_at < %s LIMIT %s)"),
        ("zurueckgenommene_turns", undo_before, "DELETE FROM zurueckgenommene_turns WHERE ctid IN"
                                                " (SELECT ctid FROM zurueckgenommene_turns WHERE created_at < %s LIMIT %s)"),
        ("pipeline_log", log_before, "DELETE FROM pipeline_log WHERE id IN"
                                     " (SELECT id FROM pipeline_log WHERE created_at < %s LIMIT %s)"),
        ("turns", turns_before, "DELETE FROM turns WHERE ctid IN"
                                " (SELECT ctid FROM turns WHERE created_at < %s LIMIT %s)"),
    )
    async with pool.connection() as conn:
        for table, before, sql in statements:
            while before is not None:
                cur = await conn.execute(sql, (before, PRUNE_BATCH))
                deleted[table] += cur.rowcount
                if cur.rowcount < PRUNE_BATCH:
                    break
    return deleted


async def revoke_api_keys(pool: AsyncConnectionPool, key: str | None = None, user_id: str | None = None,
                          key_id: int | None = None) -> int:
    """Revoke one key (given in plain text, or by its id as `list_api_keys` shows it, an operator's
    too) or every active key of a user; how many were revoked."""
    if sum(x is not None for x in (key, user_id, key_id)) != 1:
        raise ValueError("exactly one of key / user_id / key_id")
    async with pool.connection() as conn:
        if key_id is not None:
            cur = await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL",
                                     (key_id,))
        elif key is not None:
            cur = await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE key_hash = %s AND revoked_at IS NULL",
                                     (hash_key(key),))
        else:
            cur = await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE user_id = %s AND revoked_at IS NULL"
                                     " AND NOT is_operator", (user_id,))
        return cur.rowcount
