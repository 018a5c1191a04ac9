"""Planned impulses are claimed, then acknowledged after their delivery (issue #15): two workers
never take the same one, and one whose worker died after taking it is due again once its claim ran
out — nothing is lost, on the real Redis."""
import asyncio
import time
import uuid

from redis.asyncio import Redis

from actors.background import faellige_impulse_nehmen, impuls_erledigt


def test_a_claimed_impulse_is_taken_once_and_comes_back_when_its_worker_died(stores):
    key = f"impulse:faellig:test-{uuid.uuid4().hex[:6]}"

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            await r.zadd(key, {b'{"id": "a"}': time.time() - 1, b'{"id": "later"}': time.time() + 3600})
            first, second = await asyncio.gather(faellige_impulse_nehmen(r, key, 5, claim_s=0.5),
                                                 faellige_impulse_nehmen(r, key, 5, claim_s=0.5))
            assert sorted(first + second) == [b'{"id": "a"}']  # one worker took it, the other nothing
            # that worker dies before acknowledging: nothing is due until the claim runs out ...
            assert await faellige_impulse_nehmen(r, key, 5, claim_s=0.5) == []
            await asyncio.sleep(0.6)
            # ... then it is due again and taken; acknowledged, it is gone for good
            again = await faellige_impulse_nehmen(r, key, 5, claim_s=60)
            assert again == [b'{"id": "a"}']
            await impuls_erledigt(r, key, again[0])
            await asyncio.sleep(0.1)
            assert await faellige_impulse_nehmen(r, key, 5) == []
            assert await r.zcard(f"{key}:genommen") == 0 and await r.zcard(key) == 1  # the later one waits
            # a failed delivery puts it back for later
            await r.zadd(key, {b'{"id": "b"}': time.time() - 1})
            (b,) = await faellige_impulse_nehmen(r, key, 5)
            await impuls_erledigt(r, key, b, again_in_s=60)
            assert await r.zscore(key, b) > time.time() + 50 and await r.zcard(f"{key}:genommen") == 0
        finally:
            await r.delete(key, f"{key}:genommen")
            await r.aclose()

    asyncio.run(go())
