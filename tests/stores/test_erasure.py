"""Erasure (memory/erasure.py): everything stored about a user, or about every pair of a character,
counted in every table and key family, and erased — to zero for the scope, nothing of anyone else.

The data is written the way the system writes it: a turn's record and log rows through the
outbox worker's write, profiles, directives, notes and appointments through their store
functions, the Redis keys under the names their own modules build, and jobs, impulses, live
pairs and node errors in the shared structures."""
import asyncio
import json
import time
import uuid
from datetime import datetime, timezone

from actors.background import delegation_key, erledigt_key
from actors.registry import pair_name
from memory import ausstehender_auftrag, beziehung, erasure, notizen, outbox, pg, session, timeline
from memory.kzg import _k as kzg_key
from pipeline.nodes.gv_node import gv_key
from core.wire import read_job
from tests.commit_jobs import result_dict


def _turn_job(user: str, ch: str) -> dict:
    turn_id = uuid.uuid4().hex
    return {"kind": "turn", "turn": {
        "user_id": user, "character_id": ch, "turn_id": turn_id, "user_text": "Ich heisse Tom.", "reply": "Hallo Tom.",
        "user_embedding": None, "result": result_dict(user, ch, turn_id, "Hallo Tom."), "created_at": datetime.now(timezone.utc).isoformat()},
        "log": [{"seq": 0, "node": "responder", "art": "switch", "entscheidung": "responder.ergebnis",
                 "outcome": "antwort", "inputs": {}, "at": datetime.now(timezone.utc).isoformat()}]}


async def _fill(pool, r, user: str, ch: str) -> None:
    """One pair's data in Postgres and Redis, and its entries in the shared structures."""
    job = _turn_job(user, ch)
    t = job["turn"]["turn_id"]
    await pg.write_turn_job(pool, read_job(job))
    await beziehung.set_profile(pool, user, ch, mensch_kern="segelt gern")
    await beziehung.add_directive(pool, user, ch, "Sprich mich mit Du an.")
    await notizen.create(pool, user, f"Einkauf {ch}", "Milch")
    await timeline.add(pool, user, ch, "Zahnarzt", datetime(2026, 12, 7, 14), "Europe/Berlin")
    for key in (session.session_key(user, ch), f"delegationen:{user}:{ch}"):
        await r.rpush(key, json.dumps({"inhalt": "Ich heisse Tom."}))
    for key in (session.result_key(user, ch, t), session.mensch_key(user, ch, t), session.zustand_key(user, ch),
                erledigt_key(user, ch, t), delegation_key(user, ch, t, 0), f"pair:seq:{user}:{ch}",
                f"pair:seqstarted:{user}:{ch}", f"selftrigger:{user}:{ch}"):
        await r.set(key, "1")
    await r.hset(kzg_key(user, ch, "entries"), "turn-" + t, json.dumps({"inhalt": "Tom segelt."}))
    await r.hset(gv_key(user, ch), "gv_detail", "Segeln")
    await r.hset(ausstehender_auftrag.schluessel(user, ch), "turn_id", t)
    await r.xadd(session.push_key(user, ch), {"nachricht": json.dumps({"reply": "Hallo Tom."})})
    await outbox.enqueue(r, job)
    await r.xadd(outbox.DEAD_STREAM, {"job": json.dumps(job), "from": "0-1", "reason": "test"})
    await r.zadd("impulse:faellig", {json.dumps({"id": uuid.uuid4().hex, "user_id": user, "character_id": ch,
                                                "gedanke": "Ob Tom segelt?"}): time.time() + 3600})
    await r.hset(erasure.LIVE_PAIRS, pair_name(user, ch), time.time())
    await r.zadd(erasure.NODE_ERRORS, {f"{time.time():.6f}:responder:{user}:{ch}:{t}": time.time()})


async def _bekannt(pool, scope: dict) -> dict | None:
    """What the callers pass for a user's scope: the pairs and turns Postgres holds."""
    return await erasure.bekannte_paare(pool, scope["user_id"]) if "user_id" in scope else None


