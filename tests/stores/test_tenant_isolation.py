"""Tenant isolation in a shared deployment: one `Services` serving many pairs (as the node
deployment does with `NOVABERG_REMOTE_NODES`) keeps each pair's warm state apart — the second
pair's enricher must never search the first pair's short-term memory."""
import asyncio

from core.settings import Settings
from memory import kzg
from pipeline.nodes import enricher
from pipeline.services import Deps, Services
from core.state import Stimulus, TurnState
from pipeline.trace import TurnTrace
from prompts import PromptLibrary
from tests.conftest import new_pair, unit
from tests.scripted_llm import PoolStore, ScriptedLLM
from pipeline.runner import run_node


class _Embedder:
    async def embed(self, trace, text):
        return unit(0).tolist()


def test_one_shared_services_keeps_each_pairs_short_term_memory_apart(stores, pool):
    from memory import pg
    from redis.asyncio import Redis

    async def go():
        r = Redis.from_url(stores.redis_url)
        p = pg.open_pool(pool, 1, 2)
        await p.open(wait=True)
        try:
            alice, bob = new_pair("iso-a")[0], new_pair("iso-b")[0]
            await kzg.add_entry(r, alice, "nova", "Alices Geheimnis", unit(0))
            await kzg.add_entry(r, bob, "nova", "Bobs eigene Notiz", unit(1))  # bob has memory, far from the key
            shared = Services(settings=Settings(), llm=ScriptedLLM({"query_rewrite": ["Geheimnis"]}), embedder=_Embedder(),
                              store=PoolStore(p), redis=r, prompts=PromptLibrary())
            seen = {}
            for user in (alice, bob, alice):
                state = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id="t",
                                                    user_prompt="Was ist mein Geheimnis?"))
                trace = TurnTrace(user, "nova", "t")
                trace.chain = "character"
                out = await run_node(enricher.NODE, state, Deps(shared, trace))
                seen.setdefault(user, []).append([h.inhalt for h in out["memory"].kzg])
            return alice, bob, seen, shared
        finally:
            await p.close()
            await r.aclose()

    alice, bob, seen, shared = asyncio.run(go())
    assert seen[alice] == [["Alices Geheimnis"], ["Alices Geheimnis"]]
    assert seen[bob] == [[]]
    assert set(shared.pair_caches) == {(alice, "nova"), (bob, "nova")} and "kzg_index" not in shared.cache


def test_pair_caches_are_bounded():
    s = Services(settings=Settings(), llm=None, embedder=None, store=None, redis=None, prompts=PromptLibrary())
    for i in range(Services.PAIR_CACHES + 10):
        s.pair_cache(f"u{i}", "nova")["x"] = i
    s.pair_cache("u10", "nova")  # used again: stays
    s.pair_cache("neu", "nova")
    assert len(s.pair_caches) == Services.PAIR_CACHES and ("u10", "nova") in s.pair_caches
    assert ("u11", "nova") not in s.pair_caches
