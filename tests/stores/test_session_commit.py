"""A turn is committed atomically and at most once per turn_id."""
import asyncio
import uuid

from core.wire import PushedMessage
from memory import session
from memory.outbox import OUTBOX_STREAM
from tests.commit_jobs import commit, entry, turn_job


async def _scenario(url):
    from redis.asyncio import Redis

    r = Redis.from_url(url)
    try:
        user, turn = f"s-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        before = await r.xlen(OUTBOX_STREAM)
        def c(t: str, reply: str = "a"):
            return commit(user, "nova", t, reply=reply, text="x", jobs=[turn_job(user, "nova", t, "x", reply)],
                          keep_turns=4, ttl_s=60)

        first = c(turn)
        assert await session.commit_turn(r, first) is True
        assert await session.commit_turn(r, c(turn, "b")) is False
        assert await session.count_turns(r, user, "nova") == 2
        assert await r.xlen(OUTBOX_STREAM) == before + 1
        assert (await session.stored_result(r, user, "nova", turn)).body() == first.result.body()
        # the list keeps the newest keep_turns entries, trimmed a block at a time (so a position in the
        # list stays on its block: the history windows move in blocks, memory/session.FENSTER_BLOCK)
        b, lengths = session.FENSTER_BLOCK, []
        for i in range(2 * b):
            await session.commit_turn(r, c(f"t{i}", f"a{i}"))
            lengths.append(await session.count_turns(r, user, "nova"))
        assert all(4 <= n < 4 + b for n in lengths), lengths
        assert any(n < m for m, n in zip(lengths, lengths[1:]))  # it was trimmed, by whole blocks (below)
        assert all((2 + 2 * (i + 1) - n) % b == 0 for i, n in enumerate(lengths)), lengths
        turns = await session.load_turns(r, user, "nova", 100)
        assert turns[-1]["inhalt"] == f"a{2 * b - 1}"
        assert await r.ttl(session.result_key(user, "nova", turn)) > 0
        assert await session.get_summary(r, user, "nova") is None
        await session.set_summary(r, user, "nova", "Sie sprachen ueber Hunde.")
        assert await session.get_summary(r, user, "nova") == "Sie sprachen ueber Hunde."
    finally:
        await r.aclose()


def test_commit_once(stores):
    asyncio.run(_scenario(stores.redis_url))


def _push(turn_id: str) -> PushedMessage:
    return PushedMessage(turn_id=turn_id, herkunft="eigener_impuls", character_id="nova", character_name="Nova",
                         reply="Ich dachte an dich.", eigener_gedanke="an ihn denken", created_at="2026-12-06T06:00:00+00:00")


async def _push_scenario(url):
    from redis.asyncio import Redis

    r = Redis.from_url(url)
    try:
        user = f"p-{uuid.uuid4().hex[:8]}"
        def c(t: str, **kw):
            return commit(user, "nova", t, text=None, jobs=[turn_job(user, "nova", t, "x", "a")], keep_turns=20,
                          ttl_s=60, **kw)

        assert await session.push_cursor_now(r, user, "nova") == "0"
        assert await session.commit_turn(r, c("u1")) is True  # no push: a reply to the human
        assert await session.read_pushed(r, user, "nova", "0") == []
        waiting = asyncio.create_task(session.read_pushed(r, user, "nova", "0", block_ms=5000))
        await asyncio.sleep(0.2)
        assert await session.commit_turn(r, c("i1", push=_push("i1"))) is True
        (first, msg), = await asyncio.wait_for(waiting, 6)
        assert msg == _push("i1").model_dump()
        # a repeated commit of the same turn pushes nothing again
        assert await session.commit_turn(r, c("i1", push=_push("i1"))) is False
        assert await session.commit_turn(r, c("i2", push=_push("i2"))) is True
        assert [m["turn_id"] for _, m in await session.read_pushed(r, user, "nova", "0")] == ["i1", "i2"]
        assert [m["turn_id"] for _, m in await session.read_pushed(r, user, "nova", first)] == ["i2"]
        assert await session.push_cursor_now(r, user, "nova") != first
        try:
            await session.read_pushed(r, user, "nova", "$")
        except ValueError as e:
            assert "cursor" in str(e)
        else:
            raise AssertionError("an invalid cursor was accepted")
    finally:
        await r.aclose()


