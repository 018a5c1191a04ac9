"""Everything stored about a user, or about every pair of a character: counted, exported, erased.

Postgres: the pair tables (their child tables go with them by `ON DELETE CASCADE`), a user's
notes (they belong to the user, not to a pair) and a user's API keys. Redis: every key family
with the pair in its name (`FAMILIES`; an id never holds `:`, so a key is matched by its
segments, never by a pattern that could catch another family) and the shared structures that
carry the pair inside an entry: the outbox and its dead letters, the due impulses, the registry
of live and evicted pairs, the node errors.

A user's keys are named, never looked for: the user's pairs and their turns come from the key
index (memory/schluessel_index.py) and from Postgres' pair tables (`bekannte_paare`: keys written
before the index existed), and each family builds its names from them (`Family.namen`); only the
ones that exist count. A character's scope (an operator's `DELETE /v1/characters/{id}`, rare) walks
the keyspace with SCAN, one pattern per family: no index lists a character's users.

The caller stops the pairs' actors first (a live actor would write again) — `serve` does, for
`DELETE /v1/users/{user}` and `DELETE /v1/characters/{id}`.

A user's erasure is final: before anything is deleted the user is marked erased (`markieren`:
the Redis key `geloescht:{user}` and the row of `geloeschte_user`, each for `erasure_mark_hours`),
and every write for a user checks the mark where it commits — a Postgres write transaction by
`pruefen` (under a shared advisory lock the mark's transaction takes exclusively: a write commits
before the mark, and the erasure's deletes take it, or it sees the mark), a Redis script by reading
`geloescht:{user}` in the script. A write for a marked user raises `NutzerGeloescht` (logged as the
fallback `geloescht`); the outbox job that tried it is acknowledged, not retried. The mark ends
with its time, or when a new key is made for the user (`memory.pg.create_api_key` lifts the
Postgres row; the key route lifts the Redis key, `aufheben`).
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from core.errors import RefusedError
from memory import outbox, schluessel_index
from memory.seams import caused_by

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from redis.asyncio import Redis

log = logging.getLogger("novaberg.erasure")

MARKE = "geloescht"
"""`geloescht:{user}`: the user's erasure began; no write for them is taken while it lives."""
REVOCATION_KEY = "keys:widerruf"
"""The revocation counter: raised by every key revocation and user erasure; an ingress replica
that finds it changed forgets the keys it cached (`serve.ingress.Ingress.principal`)."""


class NutzerGeloescht(RefusedError, RuntimeError):
    """A write for a user whose erasure began (`geloescht:{user}`, `geloeschte_user`): refused."""


def marke_key(user_id: str) -> str:
    return f"{MARKE}:{user_id}"


def _sperre(user_id: str) -> str:
    return f"{MARKE}:{user_id}"


def ist_geloescht(e: BaseException) -> bool:
    """Whether a failure is (or was caused by) a refused write for an erased user, through Ray's
    wrappers and a failed node's cause."""
    return caused_by(e, NutzerGeloescht)


def abgewiesen(user_id: str | None, was: str) -> NutzerGeloescht:
    """The refusal of a write for an erased user, logged as the fallback `geloescht`."""
    log.warning("fallback geloescht: %s for user %s is not written, the user was erased", was, user_id)
    return NutzerGeloescht(f"user {user_id} was erased: {was} is not written")


async def markieren(pool: AsyncConnectionPool, user_id: str, frist_s: float) -> None:
    """The Postgres part of the mark (in the store): committed before this returns, under the
    exclusive advisory lock that writers take shared (`pruefen`)."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_sperre(user_id),))
        await conn.execute("INSERT INTO geloeschte_user (user_id, bis) VALUES (%s, now() + make_interval(secs => %s))"
                           " ON CONFLICT (user_id) DO UPDATE SET seit = now(), bis = EXCLUDED.bis",
                           (user_id, float(frist_s)))


async def pruefen(conn, user_id: str, was: str = "a write") -> None:
    """Inside a write transaction: raise `NutzerGeloescht` when the user is marked erased. Holds
    the shared advisory lock to the transaction's end, so a mark written meanwhile waits for it
    (and the erasure's deletes, which follow the mark, take what it wrote)."""
    await conn.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))", (_sperre(user_id),))
    cur = await conn.execute("SELECT 1 FROM geloeschte_user WHERE user_id = %s AND bis > now()", (user_id,))
    if await cur.fetchone() is not None:
        raise abgewiesen(user_id, was)


