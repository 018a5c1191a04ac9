"""The key index (memory/schluessel_index.py): a user's export, count and erasure name the user's
keys instead of walking the keyspace, and taking a turn back reads the shared streams and the
node errors only from the turn's first write on — whatever the other users hold. Each scenario
has a Redis database of its own, with thousands of keys and entries of other users beside one
user's data, written the way the system writes it; Redis' own command statistics say what ran."""
import asyncio
import json
import time
import uuid
from datetime import datetime, timezone

from actors.background import delegieren, erledigt_key
from memory import erasure, kzg, outbox, redis_vorher, ruecknahme, schluessel_index, session
from pipeline.nodes.gv_node import gv_key
from tests.conftest import unit
from core.wire import HumanCommit, PushedMessage
from tests.commit_jobs import commit, entry, turn_job

ANDERE = 1000
"""Other users, five keys each: 5,000 keys that are nobody's business of the scenario's user."""


async def _redis(stores, db: int):
    from redis.asyncio import Redis

    r = Redis.from_url(stores.redis_url, db=db)
    await r.flushdb()
    return r


async def _calls(r, command: str) -> int:
    stats = await r.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def _andere(r) -> None:
    async with r.pipeline(transaction=False) as p:
        for i in range(ANDERE):
            u = f"anders{i}"
            for key in (session.session_key(u, "nova"), session.result_key(u, "nova", f"t{i}"),
                        f"bg:done:{u}:nova:t{i}", f"vorher:{u}:nova:t{i}", f"pair:seq:{u}:nova"):
                p.set(key, "1")
        await p.execute()


def _push(ch: str, t: str) -> PushedMessage:
    return PushedMessage(turn_id=t, herkunft="self_trigger", character_id=ch, character_name="Nova", reply="Hallo du",
                         created_at="2026-12-06T06:00:00+00:00")


async def _commit(r, user: str, ch: str, t: str, push: PushedMessage | None = None) -> None:
    job = turn_job(user, ch, t, "Hallo", "Hallo du")
    await session.commit_turn(r, commit(user, ch, t, reply="Hallo du", text="Hallo", jobs=[job], keep_turns=500,
                                        ttl_s=3600, push=push,
                                        zustand={"emotion": "freude", "stand": datetime.now(timezone.utc)}))


async def _paar(r, user: str, ch: str) -> None:
    """A pair's keys, written by the system's writers: commits (a whole turn, a human's turn on its
    own), before-images, a delegation, the short-term memory, the markers of the background."""
    t1, t2, t3 = (uuid.uuid4().hex for _ in range(3))
    await _commit(r, user, ch, t1, push=_push(ch, t1))
    await session.commit_human(r, HumanCommit(user_id=user, character_id=ch, turn_id=t2, mensch=entry("Noch da?", t2),
                                              keep_turns=500, ttl_s=3600))
    await redis_vorher.festhalten(r, user, ch, t3, gv_key(user, ch))
    await r.hset(gv_key(user, ch), "gv_detail", "Segeln")
    await delegieren(r, user, ch, t1, "Segeln nachlesen")
    await kzg.add_entry(r, user, ch, "Tom segelt", unit(1), quelle=t1, entry_id=f"turn-{t1}")
    await r.set(erledigt_key(user, ch, t1), "1", ex=3600)
    await r.set(f"aufgriff:geplant:{user}:{ch}:{t1}", "1", ex=3600)


async def _gelesen(r) -> dict[str, int]:
    return {c: await _calls(r, c) for c in ("scan", "keys")}


async def _export_scenario(stores):
    r = await _redis(stores, 9)
    try:
        await _andere(r)
        user = f"tom{uuid.uuid4().hex[:6]}"
        for ch in ("nova", "mira"):
            await _paar(r, user, ch)
        scope = erasure.Scope(user_id=user)
        named, _ = await erasure._bestand(r, scope)
        # the keyspace walked, as the export did it before: the same keys, family by family
        walked = await erasure._keys_scan(r, scope)
        assert {f: sorted(k) for f, k in walked.items()} == {f: sorted(k) for f, k in named.items()}
        filled = {f for f, keys in named.items() if keys}
        assert {"redis:session", "redis:turnres", "redis:turn:mensch", "redis:push", "redis:nova:zustand", "redis:kzg",
                "redis:gv:detail", "redis:bg:done", "redis:bg:delegation", "redis:delegationen",
                "redis:aufgriff:geplant", "redis:vorher", "redis:pair:turns", "redis:user:paare"} <= filled, filled

        before = await _gelesen(r)
        exported = await erasure.export_keys(r, user)
        counted = await erasure.count_keys(r, user_id=user)
        gone = await erasure.erase_keys(r, user_id=user)
        assert await _gelesen(r) == before  # no SCAN, no KEYS: nothing of the other users' keys was walked
        assert set(exported) >= {k for keys in named.values() for k in keys if not k.endswith(":vectors")}
        assert not any(k.startswith("anders") or ":anders" in k for k in exported)
        assert {k: n for k, n in gone.items() if n} == {k: n for k, n in counted.items() if n}
        assert not any((await erasure.count_keys(r, user_id=user)).values())
        assert await r.dbsize() == 5 * ANDERE + 1  # every other user's key is still there, and the outbox
        await erasure._keys_scan(r, scope)
        assert (await _gelesen(r))["scan"] > before["scan"]  # the statistics do count a walk
    finally:
        await r.aclose()