def test_unasked_messages_are_pushed_once_with_their_commit(stores):
    asyncio.run(_push_scenario(stores.redis_url))


async def _annotate_scenario(url):
    from redis.asyncio import Redis

    r = Redis.from_url(url)
    try:
        user = f"a-{uuid.uuid4().hex[:8]}"
        for t in ("t1", "t2"):
            await session.commit_turn(r, commit(user, "nova", t, reply="a", text=f"x{t}", keep_turns=20, ttl_s=60,
                                                jobs=[turn_job(user, "nova", t, f"x{t}", "a")]).model_copy(
                update={"mensch": entry(f"x{t}", t, intentionen=[])}))
        felder = {"kern": "Bello ist krank", "intentionen": ["hilferuf"]}
        assert await session.annotate_turn(r, user, "nova", "t1", felder)
        assert await session.annotate_turn(r, user, "nova", "t1", felder)  # again: the same turn, unchanged
        turns = await session.load_turns(r, user, "nova", 10)
        assert [(t["turn_id"], t["rolle"], t.get("kern")) for t in turns] == [
            ("t1", "user", "Bello ist krank"), ("t1", "assistant", None), ("t2", "user", None), ("t2", "assistant", None)]
        assert turns[0]["intentionen"] == ["hilferuf"] and turns[2]["intentionen"] == []
        assert not await session.annotate_turn(r, user, "nova", "gibt-es-nicht", felder)
    finally:
        await r.aclose()


def test_salience_annotates_the_stored_turn_of_the_human(stores):
    asyncio.run(_annotate_scenario(stores.redis_url))


def test_the_window_read_starts_on_a_block(stores):
    """`load_window` returns the newest n entries and the rest of their block, in one read; as the
    session grows the first entry it returns stays the same for a block (the prompts' prefix)."""
    from redis.asyncio import Redis

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            user, firsts = f"w-{uuid.uuid4().hex[:8]}", []
            for i in range(20):
                await session.commit_turn(r, commit(user, "nova", f"t{i}", reply=f"a{i}", text=f"u{i}",
                                                    keep_turns=500, ttl_s=60))
                window = await session.load_window(r, user, "nova", 6)
                firsts.append((len(window), window[0]["inhalt"], window[-1]["inhalt"]))
                decke = await session.load_window(r, user, "nova", 10, hoechstens=True)
                ceilings.append((len(decke), decke[0]["inhalt"] if decke else None))
            return firsts
        finally:
            await r.aclose()

    ceilings: list[tuple[int, str | None]] = []
    firsts = asyncio.run(go())
    b = session.FENSTER_BLOCK
    # the session window (SESSION_MAX_TURNS a ceiling, seed 004 §4.1): never more than n entries,
    # never fewer than n - b + 1 once the session holds n, and its start moves a block at a time
    for i, (n, first) in enumerate(ceilings):
        total = 2 * (i + 1)
        assert n <= 10 and (n >= 10 - b + 1 if total >= 10 else n == total)
        start = total - n
        assert start % b == 0 and first == f"u{start // 2}"
    assert max(n for n, _ in ceilings) == 10
    for i, (n, first, last) in enumerate(firsts):
        total = 2 * (i + 1)
        start = session.fenster_start(total, 6)
        assert last == f"a{i}" and n == total - start and min(total, 6) <= n < 6 + b
        assert first == (f"u{start // 2}" if start % 2 == 0 else f"a{start // 2}")
    assert len({f for _, f, _ in firsts}) == session.fenster_start(40, 6) // b + 1
