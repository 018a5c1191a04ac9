"""Everything stored about a user, or about every pair of a character: counted, exported, erased.

Postgres: the pair tables (their child tables go with them by `ON DELETE CASCADE`), a user's
notes (they belong to the user, not to a pair) and a user's API keys. Redis: every key family
with the pair in its name (`FAMILIES`; an id never holds `:`, so a key is matched by its
segments, never by a pattern that could catch another family) and the shared structures that
carry the pair inside an entry: the outbox and its dead letters, the due impulses, the registry
of live and evicted pairs, the node errors.

The caller stops the pairs' actors first (a live actor would write again) — `serve` does, for
`DELETE /v1/users/{user}` and `DELETE /v1/characters/{id}`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory import outbox

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from redis.asyncio import Redis

PAIR_TABLES: tuple[str, ...] = (
    "turns", "pipeline_log", "pair_profiles", "nova_emotion", "lzg_stichworte", "lzg_knoten", "ziele",
    "autonomous_wissen", "aufzeichnungen", "dateien", "timeline", "direktiven", "charakter_anweisungen",
    "turn_vorher", "zurueckgenommene_turns", "antwort_varianten",
)
"""The tables with a row per pair (`user_id`, `character_id`). `lzg_synapsen`,
`autonomous_wissen_thema` and a file's chunks go with their parent rows."""
USER_TABLES: tuple[str, ...] = ("notizen", "api_keys")
"""The tables with a row per user alone: erased with the user, never with a character."""


@dataclass(frozen=True)
class Family:
    """A Redis key family: `prefix:user:character[:more]` (`user_only`: `prefix:user[:more]`)."""

    prefix: str
    user_only: bool = False

    def owner(self, key: str) -> tuple[str, str | None] | None:
        """(user, character) of a key of this family, or None for a key of another family."""
        if not key.startswith(self.prefix + ":"):
            return None
        rest = key[len(self.prefix) + 1:].split(":")
        if self.user_only:
            return rest[0], None
        return (rest[0], rest[1]) if len(rest) >= 2 else None


FAMILIES: tuple[Family, ...] = (
    Family("session"), Family("turnres"), Family("turn:mensch"), Family("push"), Family("nova:zustand"),
    Family("kzg"), Family("auftrag:ausstehend"), Family("gv:detail"), Family("bg:done"), Family("bg:delegation"),
    Family("delegationen"), Family("delegationen_in_arbeit"), Family("aufgriff:geplant"), Family("impulse:offen"),
    Family("selftrigger"), Family("pair:seqstarted"), Family("pair:seq"), Family("inflight:leases:pair"),
    Family("inflight:leases:user", user_only=True), Family("vorher"), Family("zurueckgenommen"), Family("ruecknahme"),
)
"""Every key family with a pair (or a user) in its name."""

IMPULSES_DUE = ("impulse:faellig", "impulse:faellig:genommen")
LIVE_PAIRS, EVICTED_PAIRS, NODE_ERRORS = "pairs:live", "pairs:evicted", "errors:nodes"


@dataclass(frozen=True)
class Scope:
    """Whose data: a user (every pair of theirs, their notes and keys), or a character (every
    pair with her, nothing of a user beyond)."""

    user_id: str | None = None
    character_id: str | None = None

    def __post_init__(self):
        if (self.user_id is None) == (self.character_id is None):
            raise ValueError("a scope is a user or a character")

    def holds(self, user_id: str | None, character_id: str | None) -> bool:
        if self.user_id is not None:
            return user_id == self.user_id
        return character_id is not None and character_id == self.character_id

    def match(self, family: Family) -> str:
        """The SCAN pattern for the family's keys in this scope (filtered again by `owner`)."""
        if self.user_id is not None:
            return f"{family.prefix}:{self.user_id}:*" if not family.user_only else f"{family.prefix}:{self.user_id}"
        return f"{family.prefix}:*:{self.character_id}*"