async def markieren_redis(r: Redis, user_id: str, frist_s: float) -> None:
    """The Redis part of the mark (read by the scripts that write for a user)."""
    await r.set(marke_key(user_id), repr(time.time()), ex=max(int(frist_s), 1))


async def markiert(r: Redis, user_id: str | None) -> bool:
    """Whether the user is marked erased in Redis (a job's early check; the writes check again)."""
    return bool(user_id) and bool(await r.exists(marke_key(user_id)))


async def aufheben(r: Redis, user_id: str | None) -> bool:
    """The Redis mark lifted (a new key was made for the user); whether there was one."""
    return bool(user_id) and bool(await r.delete(marke_key(user_id)))


async def gehaltene_abwarten(r: Redis, user_id: str, warten_s: float, claim_idle_ms: int) -> int:
    """Wait (up to `warten_s`) until no worker holds a job of the user's any more: one that began
    before the mark writes on, and the deletes come after it. A job is held while its claim is
    fresher than `claim_idle_ms` (its worker's heartbeat refreshes it); one pending longer (its
    worker died, or it waits for its model) is not waited for. Returns the jobs still held then
    (what they write is refused by the mark)."""
    ids = await _stream_entries(r, outbox.OUTBOX_STREAM, Scope(user_id=user_id))
    deadline = time.monotonic() + warten_s
    while ids:
        held = []
        for e in ids:
            p = await r.xpending_range(outbox.OUTBOX_STREAM, outbox.GROUP, min=e, max=e, count=1)
            if p and p[0]["time_since_delivered"] < claim_idle_ms:
                held.append(e)
        ids = held
        if not ids or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    if ids:
        log.warning("erasure: fallback job_laeuft: %d background jobs of user %s still held by a worker after %.0fs; "
                    "erased all the same (what they write is refused)", len(ids), user_id, warten_s)
    return len(ids)


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
    """A Redis key family: `prefix:user:character[:more]` (`user_only`: `prefix:user[:more]`).
    `enden`: the names' ends after `prefix:user:character`; `je_turn`: a name per turn instead,
    each end after `prefix:user:character:`, `{t}` standing for the turn id."""

    prefix: str
    user_only: bool = False
    enden: tuple[str, ...] = ("",)
    je_turn: tuple[str, ...] = ()

    def namen(self, user_id: str, character_id: str | None, turn_ids: Iterable[str] = ()) -> list[str]:
        """The family's key names of a pair (`user_only`: of the user) and its turns."""
        base = f"{self.prefix}:{user_id}" if self.user_only else f"{self.prefix}:{user_id}:{character_id}"
        if self.je_turn:
            return [f"{base}:{e.replace('{t}', t)}" for t in turn_ids for e in self.je_turn]
        return [base + e for e in self.enden]

    def owner(self, key: str) -> tuple[str, str | None] | None:
        """(user, character) of a key of this family, or None for a key of another family."""
        if not key.startswith(self.prefix + ":"):
            return None
        rest = key[len(self.prefix) + 1:].split(":")
        if self.user_only:
            return rest[0], None
        return (rest[0], rest[1]) if len(rest) >= 2 else None