def test_a_users_export_and_erasure_name_their_keys_and_walk_nobody_elses(stores):
    asyncio.run(_export_scenario(stores))


def _counting(r, name: str, seen: dict[str, int]) -> None:
    """Count the entries each read of `name` returns (the work a read did on the shared structure)."""
    original = getattr(r, name)

    async def read(*args, **kwargs):
        got = await original(*args, **kwargs)
        seen[name] = seen.get(name, 0) + len(got)
        return got

    setattr(r, name, read)


async def _rewind_scenario(stores):
    r = await _redis(stores, 10)
    try:
        await outbox.ensure_group(r)
        user, ch = f"tom{uuid.uuid4().hex[:6]}", "nova"
        alt_ms = int((time.time() - 3600) * 1000)
        async with r.pipeline(transaction=False) as p:  # an hour of other users' jobs and errors, and the pair's pushes
            for i in range(5000):
                job = {"kind": "turn", "turn": {"user_id": f"anders{i}", "character_id": "nova", "turn_id": f"t{i}"}}
                p.xadd(outbox.OUTBOX_STREAM, {"job": json.dumps(job)}, id=f"{alt_ms}-{i}")
                p.zadd("errors:nodes", {f"{alt_ms / 1000:.6f}:responder:anders{i}:nova:t{i}": alt_ms / 1000})
            for i in range(900):  # fewer than the stream keeps (`push_keep`)
                p.xadd(session.push_key(user, ch), {"nachricht": json.dumps({"turn_id": f"alt{i}"})}, id=f"{alt_ms}-{i}")
            await p.execute()
        t = uuid.uuid4().hex
        await schluessel_index.merken(r, user, ch, t)  # the turn's first write (a before-image, a node error)
        await r.zadd("errors:nodes", {f"{time.time():.6f}:responder:{user}:{ch}:{t}": time.time()})
        await _commit(r, user, ch, t, push=_push(ch, t))
        await delegieren(r, user, ch, t, "Segeln nachlesen")
        assert await r.xlen(outbox.OUTBOX_STREAM) == 5001

        seen: dict[str, int] = {}
        for name in ("xrange", "zrange", "zrangebyscore"):
            _counting(r, name, seen)
        before = await _gelesen(r)
        assert await ruecknahme.zaun(r, user, ch, [t], warten_s=1) == 1
        out = await ruecknahme.zuruecknehmen_redis(r, user, ch, [t])
        assert await _gelesen(r) == before
        assert (out["push"], out["errors:nodes"], out["schluessel"]) == (1, 1, 2)  # the result and the delegation
        # the reads began at the turn: none of the hour's 5,000 jobs, 5,000 errors and 900 pushes
        assert seen.get("xrange", 0) <= 10 and seen.get("zrangebyscore", 0) <= 10, seen
        assert await r.xlen(outbox.OUTBOX_STREAM) == 5000 and await r.zcard("errors:nodes") == 5000
        assert await r.xlen(session.push_key(user, ch)) == 900

        # a turn the index does not know (written before it existed): read from the beginning, found all the same
        alt = uuid.uuid4().hex
        await outbox.enqueue(r, {"kind": "turn", "turn": {"user_id": user, "character_id": ch, "turn_id": alt}})
        assert await ruecknahme.zaun(r, user, ch, [alt], warten_s=1) == 1
        assert await r.xlen(outbox.OUTBOX_STREAM) == 5000
    finally:
        await r.aclose()


def test_taking_a_turn_back_reads_the_streams_from_the_turn_on(stores):
    asyncio.run(_rewind_scenario(stores))