def _where(scope: Scope, table: str) -> tuple[str, tuple]:
    if scope.user_id is not None:
        return "user_id = %s", (scope.user_id,)
    if table in USER_TABLES:
        return "false", ()
    return "character_id = %s", (scope.character_id,)


async def _tables(pool: AsyncConnectionPool, scope: Scope, erase: bool) -> dict[str, int]:
    out: dict[str, int] = {}
    async with pool.connection() as conn:
        async with conn.transaction():
            for table in (*PAIR_TABLES, *USER_TABLES):
                where, args = _where(scope, table)
                sql = f"DELETE FROM {table} WHERE {where}" if erase else f"SELECT count(*) FROM {table} WHERE {where}"
                cur = await conn.execute(sql, args)
                out[f"pg:{table}"] = cur.rowcount if erase else (await cur.fetchone())[0]
    return out


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


async def _keys(r: Redis, scope: Scope) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for family in FAMILIES:
        if family.user_only and scope.user_id is None:
            continue
        keys = []
        async for key in r.scan_iter(match=scope.match(family), count=500):
            k = _s(key)
            owner = family.owner(k)  # a pattern may catch a longer id; the key's own segments decide
            if owner is not None and scope.holds(*owner):
                keys.append(k)
        found[f"redis:{family.prefix}"] = keys
    return found


async def _stream_entries(r: Redis, stream: str, scope: Scope) -> list[str]:
    ids = []
    for entry_id, fields in await r.xrange(stream):
        if scope.holds(*outbox.job_owner(fields.get(b"job") or fields.get("job") or b"{}")):
            ids.append(_s(entry_id))
    return ids


def _pair_of(name: str) -> tuple[str | None, str | None]:
    """(user, character) of `pair:user:character`."""
    parts = name.split(":")
    return (parts[1], parts[2]) if len(parts) >= 3 and parts[0] == "pair" else (None, None)


async def _shared(r: Redis, scope: Scope) -> dict[str, list[str]]:
    """Entries of the shared structures that belong to the scope, by structure."""
    out: dict[str, list[str]] = {
        "outbox": await _stream_entries(r, outbox.OUTBOX_STREAM, scope),
        "dead_letters": await _stream_entries(r, outbox.DEAD_STREAM, scope),
    }
    for key in IMPULSES_DUE:
        members = []
        for m in await r.zrange(key, 0, -1):
            try:
                i = json.loads(_s(m))
            except ValueError:
                continue
            if scope.holds(i.get("user_id"), i.get("character_id")):
                members.append(_s(m))
        out[key] = members
    out[LIVE_PAIRS] = [_s(f) for f in await r.hkeys(LIVE_PAIRS) if scope.holds(*_pair_of(_s(f)))]
    out[EVICTED_PAIRS] = [_s(m) for m in await r.zrange(EVICTED_PAIRS, 0, -1) if scope.holds(*_pair_of(_s(m)))]
    errors = []
    for m in await r.zrange(NODE_ERRORS, 0, -1):
        parts = _s(m).split(":")  # time:node:user:character:turn
        if len(parts) >= 5 and scope.holds(parts[2], parts[3]):
            errors.append(_s(m))
    out[NODE_ERRORS] = errors
    return out


async def count_rows(pool: AsyncConnectionPool, user_id: str | None = None,
                     character_id: str | None = None) -> dict[str, int]:
    """Rows per table in the scope (a user, or every pair of a character)."""
    return await _tables(pool, Scope(user_id, character_id), erase=False)


async def erase_rows(pool: AsyncConnectionPool, user_id: str | None = None,
                     character_id: str | None = None) -> dict[str, int]:
    """Delete the scope's rows in one transaction; returns the rows deleted per table."""
    return await _tables(pool, Scope(user_id, character_id), erase=True)


async def count_keys(r: Redis, user_id: str | None = None, character_id: str | None = None) -> dict[str, int]:
    """Keys per key family and entries per shared structure in the scope."""
    scope = Scope(user_id, character_id)
    out = {k: len(v) for k, v in (await _keys(r, scope)).items()}
    out.update({f"redis:{k}": len(v) for k, v in (await _shared(r, scope)).items()})
    return out


