"""The outbox: acknowledged only after the write committed; a job left pending by a dead
consumer is re-claimed; a job that keeps failing goes to the dead-letter stream."""
import asyncio
import json
import uuid

from memory import outbox, pg
from memory.outbox import GROUP, OutboxConsumer
from core.wire import read_job
from tests.commit_jobs import result_dict


def _job(user):
    turn_id = uuid.uuid4().hex
    return {"kind": "turn", "turn": {
        "user_id": user, "character_id": "nova", "turn_id": turn_id, "user_text": "hallo", "reply": "hi",
        "user_embedding": [0.1] * 384, "result": result_dict(user, "nova", turn_id, "hi"), "created_at": "2026-11-30T10:00:00+00:00"},
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
            await pg.write_turn_job(pool, read_job(j))

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


def test_a_store_outage_waits_and_kills_no_job_and_dead_letters_replay_once(stores, monkeypatch):
    """Postgres away for longer than MAX_DELIVERIES tries: the job waits, pending, the consumer
    backs off, nothing is dead-lettered; once the store is back the job is done. A job that fails
    for a reason of its own is dead-lettered, listed with its reason and pair, and replayed exactly
    once."""
    import psycopg
    from redis.asyncio import Redis

    monkeypatch.setattr(outbox, "MAX_PAUSE_S", 0.05)

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            stream, dead = f"test:outbox:{uuid.uuid4().hex[:8]}", f"test:dead:{uuid.uuid4().hex[:8]}"
            await outbox.ensure_group(r, stream)
            state = {"away": True, "done": []}

            async def handle(job):
                if job["kind"] == "kaputt":
                    raise ValueError("a job of its own kind of wrong")
                if state["away"]:
                    raise psycopg.OperationalError("connection to server on socket failed: No such file")
                state["done"].append(job["turn"]["turn_id"])

            worker = OutboxConsumer(r, "w", handle, claim_idle_ms=0, block_ms=10, stream=stream, dead_stream=dead)
            job = _job("ausfall-user")
            await outbox.enqueue(r, job, stream)
            for _ in range(3 * outbox.MAX_DELIVERIES):
                assert await worker.step() == 0
            assert await r.xlen(dead) == 0 and (await r.xpending(stream, GROUP))["pending"] == 1
            assert worker.pause_s == 0.05  # backed off, within its bound
            state["away"] = False
            assert await worker.step() == 1 and state["done"] == [job["turn"]["turn_id"]]
            assert worker.pause_s == 0 and await r.hlen(outbox.FAILURES) == 0

            await outbox.enqueue(r, {"kind": "kaputt", "turn_id": "t-k", "state": {"stimulus": {
                "user_id": "ausfall-user", "character_id": "nova"}}}, stream)
            for _ in range(outbox.MAX_DELIVERIES):
                await worker.step()
            [letter] = await outbox.dead_letters(r, stream=dead)
            assert (letter["kind"], letter["user_id"], letter["character_id"], letter["turn_id"]) == \
                ("kaputt", "ausfall-user", "nova", "t-k")
            assert "ValueError: a job of its own kind of wrong (after 5 failures)" == letter["reason"]
            again = await outbox.replay(r, letter["id"], stream=stream, dead_stream=dead)
            assert again is not None and await outbox.replay(r, letter["id"], stream=stream, dead_stream=dead) is None
            assert await r.xlen(dead) == 0
            assert json.loads((await r.xrange(stream, again, again))[0][1][b"job"])["kind"] == "kaputt"
        finally:
            await r.aclose()

    asyncio.run(go())


def test_a_dead_letter_id_beyond_a_stream_id_is_no_dead_letter_not_an_error(stores):
    """Redis reads each half of a stream entry's id as an unsigned 64-bit number: a larger one is
    no dead letter (the replay route's 404), never Redis's error."""
    from redis.asyncio import Redis

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            stream, dead = f"test:outbox:{uuid.uuid4().hex[:8]}", f"test:dead:{uuid.uuid4().hex[:8]}"
            await r.xadd(dead, {"job": json.dumps({"kind": "x"}), "from": "1-0", "reason": "r"})
            for bad in ("99999999999999999999-1", "1-18446744073709551616", "18446744073709551616-0"):
                assert await outbox.replay(r, bad, stream=stream, dead_stream=dead) is None, bad
            assert await outbox.replay(r, "18446744073709551615-18446744073709551615", stream=stream,
                                       dead_stream=dead) is None  # the largest id: read, and not there
            assert await r.xlen(dead) == 1
        finally:
            await r.aclose()

    asyncio.run(go())


def test_outages_are_told_from_a_job_of_its_own_through_wrappers():
    import psycopg
    from psycopg_pool import PoolTimeout

    assert outbox.is_outage(psycopg.OperationalError("server closed the connection"))
    assert outbox.is_outage(PoolTimeout("couldn't get a connection after 30 s"))
    try:
        try:
            raise ConnectionRefusedError(111, "refused")
        except ConnectionRefusedError as e:
            raise RuntimeError("store call failed") from e
    except RuntimeError as wrapped:
        assert outbox.is_outage(wrapped)
    assert not outbox.is_outage(ValueError("bad job")) and not outbox.is_outage(KeyError("turn"))


def test_a_job_waiting_for_its_model_holds_up_no_other_and_is_given_up_in_the_end(stores):
    """A background job whose model is away (`ModelAway`) stays pending without a back-off, so the
    job behind it is done at once; it is delivered again after `claim_idle_ms`, counted apart from
    failures of its own, done once the model is back — and a job that finds the model away
    `MAX_MODEL_WAITS` times goes to the dead letters with the reason."""
    from ray.exceptions import ActorUnavailableError
    from redis.asyncio import Redis

    from pipeline.llm_json import ModelAway
    from pipeline.runner import NodeFailed

    def weg():
        try:
            raise ActorUnavailableError("the replica is unreachable", b"\0" * 16)
        except ActorUnavailableError as e:
            try:
                raise ModelAway("salience: the model is away") from e
            except ModelAway as m:
                return NodeFailed("salience", m)

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            stream, dead = f"test:outbox:{uuid.uuid4().hex[:8]}", f"test:dead:{uuid.uuid4().hex[:8]}"
            await outbox.ensure_group(r, stream)
            state = {"weg": True, "done": []}

            async def handle(job):
                if job["kind"] == "wartet" and state["weg"]:
                    raise weg()
                state["done"].append(job["kind"])

            worker = OutboxConsumer(r, "w", handle, claim_idle_ms=0, block_ms=10, stream=stream, dead_stream=dead)
            await outbox.enqueue(r, {"kind": "wartet"}, stream)
            await outbox.enqueue(r, {"kind": "dahinter"}, stream)
            assert await worker.step() == 1 and state["done"] == ["dahinter"]  # not held up
            [waiting] = await r.xpending_range(stream, GROUP, "-", "+", 10)
            entry = waiting["message_id"].decode()
            assert worker.pause_s == 0 and await r.hget(outbox.FAILURES, entry) is None  # no failure of its own
            assert await r.hget(outbox.MODEL_WAITS, entry) == b"1"
            state["weg"] = False
            assert await worker.step() == 1 and state["done"] == ["dahinter", "wartet"]
            assert await r.hget(outbox.MODEL_WAITS, entry) is None and await r.xlen(dead) == 0

            state["weg"] = True
            await outbox.enqueue(r, {"kind": "wartet"}, stream)
            for _ in range(outbox.MAX_MODEL_WAITS):
                await worker.step()
            [letter] = await outbox.dead_letters(r, stream=dead)
            assert letter["kind"] == "wartet" and letter["reason"].endswith(
                f"(the model away {outbox.MAX_MODEL_WAITS} times)")
            assert (await r.xpending(stream, GROUP))["pending"] == 0
            assert await r.hget(outbox.MODEL_WAITS, letter["from"]) is None
        finally:
            await r.aclose()

    asyncio.run(go())
