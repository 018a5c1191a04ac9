"""The outbox: acknowledged only after the write committed; a job left pending by a dead
consumer is re-claimed; a job that keeps failing goes to the dead-letter stream."""
import asyncio
import json
import uuid

from memory import outbox, pg
from memory.outbox import GROUP, OutboxConsumer


def _job(user):
    turn_id = uuid.uuid4().hex
    return {"kind": "turn", "turn": {
        "user_id": user, "character_id": "nova", "turn_id": turn_id, "user_text": "hallo", "reply": "hi",
        "user_embedding": [0.1] * 384, "result": {"reply": "hi"}, "created_at": "2026-11-30T10:00:00+00:00"},
        "log": [{"seq": 0, "node": "responder", "art": "switch", "entscheidung": "responder.ergebnis",
                 "outcome": "antwort", "inputs": {"zeichen": 2}, "at": "2026-11-30T10:00:00+00:00"}]}


async def _scenario(stores):
    from redis.asyncio import Redis

    r = Redis.from_url(stores.redis_url)
    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    try:
        # a stream of this test's own: the system's workers consume the real one
        stream, dead_stream = f"test:outbox:{uuid.uuid4().hex[:8]}", f"test:dead:{uuid.uuid4().hex[:8]}"
        await outbox.ensure_group(r, stream)
        user = f"ob-{uuid.uuid4().hex[:8]}"
        job = _job(user)
        await outbox.enqueue(r, job, stream)
        # a worker reads the job and dies before it writes: the job stays pending with it
        got = await r.xreadgroup(GROUP, "dead-worker", {stream: ">"}, count=1)
        assert got and len(got[0][1]) == 1
        assert (await r.xpending(stream, GROUP))["pending"] == 1

        async def write(j):
            await pg.write_turn_job(pool, j)

        alive = OutboxConsumer(r, "alive-worker", write, claim_idle_ms=300, block_ms=50, stream=stream,
                               dead_stream=dead_stream)
        assert await alive.step() == 0  # not idle long enough yet: not taken over
        assert await pg.turn_record(pool, user, "nova", job["turn"]["turn_id"]) is None
        await asyncio.sleep(0.4)
        assert await alive.step() == 1
        rec = await pg.turn_record(pool, user, "nova", job["turn"]["turn_id"])
        assert rec["reply"] == "hi" and rec["embedding_dim"] == 384
        rows = await pg.pipeline_rows(pool, user, "nova")
        assert [(x["entscheidung"], x["outcome"]) for x in rows] == [("responder.ergebnis", "antwort")]
        assert (await r.xpending(stream, GROUP))["pending"] == 0

        # the same job again (a worker died after commit, before ack): written once
        await outbox.enqueue(r, job, stream)
        assert await alive.step() == 1
        assert await pg.count_turn_records(pool, user, "nova") == 1
        assert len(await pg.pipeline_rows(pool, user, "nova")) == 1

        # a failing write is not acknowledged, and after MAX_DELIVERIES it is dead-lettered
        async def failing(j):
            raise RuntimeError("database down")

        bad = OutboxConsumer(r, "bad-worker", failing, claim_idle_ms=0, block_ms=50, stream=stream,
                             dead_stream=dead_stream)
        dead_before = await r.xlen(dead_stream)
        await outbox.enqueue(r, _job(user), stream)
        assert await bad.step() == 0
        assert (await r.xpending(stream, GROUP))["pending"] == 1
        for _ in range(outbox.MAX_DELIVERIES):
            await bad.step()
        assert (await r.xpending(stream, GROUP))["pending"] == 0
        assert await r.xlen(dead_stream) == dead_before + 1
        dead = await r.xrevrange(dead_stream, count=1)
        assert json.loads(dead[0][1][b"job"])["turn"]["user_id"] == user
    finally:
        await pool.close()
        await r.aclose()


def test_outbox_reclaim_ack_after_commit_and_dead_letter(migrated):
    asyncio.run(_scenario(migrated))


def test_heartbeat_never_takes_a_job_back_and_the_group_heals_and_the_stream_is_trimmed(stores):
    from redis.asyncio import Redis

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            stream = f"test:outbox:{uuid.uuid4().hex[:8]}"
            await outbox.ensure_group(r, stream)
            await outbox.enqueue(r, {"kind": "x"}, stream)
            got = await r.xreadgroup(GROUP, "slow", {stream: ">"}, count=1)
            entry = got[0][1][0][0]
            slow = OutboxConsumer(r, "slow", None, claim_idle_ms=150, block_ms=10, stream=stream)
            # another worker re-claims the job (slow was idle too long): slow's heartbeat must not take it back
            await r.xclaim(stream, GROUP, "rescuer", min_idle_time=0, message_ids=[entry], justid=True)
            beat = asyncio.ensure_future(slow._heartbeat(entry))
            await asyncio.sleep(0.3)
            assert beat.done()  # it noticed and stopped
            owner = (await r.xpending_range(stream, GROUP, min=entry, max=entry, count=1))[0]["consumer"]
            assert owner in (b"rescuer", "rescuer")
            # while it still holds a job, the heartbeat keeps it fresh
            await outbox.enqueue(r, {"kind": "y"}, stream)
            mine = (await r.xreadgroup(GROUP, "slow", {stream: ">"}, count=1))[0][1][0][0]
            beat = asyncio.ensure_future(slow._heartbeat(mine))
            await asyncio.sleep(0.3)
            info = (await r.xpending_range(stream, GROUP, min=mine, max=mine, count=1))[0]
            assert not beat.done() and info["time_since_delivered"] < 150
            beat.cancel()

            # trimming keeps every job still pending or undelivered, removes what is done
            done = []

            async def handle(job):
                done.append(job["kind"])

            worker = OutboxConsumer(r, "w", handle, claim_idle_ms=60_000, block_ms=10, stream=stream)
            await r.xack(stream, GROUP, entry, mine)
            for k in ("a", "b", "c"):
                await outbox.enqueue(r, {"kind": k}, stream)
            await worker.step()
            await outbox.enqueue(r, {"kind": "later"}, stream)  # not yet delivered: must stay
            assert await outbox.trim(r, stream) == 5
            assert [json.loads(f[b"job"])["kind"] for _, f in await r.xrange(stream)] == ["later"]
            assert done == ["a", "b", "c"]

            # Redis lost its data: the group is gone; the next round makes it again
            await r.delete(stream)
            assert await worker.step() == 0
            await outbox.enqueue(r, {"kind": "nach dem Neustart"}, stream)
            assert await worker.step() == 1 and done[-1] == "nach dem Neustart"
        finally:
            await r.aclose()

    asyncio.run(go())