async def erase_keys(r: Redis, user_id: str | None = None, character_id: str | None = None) -> dict[str, int]:
    """Erase the scope's Redis data; returns what went, counted as `count_keys` counts. The
    queued jobs go first, so no worker writes the scope's data again afterwards."""
    scope = Scope(user_id, character_id)
    shared = await _shared(r, scope)
    for stream, name in ((outbox.OUTBOX_STREAM, "outbox"), (outbox.DEAD_STREAM, "dead_letters")):
        if shared[name]:
            if stream == outbox.OUTBOX_STREAM:
                await r.xack(stream, outbox.GROUP, *shared[name])
                await outbox.vergessen(r, *shared[name])
            await r.xdel(stream, *shared[name])
    for key in IMPULSES_DUE + (EVICTED_PAIRS, NODE_ERRORS):
        if shared[key]:
            await r.zrem(key, *shared[key])
    if shared[LIVE_PAIRS]:
        await r.hdel(LIVE_PAIRS, *shared[LIVE_PAIRS])
    out = {f"redis:{k}": len(v) for k, v in shared.items()}
    for family, keys in (await _keys(r, scope)).items():
        if keys:
            await r.delete(*keys)
        out[family] = len(keys)
    return out


EXPORT_TABLES: tuple[str, ...] = tuple(t for t in (*PAIR_TABLES, *USER_TABLES) if t != "lzg_stichworte")
"""The tables an export reads (the long-term nodes' search postings are made from their text)."""
EXPORT_LEFT_OUT: tuple[str, ...] = ("embedding", "user_embedding", "key_hash")
"""Columns an export leaves out: vectors made from the text beside them, and the keys' hashes."""


async def export_table(pool: AsyncConnectionPool, user_id: str, table: str) -> list[dict[str, Any]]:
    """A user's rows of one table (`EXPORT_TABLES`), each a JSON object of its columns."""
    if table not in EXPORT_TABLES:
        raise ValueError(f"unknown table {table!r}: one of {', '.join(EXPORT_TABLES)}")
    async with pool.connection() as conn:
        cur = await conn.execute(f"SELECT to_jsonb(t) - %s::text[] FROM {table} t WHERE user_id = %s",
                                 (list(EXPORT_LEFT_OUT), user_id))
        return [r[0] for r in await cur.fetchall()]


async def _value(r: Redis, key: str) -> Any:
    kind = _s(await r.type(key))
    if kind == "string":
        return _s(await r.get(key))
    if kind == "hash":
        return {_s(k): _s(v) for k, v in (await r.hgetall(key)).items()}
    if kind == "list":
        return [_s(v) for v in await r.lrange(key, 0, -1)]
    if kind == "set":
        return sorted(_s(v) for v in await r.smembers(key))
    if kind == "zset":
        return [[_s(m), s] for m, s in await r.zrange(key, 0, -1, withscores=True)]
    if kind == "stream":
        return [{"id": _s(i), **{_s(k): _s(v) for k, v in f.items()}} for i, f in await r.xrange(key)]
    return None


async def export_keys(r: Redis, user_id: str) -> dict[str, Any]:
    """A user's Redis data: every key of theirs by name with its value (the short-term memory's
    vectors left out, like the tables' embeddings), and the jobs still queued for them."""
    scope = Scope(user_id=user_id)
    out: dict[str, Any] = {}
    for keys in (await _keys(r, scope)).values():
        for key in keys:
            if not key.endswith(":vectors"):
                out[key] = await _value(r, key)
    shared = await _shared(r, scope)
    for stream, name in ((outbox.OUTBOX_STREAM, "outbox"), (outbox.DEAD_STREAM, "dead_letters")):
        if shared[name]:
            entries = {_s(i): f for i, f in await r.xrange(stream)}
            out[stream] = [json.loads(_s(entries[i].get(b"job", b"{}"))) for i in shared[name] if i in entries]
    for key in IMPULSES_DUE:
        if shared[key]:
            out[key] = [json.loads(m) for m in shared[key]]
    return out