_TURN = ("{t}",)
FAMILIES: tuple[Family, ...] = (
    Family("session", enden=(":turns", ":summary")), Family("turnres", je_turn=_TURN),
    Family("turn:mensch", je_turn=_TURN), Family("push"), Family("nova:zustand"),
    Family("kzg", enden=(":entries", ":vectors", ":order", ":version")), Family("auftrag:ausstehend"),
    Family("gv:detail"), Family("bg:done", je_turn=("{t}", "{t}:mensch")),
    Family("bg:delegation", je_turn=tuple(f"{{t}}:{n}" for n in range(schluessel_index.DELEGATIONEN_JE_TURN))),
    Family("delegationen"), Family("delegationen_in_arbeit"), Family("aufgriff:geplant", je_turn=_TURN),
    Family("impulse:offen"), Family("selftrigger"), Family("pair:seqstarted"), Family("pair:seq"),
    Family("inflight:leases:pair"), Family("inflight:leases:user", user_only=True), Family("vorher", je_turn=_TURN),
    Family("zurueckgenommen"), Family("ruecknahme"), Family(schluessel_index.TURNS),
    Family(schluessel_index.PAARE, user_only=True),
    Family("ops:laufend", user_only=True, enden=(":export", ":turn")),
    Family("ops:rate", user_only=True, enden=(":export", ":turn")),
)
"""Every key family with a pair (or a user) in its name, with the names it holds."""

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


async def bekannte_paare(pool: AsyncConnectionPool, user_id: str) -> dict[str, list[str]]:
    """The user's pairs in Postgres (a row in any pair table), each with its turns' ids: where the
    Redis part looks besides the key index (keys written before the index existed)."""
    out: dict[str, set[str]] = {}
    async with pool.connection() as conn:
        for table in PAIR_TABLES:
            cur = await conn.execute(f"SELECT DISTINCT character_id FROM {table} WHERE user_id = %s", (user_id,))
            for (c,) in await cur.fetchall():
                out.setdefault(c, set())
        cur = await conn.execute("SELECT character_id, turn_id FROM turns WHERE user_id = %s", (user_id,))
        for c, t in await cur.fetchall():
            out.setdefault(c, set()).add(t)
    return {c: sorted(ts) for c, ts in out.items()}


async def _paare(r: Redis, user_id: str, bekannt: dict[str, list[str]] | None) -> dict[str, list[str]]:
    """The user's pairs with their turns: the key index's, and those `bekannt` names."""
    bekannt = bekannt or {}
    out = {}
    for c in sorted(await schluessel_index.paare(r, user_id) | set(bekannt)):
        out[c] = sorted(set(await schluessel_index.turns(r, user_id, c)) | set(bekannt.get(c, ())))
    return out


async def paare_von(r: Redis, user_id: str, bekannt: dict[str, list[str]] | None = None) -> list[str]:
    """The characters of a user's pairs: the key index's, and those `bekannt` names."""
    return sorted(await _paare(r, user_id, bekannt))


async def _vorhanden(r: Redis, names: list[str], chunk: int = 1000) -> list[str]:
    """Those of the names that exist (EXISTS, pipelined)."""
    found: list[str] = []
    for i in range(0, len(names), chunk):
        part = names[i:i + chunk]
        async with r.pipeline(transaction=False) as p:
            for k in part:
                p.exists(k)
            hits = await p.execute()
        found += [k for k, hit in zip(part, hits) if hit]
    return found


async def _keys_named(r: Redis, user_id: str, paare: dict[str, list[str]]) -> dict[str, list[str]]:
    """A user's keys by family: each family's names of the user's pairs and turns, those that exist."""
    found: dict[str, list[str]] = {}
    for family in FAMILIES:
        names = (family.namen(user_id, None) if family.user_only else
                 [n for c, turns in paare.items() for n in family.namen(user_id, c, turns)])
        found[f"redis:{family.prefix}"] = await _vorhanden(r, names)
    return found


