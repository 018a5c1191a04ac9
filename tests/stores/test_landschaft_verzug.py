"""The landscape follows with a lag (seed 004 §4.1: "Der Ton folgt dem Nutzer sofort, die Landschaft
mit ein bis zwei Turns Verzug"; seed 001 §5: "Der GV-Cluster kommt immer aus dem Vorturn …
`_vorturn_cluster_lesen()` holt ihn aus `gv:detail:{user_id}:{character_id}` in Redis, mit `paradox`
als Rückfall"): the enricher reads the cluster the previous turn's gv_node chose, the reply's prompt
shows that one, and the cluster chosen this turn is stored for the next turn."""
import asyncio

from redis.asyncio import Redis

from core.settings import Settings
from memory.ops import PoolStore
from memory.session_store import gv_key
from pipeline.nodes import enricher, gv_node, responder
from pipeline.runner import run_node
from pipeline.services import Deps, Services
from core.state import PairRecord, Stimulus, TurnState
from pipeline.trace import TurnTrace
from prompts import PromptLibrary
from tests.conftest import new_pair, with_pool
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.stores.test_lesepfad import _Embedder
from tests.unit.test_golden_responder import golden_state


def _sprachstil(landschaft) -> str:
    state = golden_state()
    state.landschaft = landschaft
    (_, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    return user["content"].split("[DEIN SPRACHSTIL]")[1]


async def _turn(p, r, user: str, ch: str, turn_id: str, gewaehlt: str):
    """One turn's enricher (character chain) and gv_node, gv_node choosing `gewaehlt`."""
    llm = ScriptedLLM({"gv_node": [f'{{"cluster": "{gewaehlt}", "gv_detail": "Still.", "werkzeug": "Frage"}}']})
    services = Services(settings=Settings(), llm=llm, embedder=_Embedder(), store=PoolStore(p), redis=r,
                        prompts=PromptLibrary())
    trace = TurnTrace(user, ch, turn_id)
    trace.chain = "character"
    deps = Deps(services, trace)
    state = TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id=turn_id, user_prompt="Na?"),
                      pair=PairRecord(character_name="Nova"))
    state.memory = (await run_node(enricher.NODE, state, deps))["memory"]
    state.landschaft = (await run_node(gv_node.NODE, state, deps))["landschaft"]
    gespeichert = (await r.hget(gv_key(user, ch), "cluster")).decode()
    return state, gespeichert, {(d.entscheidung, d.outcome): d.inputs for d in trace.decisions()}


def test_the_reply_is_shaped_by_the_previous_turns_landscape(stores, migrated):
    user, ch = new_pair("gv-verzug")

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            return (await _turn(p, r, user, ch, "t1", "feuerwerk"), await _turn(p, r, user, ch, "t2", "hafen"))
        finally:
            await r.aclose()

    (erster, gespeichert1, d1), (zweiter, gespeichert2, d2) = asyncio.run(with_pool(migrated.database_url, go))
    # the first turn has no previous cluster: the named fallback, paradox
    assert erster.memory.cluster_vorturn == "paradox" and ("enricher.landschaft", "kein_vorturn") in d1
    assert erster.landschaft.cluster == "paradox" and gespeichert1 == "feuerwerk"
    assert d1[("gv_node.cluster", "feuerwerk")] == {"status": "ok", "landschaft": "paradox"}
    # the second turn works with the first turn's choice; its own waits for the third
    assert zweiter.memory.cluster_vorturn == "feuerwerk" and d2[("enricher.landschaft", "vorturn")] == {
        "cluster": "feuerwerk"}
    assert zweiter.landschaft.cluster == "feuerwerk" and gespeichert2 == "hafen"
    assert zweiter.landschaft.werkzeug == "Frage"  # tool and vehicle are this turn's
    stil = _sprachstil(zweiter.landschaft)
    assert "Landschaft: Feuerwerk" in stil and "Hafen" not in stil
