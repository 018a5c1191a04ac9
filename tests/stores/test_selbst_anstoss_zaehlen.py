"""Seed 000 §3.5: a pair's self-triggers are counted against `MAX_SELF_TRIGGERS`. A follow-up
delivered again — its first run failed and the outbox delivers it anew, or its worker died — counts
once, by its turn id; on a real Redis."""
import asyncio
import uuid

from redis.asyncio import Redis

from actors.pair import selbst_anstoss_zaehlen


def test_a_follow_up_delivered_again_counts_once(stores):
    async def go():
        r = Redis.from_url(stores.redis_url)
        key = f"selftrigger:u-{uuid.uuid4().hex[:8]}:nova"
        try:
            first = [await selbst_anstoss_zaehlen(r, key, "t1-retry") for _ in range(3)]
            second = await selbst_anstoss_zaehlen(r, key, "t2-retry")
            return first, second, await r.ttl(key)
        finally:
            await r.aclose()

    first, second, ttl = asyncio.run(go())
    assert first == [1, 1, 1] and second == 2 and 0 < ttl <= 24 * 3600
