"""The pixie: serialised by its lock, writes the library from delegated tasks, returns a task it
could not do."""
import asyncio
import json

from actors import pixie
from actors.background import DELEGATIONS
from cluster.settings import Settings
from memory import pg
from memory.config import MemoryConfig
from pipeline.services import Services
from prompts import PromptLibrary
from tests.conftest import new_pair, unit, with_pool
from tests.scripted_llm import ScriptedLLM


class _Embedder:
    """Unit vectors by text length: enough for the library's topic column."""

    async def embed(self, trace, text):
        return unit(len(text) % 300).tolist()


class _Store:
    def __init__(self, pool):
        self.pool = pool

    async def call(self, op, *args, **kwargs):
        from memory.ops import lookup

        return await lookup(op)(self.pool, *args, **kwargs)


def test_pixie_round(stores, migrated):
    from redis.asyncio import Redis

    user, ch = new_pair("pixie")

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            llm = ScriptedLLM({"pixie": ['{"titel": "Beagle", "wissen": "Beagle sind Laufhunde."}', "unbrauchbar"]})
            services = Services(settings=Settings(), llm=llm, embedder=_Embedder(), store=_Store(p), redis=r,
                                prompts=PromptLibrary())
            services.cache["memory_cfg"] = MemoryConfig()
            for k in [k async for k in r.scan_iter(f"{DELEGATIONS}:*")]:
                await r.delete(k)
            await r.rpush(f"{DELEGATIONS}:{user}:{ch}", json.dumps({"aufgabe": "Was sind Beagle?"}),
                          json.dumps({"aufgabe": "Zweite Aufgabe"}))
            await r.set(pixie.LOCK, "someone-else", ex=5)
            assert await pixie.pixie_round(services) == {"status": "gesperrt", "geschrieben": 0}
            await r.delete(pixie.LOCK)
            out = await pixie.pixie_round(services)
            assert out == {"status": "gelaufen", "geschrieben": 1}
            assert await r.get(pixie.LOCK) is None  # released
            from memory import library

            got = await library.suchen(p, user, ch, unit(len("Beagle") % 300), MemoryConfig(library_threshold=0.9))
            assert [h["titel"] for h in got] == ["Beagle"]
            # the task without a usable answer went back to the queue
            assert [json.loads(x)["aufgabe"] for x in await r.lrange(f"{DELEGATIONS}:{user}:{ch}", 0, -1)] == ["Zweite Aufgabe"]
        finally:
            await r.aclose()

    asyncio.run(with_pool(migrated.database_url, go))
