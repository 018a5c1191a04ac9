"""A turn is committed atomically and at most once per turn_id."""
import asyncio
import json
import uuid

from memory import session
from memory.outbox import OUTBOX_STREAM


async def _scenario(url):
    from redis.asyncio import Redis

    r = Redis.from_url(url)
    try:
        user, turn = f"s-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        before = await r.xlen(OUTBOX_STREAM)
        kw = dict(user_id=user, character_id="nova", turn_id=turn, result={"reply": "a"},
                  user_turn={"rolle": "user", "inhalt": "x"}, nova_turn={"rolle": "assistant", "inhalt": "a"},
                  job={"kind": "turn"}, keep_turns=4, ttl_s=60)
        assert await session.commit_turn(r, **kw) is True
        assert await session.commit_turn(r, **{**kw, "result": {"reply": "b"}}) is False
        assert await session.count_turns(r, user, "nova") == 2
        assert await r.xlen(OUTBOX_STREAM) == before + 1
        assert (await session.stored_result(r, user, "nova", turn)) == {"reply": "a"}
        # the list keeps the newest keep_turns entries
        for i in range(3):
            await session.commit_turn(r, **{**kw, "turn_id": f"t{i}"})
        turns = await session.load_turns(r, user, "nova", 10)
        assert len(turns) == 4
        assert await r.ttl(session.result_key(user, "nova", turn)) > 0
        assert await session.get_summary(r, user, "nova") is None
        await session.set_summary(r, user, "nova", "Sie sprachen ueber Hunde.")
        assert await session.get_summary(r, user, "nova") == "Sie sprachen ueber Hunde."
    finally:
        await r.aclose()


def test_commit_once(stores):
    asyncio.run(_scenario(stores.redis_url))