async def _bestand(r: Redis, scope: Scope, bekannt: dict[str, list[str]] | None = None,
                   ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The scope's keys by family, and its entries in the shared structures by structure. A user's
    keys by name (`bekannt`: the pairs and turns Postgres holds, `bekannte_paare`), a character's by SCAN."""
    if scope.user_id is None:
        return await _keys_scan(r, scope), await _shared(r, scope)
    paare = await _paare(r, scope.user_id, bekannt)
    return await _keys_named(r, scope.user_id, paare), await _shared(r, scope, paare)


async def _keys_scan(r: Redis, scope: Scope) -> dict[str, list[str]]:
    """A character's keys: SCAN, one pattern per family (no index lists a character's users)."""
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


async def _registry(r: Redis, scope: Scope, paare: Iterable[str] | None) -> dict[str, list[str]]:
    """The scope's entries among the live and the evicted pairs: by name for a user's pairs
    (`paare`), by reading them all for a character's."""
    if paare is None:
        return {LIVE_PAIRS: [_s(f) for f in await r.hkeys(LIVE_PAIRS) if scope.holds(*_pair_of(_s(f)))],
                EVICTED_PAIRS: [_s(m) for m in await r.zrange(EVICTED_PAIRS, 0, -1) if scope.holds(*_pair_of(_s(m)))]}
    names = [f"pair:{scope.user_id}:{c}" for c in paare]
    async with r.pipeline(transaction=False) as p:
        for n in names:
            p.hexists(LIVE_PAIRS, n)
            p.zscore(EVICTED_PAIRS, n)
        hits = await p.execute()
    return {LIVE_PAIRS: [n for i, n in enumerate(names) if hits[2 * i]],
            EVICTED_PAIRS: [n for i, n in enumerate(names) if hits[2 * i + 1] is not None]}


async def _shared(r: Redis, scope: Scope, paare: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Entries of the shared structures that belong to the scope, by structure (`paare`: the
    user's characters, for a user's scope)."""
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
    out.update(await _registry(r, scope, paare))
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


async def count_keys(r: Redis, user_id: str | None = None, character_id: str | None = None, *,
                     bekannt: dict[str, list[str]] | None = None) -> dict[str, int]:
    """Keys per key family and entries per shared structure in the scope (`bekannt`: for a user,
    the pairs and turns Postgres holds, `bekannte_paare`)."""
    keys, shared = await _bestand(r, Scope(user_id, character_id), bekannt)
    out = {k: len(v) for k, v in keys.items()}
    out.update({f"redis:{k}": len(v) for k, v in shared.items()})
    return out


async def erase_keys(r: Redis, user_id: str | None = None, character_id: str | None = None, *,
                     bekannt: dict[str, list[str]] | None = None) -> dict[str, int]:
    """Erase the scope's Redis data; returns what went, counted as `count_keys` counts. The
    queued jobs go first, so no worker writes the scope's data again afterwards."""
    scope = Scope(user_id, character_id)
    keys, shared = await _bestand(r, scope, bekannt)
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
    for family, names in keys.items():
        if names:
            await r.delete(*names)
        out[family] = len(names)
    if character_id is not None:  # the character leaves her users' lists of pairs
        users = {o[0] for f in FAMILIES for k in keys.get(f"redis:{f.prefix}", ()) if (o := f.owner(k))}
        for u in users:
            await r.srem(schluessel_index.paare_key(u), character_id)
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


async def export_keys(r: Redis, user_id: str, bekannt: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """A user's Redis data: every key of theirs by name with its value (the short-term memory's
    vectors left out, like the tables' embeddings), and the jobs still queued for them.
    `bekannt`: the pairs and turns Postgres holds (`bekannte_paare`)."""
    keys, shared = await _bestand(r, Scope(user_id=user_id), bekannt)
    out: dict[str, Any] = {}
    for names in keys.values():
        for key in names:
            if not key.endswith(":vectors"):
                out[key] = await _value(r, key)
    for stream, name in ((outbox.OUTBOX_STREAM, "outbox"), (outbox.DEAD_STREAM, "dead_letters")):
        if shared[name]:
            async with r.pipeline(transaction=False) as p:
                for i in shared[name]:
                    p.xrange(stream, i, i)
                got = [e for entries in await p.execute() for e in entries]
            out[stream] = [json.loads(_s(f.get(b"job") or f.get("job") or b"{}")) for _, f in got]
    for key in IMPULSES_DUE:
        if shared[key]:
            out[key] = [json.loads(m) for m in shared[key]]
    return out
