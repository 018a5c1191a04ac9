"""KZG: absolute threshold as a boundary, top_k, pair isolation, the actor's cache follows Redis."""
import asyncio

from memory import kzg
from memory.kzg import KZGIndex
from tests.conftest import at_cosine, new_pair, unit


async def _scenario(url):
    from redis.asyncio import Redis

    r = Redis.from_url(url)
    try:
        user, ch = new_pair("kzg")
        other, _ = new_pair("kzg")
        above = await kzg.add_entry(r, user, ch, "knapp drueber", at_cosine(0.7201), emotion="freude", arousal=0.6)
        await kzg.add_entry(r, user, ch, "knapp drunter", at_cosine(0.7199, axis=2))
        await kzg.add_entry(r, other, ch, "anderes Paar", unit(0))
        idx = KZGIndex(user, ch)
        hits = await idx.search(r, unit(0), threshold=0.72, top_k=10)
        assert [h["id"] for h in hits] == [above]
        assert hits[0]["emotion"] == "freude" and abs(hits[0]["similarity"] - 0.7201) < 1e-4
        # top_k cuts, best first
        for i in range(12):
            await kzg.add_entry(r, user, ch, f"nah {i}", at_cosine(0.9 + i * 0.005, axis=3 + i))
        hits = await idx.search(r, unit(0), threshold=0.72, top_k=10)  # cache refreshed by the version
        assert len(hits) == 10
        sims = [h["similarity"] for h in hits]
        assert sims == sorted(sims, reverse=True) and sims[0] > 0.95
        assert all(h["inhalt"] != "anderes Paar" for h in hits)
        assert await kzg.count(r, user, ch) == 14
    finally:
        await r.aclose()


def test_kzg(stores):
    asyncio.run(_scenario(stores.redis_url))