async def _count(pool, r, **scope) -> dict[str, int]:
    return {**await erasure.count_rows(pool, **scope),
            **await erasure.count_keys(r, **scope, bekannt=await _bekannt(pool, scope))}


async def _scenario(stores):
    from redis.asyncio import Redis

    r = Redis.from_url(stores.redis_url)
    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    try:
        await outbox.ensure_group(r)
        tag = uuid.uuid4().hex[:6]
        # `seq` and `turn` are ids that also appear as words in key names: they catch nobody else's keys
        erased, kept, other = f"seq{tag}", f"turn{tag}", f"ch{tag}"
        for user, ch in ((erased, "nova"), (erased, other), (kept, "nova"), (kept, other)):
            await _fill(pool, r, user, ch)
        await pg.create_api_key(pool, erased)

        before = await _count(pool, r, user_id=erased)
        written = {k for k, n in before.items() if n}
        # every table the fill writes and every key family and shared structure it touches
        assert {"pg:turns", "pg:pipeline_log", "pg:pair_profiles", "pg:direktiven", "pg:notizen", "pg:timeline",
                "pg:api_keys", "redis:session", "redis:kzg", "redis:turnres", "redis:turn:mensch", "redis:push",
                "redis:nova:zustand", "redis:gv:detail", "redis:auftrag:ausstehend", "redis:bg:done",
                "redis:bg:delegation", "redis:delegationen", "redis:pair:seq", "redis:pair:seqstarted",
                "redis:selftrigger", "redis:outbox", "redis:dead_letters", "redis:impulse:faellig",
                "redis:pairs:live", "redis:errors:nodes"} <= written, sorted(set(before) - written)
        assert before["redis:session"] == 2 and before["pg:turns"] == 2  # both of the user's pairs
        kept_before = await _count(pool, r, user_id=kept)

        # the export holds what the count counts, the person's words among it, no vectors nor key hashes
        turns = await erasure.export_table(pool, erased, "turns")
        assert sorted(t["character_id"] for t in turns) == sorted(["nova", other])
        assert {t["user_text"] for t in turns} == {"Ich heisse Tom."} and "user_embedding" not in turns[0]
        keys = await erasure.export_table(pool, erased, "api_keys")
        assert len(keys) == 1 and "key_hash" not in keys[0]
        assert len(await erasure.export_table(pool, erased, "notizen")) == 2
        held = await erasure.export_keys(r, erased, await erasure.bekannte_paare(pool, erased))
        assert held[session.session_key(erased, "nova")] == [json.dumps({"inhalt": "Ich heisse Tom."})]
        assert {j["turn"]["user_id"] for j in held[outbox.OUTBOX_STREAM]} == {erased}
        assert not any(k.startswith(f"session:{kept}") for k in held)

        gone = await erasure.erase_keys(r, user_id=erased, bekannt=await erasure.bekannte_paare(pool, erased))
        gone.update(await erasure.erase_rows(pool, user_id=erased))
        assert {k: n for k, n in gone.items() if n} == {k: n for k, n in before.items() if n}
        assert not any((await _count(pool, r, user_id=erased)).values())
        assert await _count(pool, r, user_id=kept) == kept_before
        assert (await r.xpending(outbox.OUTBOX_STREAM, outbox.GROUP))["pending"] >= 0

        # a character's scope: every pair with her goes, the users' notes and keys stay
        before = await _count(pool, r, character_id=other)
        assert before["pg:turns"] == 1 and before["redis:session"] == 1 and before["pg:notizen"] == 0
        notes_before = len(await notizen.proactive_listing(pool, kept))
        await erasure.erase_keys(r, character_id=other)
        await erasure.erase_rows(pool, character_id=other)
        assert not any((await _count(pool, r, character_id=other)).values())
        assert len(await notizen.proactive_listing(pool, kept)) == notes_before
        left = await _count(pool, r, user_id=kept)
        assert left["pg:turns"] == 1 and left["redis:session"] == 1 and left["redis:pairs:live"] == 1
    finally:
        await pool.close()
        await r.aclose()


def test_erasure_counts_every_store_and_leaves_nothing_of_the_scope_and_all_of_the_rest(migrated):
    asyncio.run(_scenario(migrated))
