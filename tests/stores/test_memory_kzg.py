"""KZG: absolute threshold as a boundary, top_k, pair isolation, the actor's cache follows Redis."""
import asyncio
import json

from memory import kzg, vectors
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
        assert [h.id for h in hits] == [above]
        assert hits[0].emotion == "freude" and abs(hits[0].similarity - 0.7201) < 1e-4
        # top_k cuts, best first
        for i in range(12):
            await kzg.add_entry(r, user, ch, f"nah {i}", at_cosine(0.9 + i * 0.005, axis=3 + i))
        hits = await idx.search(r, unit(0), threshold=0.72, top_k=10)  # cache refreshed by the version
        assert len(hits) == 10
        sims = [h.similarity for h in hits]
        assert sims == sorted(sims, reverse=True) and sims[0] > 0.95
        assert all(h.inhalt != "anderes Paar" for h in hits)
        assert await kzg.count(r, user, ch) == 14
    finally:
        await r.aclose()


def test_kzg(stores):
    asyncio.run(_scenario(stores.redis_url))


def test_kzg_keeps_its_window_and_the_index_reads_only_what_is_new(stores):
    """A write beyond the pair's window trims its oldest entries in the same step; the actor's index
    reads the new vectors only and drops the trimmed ones; entries written before the window
    existed (no order) join it by their time at the next write."""
    from redis.asyncio import Redis

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            user, ch = new_pair("kzgw")
            idx = KZGIndex(user, ch)
            for i in range(5):
                await kzg.add_entry(r, user, ch, f"e{i}", unit(i), entry_id=f"e{i}", keep=5)
            await idx.refresh(r)
            assert idx.reads == 5
            await kzg.add_entry(r, user, ch, "e5", unit(5), entry_id="e5", keep=5)
            await kzg.add_entry(r, user, ch, "e6", unit(6), entry_id="e6", keep=5)
            assert await kzg.count(r, user, ch) == 5
            assert await r.hexists(f"kzg:{user}:{ch}:vectors", "e0") == 0  # the oldest went
            hits = await idx.search(r, unit(0), threshold=0.5, top_k=10)
            assert hits == [] and idx.reads == 7  # two new vectors read, not five again
            assert [h.id for h in await idx.search(r, unit(6), threshold=0.5, top_k=10)] == ["e6"]
            # the same entry written again (a retried job) stays one entry
            await kzg.add_entry(r, user, ch, "e6", unit(6), entry_id="e6", keep=5)
            assert await kzg.count(r, user, ch) == 5

            # a pair of entries written before the order: they join it by their time, oldest first out
            old_user, _ = new_pair("kzgalt")
            for i, t in enumerate((100.0, 300.0, 200.0)):
                e = {"id": f"a{i}", "inhalt": f"alt {i}", "emotion": None, "arousal": None, "quelle": None, "time": t}
                await r.hset(f"kzg:{old_user}:{ch}:entries", f"a{i}", json.dumps(e))
                await r.hset(f"kzg:{old_user}:{ch}:vectors", f"a{i}", vectors.pack(unit(i)))
            await kzg.add_entry(r, old_user, ch, "neu", unit(9), entry_id="neu", keep=3)
            left = sorted(x.decode() for x in await r.hkeys(f"kzg:{old_user}:{ch}:entries"))
            assert left == ["a1", "a2", "neu"]  # a0 (time 100) was the oldest
        finally:
            await r.aclose()

    asyncio.run(go())


def test_the_index_sees_a_write_whose_writer_clock_runs_behind(stores, monkeypatch):
    """Two workers write, the second with a clock behind the first: the order counts writes as
    Redis ran them, so the actor's index reads the second entry too."""
    from redis.asyncio import Redis

    clocks = iter([2000.0, 1000.0])
    monkeypatch.setattr(kzg.time, "time", lambda: next(clocks))

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            user, ch = new_pair("kzguhr")
            idx = KZGIndex(user, ch)
            await kzg.add_entry(r, user, ch, "vorne", unit(0), entry_id="vorne")
            await idx.refresh(r)
            await kzg.add_entry(r, user, ch, "nachgehend", unit(1), entry_id="nachgehend")
            assert [h.id for h in await idx.search(r, unit(1), threshold=0.5, top_k=5)] == ["nachgehend"]
            # an entry taken away other than by the trim: the index notices by the count and reads all again
            async with r.pipeline(transaction=True) as p:
                p.hdel(f"kzg:{user}:{ch}:entries", "vorne")
                p.hdel(f"kzg:{user}:{ch}:vectors", "vorne")
                p.zrem(f"kzg:{user}:{ch}:order", "vorne")
                p.incr(f"kzg:{user}:{ch}:version")
                await p.execute()
            await idx.refresh(r)
            assert idx._ids == ["nachgehend"]
        finally:
            await r.aclose()

    asyncio.run(go())
