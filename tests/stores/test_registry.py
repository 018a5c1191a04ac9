"""The pair registry's two writes (actors/registry.py) on a real Redis: a claim wins only against
the entry it read and always under a newer token; a release deletes only its own entry."""
import asyncio
import uuid

from actors import registry
from tests.conftest import run


async def _scenario(url):
    from redis.asyncio import Redis

    r = Redis.from_url(url)
    try:
        pair = registry.pair_name(f"reg-{uuid.uuid4().hex[:6]}", "nova")
        won, first = await registry.beanspruchen(r, pair, None, "pairhost:a")
        assert won and first.aktor == "pairhost:a"
        # a second caller that read "no entry" too loses, and is told who won
        lost, stands = await registry.beanspruchen(r, pair, None, "pairhost:b")
        assert not lost and stands == first
        # replacing a dead owner: only against the entry read, under a newer token
        won, second = await registry.beanspruchen(r, pair, first, "pairhost:c")
        assert won and second.aktor == "pairhost:c" and second.token > first.token
        lost, _ = await registry.beanspruchen(r, pair, first, "pairhost:d")  # stale read: no claim
        assert not lost and await registry.eintrag(r, pair) == second
        # the replaced owner's release deletes nothing; the owner's own does
        assert not await registry.freigeben(r, pair, first)
        assert await registry.eintrag(r, pair) == second
        assert await registry.freigeben(r, pair, second)
        assert await registry.eintrag(r, pair) is None
        # a claim sent again after its reply was lost finds its own entry: a win, not a loss
        won, mine = await registry.beanspruchen(r, pair, None, "pairhost:e")
        again, same = await registry.beanspruchen(r, pair, None, "pairhost:e")
        assert won and again and same == mine
        assert await registry.freigeben(r, pair, mine)
        # while the pair's data is erased no claim succeeds; afterwards one does
        await registry.sperren(r, pair)
        locked, nobody = await registry.beanspruchen(r, pair, None, "pairhost:f")
        assert not locked and await registry.eintrag(r, pair) is None
        await registry.entsperren(r, pair)
        won, after = await registry.beanspruchen(r, pair, None, "pairhost:f")
        assert won and after.aktor == "pairhost:f"
        assert await registry.freigeben(r, pair, after)
        # many callers at once: exactly one wins each round
        outcomes = await asyncio.gather(*(registry.beanspruchen(r, pair, None, f"pairhost:{i}") for i in range(16)))
        assert sum(1 for won, _ in outcomes if won) == 1
        assert len({e for _, e in outcomes}) == 1
    finally:
        await r.aclose()


def test_a_claim_needs_the_entry_it_read_and_a_release_its_own(settings):
    run(_scenario(settings.redis_url))


def test_an_entry_reads_back_or_is_none():
    assert registry.Eintrag.lesen(b"pairhost:ab|12") == registry.Eintrag("pairhost:ab", 12)
    assert registry.Eintrag.lesen(None) is None and registry.Eintrag.lesen("kaputt") is None
