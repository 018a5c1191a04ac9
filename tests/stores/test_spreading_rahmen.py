"""The spreading read takes the previous turn's cluster and Nova's sector as inputs (seed 001 §3.3:
"Der Enricher ruft `spreading_lesen` auf (… Cluster aus dem Redis-Vorturn, Novas dominante Emotion
aus `nova_emotions_verlauf`)"): the sector weighs which paths the activation takes, and the frame
(anchor count, depth, cluster, sector) travels with the memories to the [GEDAECHTNIS] (§4)."""
import asyncio

from redis.asyncio import Redis

from core.settings import Settings
from core.state import EmotionRecord, LandschaftRecord, PairRecord, Stimulus, TurnState
from memory import lzg
from memory.config import MemoryConfig
from memory.ops import PoolStore
from memory.session_store import LandschaftStore
from pipeline.nodes import enricher, reducer
from pipeline.runner import run_node
from pipeline.services import Deps, Services
from pipeline.trace import TurnTrace
from prompts import PromptLibrary
from tests.conftest import at_cosine, new_pair, unit, with_pool
from tests.scripted_llm import ScriptedLLM
from tests.stores.test_lesepfad import _Embedder


def test_novas_sector_chooses_the_paths_the_activation_takes(pool):
    # two equal synapses from one anchor: one to a joyful memory, one to a sad one
    cfg = MemoryConfig(lzg_anchor_count=1, spreading_depth=2, spreading_decay=0.7, spreading_min_activation=0.33)

    async def go(p):
        user, ch = new_pair("sektor")
        a, froh, traurig, weiter = await lzg.add_nodes(p, user, ch, [
            {"inhalt": "Bello", "embedding": at_cosine(0.9)},
            {"inhalt": "Bello am Strand", "embedding": unit(5), "emotion": "freude"},
            {"inhalt": "Bello beim Tierarzt", "embedding": unit(6), "emotion": "traurigkeit"},
            {"inhalt": "Das leere Koerbchen", "embedding": unit(7), "emotion": "traurigkeit"}])
        await lzg.add_synapses(p, [(a, froh, 0.8), (a, traurig, 0.8), (traurig, weiter, 1.0)])
        async with p.connection() as conn:
            return a, froh, traurig, weiter, {s: await lzg.ausbreiten(conn, [(a, 0.9)], cfg, limit=10, nova_sektor=s)
                                              for s in ("freude", "traurigkeit", None)}

    a, froh, traurig, weiter, got = asyncio.run(with_pool(pool, go))
    # joyful Nova: the sad memory gets 0.9 × 0.8 × 0.7 × 0.6 (four sectors away) = 0.30, below the minimum
    assert got["freude"].ids == [a, froh] and got["freude"].rahmen.nova_sektor == "freude"
    # sad Nova: the sad memory and the path beyond it, the joyful one stays out
    assert got["traurigkeit"].ids == [a, traurig, weiter]
    assert [e.pfad for e in got["traurigkeit"].erinnerungen][2] == [a, traurig, weiter]
    assert abs(got["traurigkeit"].erinnerungen[2].aktivierung - 0.9 * 0.8 * 0.7 * 0.7) < 1e-6
    # without a sector nothing is coloured: both at 0.50, by id
    assert got[None].ids == [a, froh, traurig, weiter]


def _lesen(stores, migrated, emotion: EmotionRecord):
    user, ch = new_pair("rahmen")

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            await lzg.add_nodes(p, user, ch, [{"inhalt": "Anna hat einen Hund namens Bello.", "embedding": unit(0)}])
            await LandschaftStore(r).schreiben(user, ch, "t0", LandschaftRecord(cluster="hafen"))
            services = Services(settings=Settings(), llm=ScriptedLLM(), embedder=_Embedder(), store=PoolStore(p),
                                redis=r, prompts=PromptLibrary())
            trace = TurnTrace(user, ch, "t1")
            trace.chain = "character"
            state = TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id="t1", user_prompt="Bello?"),
                              pair=PairRecord(character_name="Nova"), emotion=emotion)
            state.memory = (await run_node(enricher.NODE, state, Deps(services, trace)))["memory"]
            return state, (await run_node(reducer.NODE, state, Deps(services, trace)))["kontext"]
        finally:
            await r.aclose()

    return asyncio.run(with_pool(migrated.database_url, go))


def test_the_enricher_reads_with_the_previous_turns_cluster_and_novas_sector(stores, migrated):
    state, kontext = _lesen(stores, migrated, EmotionRecord(nova_sektor="vertrauen"))
    rahmen = state.memory.lzg_resonanz.rahmen
    assert (rahmen.cluster, rahmen.nova_sektor, rahmen.anker_anzahl) == ("hafen", "vertrauen", 1)
    zeile = "Rahmen der Erinnerungen: 1 Anker, Sprung-Tiefe 0, Landschaft hafen, Sektor vertrauen"
    assert kontext.gedaechtnis_verfasser.split("\n") == [zeile, "- (erinnerung) Anna hat einen Hund namens Bello."]


def test_a_neutral_nova_reads_uncoloured_and_the_frame_names_no_sector(stores, migrated):
    # `neutral` (the EmotionRecord's default) is no sector of the wheel: the read is uncoloured (None)
    state, kontext = _lesen(stores, migrated, EmotionRecord())
    assert state.emotion.nova_sektor == "neutral" and state.memory.lzg_resonanz.rahmen.nova_sektor is None
    zeile = "Rahmen der Erinnerungen: 1 Anker, Sprung-Tiefe 0, Landschaft hafen"
    assert kontext.gedaechtnis_verfasser.split("\n") == [zeile, "- (erinnerung) Anna hat einen Hund namens Bello."]
