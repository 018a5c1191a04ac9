"""The memory read path (memory/lesepfad.py) is the one way long-term memory is read, by every
reader with the pair's configuration; its keyword channel reads a node's surroundings, stemmed in
English and German, kept up to date when neighbours arrive; what it returns is bounded and carries
its paths."""
import ast
import asyncio
from pathlib import Path

from redis.asyncio import Redis

from core.settings import Settings
from memory import lzg, session
from memory.config import MemoryConfig, for_model
from memory.lesepfad import erinnern
from memory.ops import OPS, PoolStore
from pipeline.nodes import enricher
from pipeline.chains import vorab_starten
from pipeline.runner import run_node
from pipeline.services import Deps, Services
from core.state import PerzeptionRecord, Stimulus, TurnState
from pipeline.trace import TurnTrace
from prompts import PromptLibrary
from tests.conftest import new_pair, unit, with_pool
from tests.scripted_llm import ScriptedLLM
from core.wire import TurnCommit
from tests.commit_jobs import entry, result

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("actors", "serve", "pipeline", "memory", "cluster", "bench")


def _calls(path: Path) -> list[str]:
    """Every called name in a module, dotted as written (`lzg.ausbreiten`, `erinnern`, …), and every
    string constant (the store's operation names)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            out.append(ast.unparse(f))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out


def test_long_term_memory_is_read_one_way_only():
    """No module but the read path spreads from anchors or queries the LZG by vector or by keyword;
    the store offers no other read; the readers named in the issue all call the read path."""
    lzg_reads = ("embedding <=>", "lzg_stichworte")
    for folder in PRODUCT:
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "memory/lesepfad.py":
                continue
            calls = _calls(path)
            assert not any(c.endswith("ausbreiten") for c in calls if "(" not in c), f"{rel} spreads on its own"
            for text in calls:
                if text in ("lzg_knoten", "lzg_stichworte"):
                    continue  # a table's bare name (erasure names every table of a pair) queries nothing
                if "lzg_knoten" in text or "lzg_stichworte" in text:
                    if rel == "bench/memory_latency.py" and "ORDER BY embedding <=>" in text:
                        continue  # the plain nearest-neighbour baseline the read path is measured against
                    assert not any(r in text for r in lzg_reads), f"{rel} reads the LZG by itself: {text[:80]}"
    assert [op for op in OPS if op.startswith("lzg.") and op not in {
        "lzg.episode_schreiben", "lzg.knoten_der_quelle", "lzg.add_synapses", "lzg.has_nodes",
        "lzg.touch", "lzg.abloesen"}] == []  # abloesen writes a supersession mark, it reads nothing
    readers = {"pipeline/nodes/enricher.py": "lesepfad.erinnern", "pipeline/thinker/tools.py": "lesepfad.erinnern",
               "actors/pixie.py": "lesepfad.erinnern", "cluster/memory_cli.py": "erinnern",
               "bench/locomo_recall.py": "lzg_lesen"}
    for rel, name in readers.items():
        assert any(c == name or c.endswith(f".{name}") for c in _calls(ROOT / rel)), \
            f"{rel} does not read through the read path"


class _Embedder:
    def __init__(self):
        self.prefetched: list[str] = []

    async def embed(self, trace, text):
        return unit(0).tolist()

    def prefetch(self, trace, text):
        self.prefetched.append(text)


def test_the_enricher_reads_through_the_path_with_the_pairs_configuration(stores, migrated):
    """The enricher's long-term read is `lesepfad.erinnern` with the services' MemoryConfig, and
    what it hands on is exactly what the read path returns for its search text and vector (the
    function the LoCoMo benchmark measures)."""
    user, ch = new_pair("lp-enr")

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            await lzg.add_nodes(p, user, ch, [
                {"inhalt": "Anna hat einen Hund namens Bello.", "embedding": unit(0)},
                {"inhalt": "Anna trinkt gern Tee.", "embedding": unit(1)}])
            store = PoolStore(p)
            services = Services(settings=Settings(), llm=ScriptedLLM({"query_rewrite": ["Annas Hund"]}),
                                embedder=_Embedder(), store=store, redis=r, prompts=PromptLibrary())
            state = TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id="t1",
                                                user_prompt="Wie heisst Annas Hund?"))
            trace = TurnTrace(user, ch, "t1")
            trace.chain = "character"
            out = (await run_node(enricher.NODE, state, Deps(services, trace)))["memory"]
            reads = [c for c in store.calls if c[0] == "lesepfad.erinnern"]
            direct = await enricher.lzg_lesen(PoolStore(p), user, ch, reads[0][1][2], reads[0][1][3],
                                              services.memory_cfg, cluster=reads[0][2]["cluster"],
                                              nova_sektor=reads[0][2]["nova_sektor"])
            return out, reads, direct, services.memory_cfg, trace
        finally:
            await r.aclose()

    out, reads, direct, cfg, trace = asyncio.run(with_pool(migrated.database_url, go))
    assert len(reads) == 1 and reads[0][1][4] == cfg == for_model(Settings().embedding_model)
    assert out.lzg_resonanz.ids == direct.ids and out.lzg_resonanz.ids
    assert out.lzg_resonanz.erinnerungen[0].inhalt == "Anna hat einen Hund namens Bello."
    # seed 001 §4: the read names how many memories it read and which
    [entry] = [r for r in trace.decisions("enricher.lzg_resonanz")]
    assert entry.outcome == "gelesen"
    assert entry.inputs == {"lzg_resonanz_count": len(direct.ids), "lzg_resonanz_ids": list(direct.ids)}


def test_a_read_the_floor_empties_is_named_in_the_turns_log(stores, migrated):
    """Seed 001 §4 for a read the floor emptied: the entry names it (`cold_start`), with no
    memory read, none handed on, and the best cosine against the floor."""
    user, ch = new_pair("lp-kalt")

    class _Fern(_Embedder):
        async def embed(self, trace, text):
            return unit(7).tolist()  # orthogonal to every memory: no anchor

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            await lzg.add_nodes(p, user, ch, [{"inhalt": "Anna hat einen Hund namens Bello.", "embedding": unit(0)}])
            services = Services(settings=Settings(), llm=ScriptedLLM({"query_rewrite": ["Hallo"]}),
                                embedder=_Fern(), store=PoolStore(p), redis=r, prompts=PromptLibrary())
            state = TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id="t1", user_prompt="Hallo!"))
            trace = TurnTrace(user, ch, "t1")
            trace.chain = "character"
            out = (await run_node(enricher.NODE, state, Deps(services, trace)))["memory"]
            return out, trace, services.memory_cfg
        finally:
            await r.aclose()

    out, trace, cfg = asyncio.run(with_pool(migrated.database_url, go))
    assert out.lzg_resonanz.erinnerungen == [] and out.lzg_resonanz.rahmen.kaltstart is True
    [entry] = [r for r in trace.decisions("enricher.lzg_resonanz")]
    assert (entry.outcome, entry.threshold) == ("cold_start", cfg.lesepfad_boden)
    assert entry.inputs == {"lzg_resonanz_count": 0, "lzg_resonanz_ids": [], "bester_kosinus": 0.0}


def test_a_pair_without_memory_names_an_empty_read_too(stores, migrated, caplog):
    """No memory to search: the read does not run, and its entry and log line still say how many
    memories were read and which — none."""
    user, ch = new_pair("lp-leer")

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            services = Services(settings=Settings(), llm=ScriptedLLM(), embedder=_Embedder(), store=PoolStore(p),
                                redis=r, prompts=PromptLibrary())
            state = TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id="t1", user_prompt="Hallo!"))
            trace = TurnTrace(user, ch, "t1")
            trace.chain = "character"
            out = (await run_node(enricher.NODE, state, Deps(services, trace)))["memory"]
            return out, trace
        finally:
            await r.aclose()

    with caplog.at_level("INFO", logger="novaberg"):
        out, trace = asyncio.run(with_pool(migrated.database_url, go))
    assert out.lzg_resonanz is None
    [entry] = [r for r in trace.decisions("enricher.lzg_resonanz")]
    assert entry.outcome == "nicht_gelesen"
    assert entry.inputs == {"lzg_resonanz_count": 0, "lzg_resonanz_ids": []}
    assert "lzg_resonanz_count=0 lzg_resonanz_ids=[]" in caplog.text


def test_what_the_enricher_reads_at_the_turns_start_is_what_it_reads_with(stores, migrated):
    """The pair actor starts the enricher's `vorab` reads before the first node (beside
    perzeption's model call): the stimulus's vector, the session, the goals and the pre-check run
    once, before the enricher, and the enricher searches the memory they found instead of asking
    again."""
    user, ch = new_pair("lp-vor")
    store_calls: list = []

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            await lzg.add_nodes(p, user, ch, [{"inhalt": "Anna hat einen Hund namens Bello.", "embedding": unit(0)}])
            store, embedder = PoolStore(p), _Embedder()
            services = Services(settings=Settings(), llm=ScriptedLLM({"query_rewrite": ["Annas Hund"]}),
                                embedder=embedder, store=store, redis=r, prompts=PromptLibrary())
            state = TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id="t1",
                                                user_prompt="Wie heisst Annas Hund?"))
            trace = TurnTrace(user, ch, "t1")
            deps = Deps(services, trace)
            assert vorab_starten(deps, state.stimulus) == ["enricher", "db_zugriff", "erinnerungsanker", "router"]
            enricher.vorab(deps, state.stimulus)  # once per turn, however often asked
            await enricher.vorpruefung_starten(deps, user, ch)
            await trace.started_in(enricher.SESSION)
            before = [c[0] for c in store.calls]
            trace.chain = "character"
            out = (await run_node(enricher.NODE, state, deps))["memory"]
            store_calls.extend(store.calls)
            return before, [c[0] for c in store.calls], embedder.prefetched, out
        finally:
            await r.aclose()

    before, calls, prefetched, out = asyncio.run(with_pool(migrated.database_url, go))
    assert sorted(before) == ["aufzeichnungen.bestand", "bibliothek.bestand", "lzg.has_nodes", "ziele.load_goals"]
    assert set(prefetched) == {"Wie heisst Annas Hund?"}  # the stimulus's vector, started early
    assert all(calls.count(op) == 1 for op in before) and calls.index("lesepfad.erinnern") >= len(before)
    assert out.lzg_resonanz.erinnerungen[0].inhalt == "Anna hat einen Hund namens Bello."
    # the key it searched with travels in the state to the services wissen and dateien (seed 001 §4)
    gesucht = next(c[1][3] for c in store_calls if c[0] == "lesepfad.erinnern")
    assert out.such_vektor is not None and out.such_vektor == [float(x) for x in gesucht]


def test_keyword_channel_reads_surroundings_stems_and_follows_new_neighbours(pool):
    """Vectors orthogonal to the question leave the keyword channel alone to rank: a turn is found by
    a word only its neighbour holds once the two are linked as `nachbar`, English and German words
    match their other forms, and a node with nothing in common stays last."""
    cfg = MemoryConfig(lesepfad_k=10, lesepfad_boden=-1)  # orthogonal vectors: the keyword channel alone ranks

    async def go(p):
        user, ch = new_pair("lp-kw")
        bello, fremd = await lzg.add_nodes(p, user, ch, [
            {"inhalt": "Bello is a beagle and loves the park.", "embedding": unit(3)},
            {"inhalt": "Der Zug nach Halle war voll.", "embedding": unit(4)}])
        before = await erinnern(p, user, ch, "Which dog did Anna adopt?", unit(0), cfg)
        dog, = await lzg.add_nodes(p, user, ch, [{"inhalt": "Anna: I adopted a dog last week.", "embedding": unit(5)}])
        await lzg.add_synapses(p, [(dog, bello, 0.6)], art="nachbar")
        after = await erinnern(p, user, ch, "Which dog did Anna adopt?", unit(0), cfg)
        await lzg.add_nodes(p, user, ch, [{"inhalt": "She paints sunsets.", "embedding": unit(6)},
                                          {"inhalt": "Die Hunde bellten im Garten.", "embedding": unit(7)}])
        painting = await erinnern(p, user, ch, "her painting", unit(0), cfg)
        hund = await erinnern(p, user, ch, "Wo war der Hund?", unit(0), cfg)
        return bello, fremd, dog, before, after, painting, hund

    bello, fremd, dog, before, after, painting, hund = asyncio.run(with_pool(pool, go))
    scores = {e.id: e.stichwort for e in before.erinnerungen}
    assert scores[bello] == 0.0  # alone, the beagle's turn holds no word of the question
    kw = {e.id: e.stichwort for e in after.erinnerungen}
    assert kw[bello] > 0 and kw[dog] > kw[bello] > kw[fremd] == 0.0  # the neighbour's words, the turn's own first
    assert after.ids[:2] == [dog, bello] and after.ids[-1] == fremd
    assert painting.erinnerungen[0].inhalt == "She paints sunsets."
    assert hund.erinnerungen[0].inhalt == "Die Hunde bellten im Garten."


def test_what_comes_back_is_bounded_and_carries_its_paths(pool):
    """At most k memories; an association reached by spreading carries its path and the node it
    came over; the Thinker's read (no spreading) returns the anchors alone."""
    cfg = MemoryConfig(lesepfad_k=3, lzg_anchor_count=1, spreading_depth=2, spreading_decay=0.9,
                       spreading_min_activation=0.01)

    async def go(p):
        user, ch = new_pair("lp-bound")
        ids = await lzg.add_nodes(p, user, ch, [{"inhalt": f"Erinnerung {i}", "embedding": unit(i + 1)}
                                                for i in range(8)])
        anker, = await lzg.add_nodes(p, user, ch, [{"inhalt": "Der Leuchtturm am Hafen", "embedding": unit(0)}])
        await lzg.add_synapses(p, [(anker, ids[7], 1.0)])
        mit = await erinnern(p, user, ch, "Leuchtturm", unit(0), cfg)
        ohne = await erinnern(p, user, ch, "Leuchtturm", unit(0), cfg, ausbreiten=False)
        mehr = await erinnern(p, user, ch, "Leuchtturm", unit(0), cfg, k=20)
        return anker, ids, mit, ohne, mehr

    anker, ids, mit, ohne, mehr = asyncio.run(with_pool(pool, go))
    assert len(mit.ids) == 3 and mit.ids[0] == anker and mit.erinnerungen[0].eingefallen_ueber == "Anker"
    assoziiert = [e for e in mit.erinnerungen if e.tiefe == 1]
    assert [e.id for e in assoziiert] == [ids[7]] and assoziiert[0].pfad == [anker, ids[7]]
    assert "Leuchtturm" in assoziiert[0].eingefallen_ueber
    assert all(e.tiefe == 0 for e in ohne.erinnerungen) and len(ohne.ids) == 3
    assert len(mehr.ids) == 9 and len(set(mehr.ids)) == 9


def test_an_anchorless_turn_recalls_nothing_and_says_so(pool, caplog):
    """Seed 001 §3.3: cold start is the right answer to an anchorless prompt. A read whose best
    anchor lies below the floor returns nothing under the named fallback `cold_start`; a question
    with an anchor above it reads as before; the Thinker's fact check takes no floor (seed 000)."""
    import logging

    from tests.conftest import at_cosine

    cfg = MemoryConfig(lesepfad_boden=0.40)

    async def go(p):
        user, ch = new_pair("lp-boden")
        await lzg.add_nodes(p, user, ch, [{"inhalt": "Anna hat einen Hund namens Bello.", "embedding": unit(0)},
                                          {"inhalt": "Anna malt gern.", "embedding": unit(1)}])
        unter = await erinnern(p, user, ch, "Hallo, wie gehts?", at_cosine(0.39, axis=2), cfg)
        ueber = await erinnern(p, user, ch, "Wie heisst der Hund?", at_cosine(0.41, axis=2), cfg)
        pruefung = await erinnern(p, user, ch, "Hallo, wie gehts?", at_cosine(0.39, axis=2), cfg, ausbreiten=False, boden=False)
        return unter, ueber, pruefung

    with caplog.at_level(logging.INFO, logger="novaberg.lesepfad"):
        unter, ueber, pruefung = asyncio.run(with_pool(pool, go))
    assert unter.erinnerungen == [] and unter.ids == []
    assert unter.rahmen.kaltstart is True and abs(unter.rahmen.bester_kosinus - 0.39) < 1e-3
    assert "fallback cold_start" in caplog.text
    assert ueber.erinnerungen[0].inhalt == "Anna hat einen Hund namens Bello." and ueber.rahmen.kaltstart is False
    assert len(pruefung.erinnerungen) == 2


def test_nothing_stored_reads_nothing(pool):
    async def go(p):
        user, ch = new_pair("lp-leer")
        return await erinnern(p, user, ch, "Hallo", unit(0), MemoryConfig())

    assert asyncio.run(with_pool(pool, go)).ids == []


async def _gespraech(r, user, ch):
    """One earlier turn in the pair's session: enough history for the query rewrite."""
    now = "2026-12-01T10:00:00+00:00"
    await session.commit_turn(r, TurnCommit(
        result=result(user, ch, "t0", "Wie schoen!"), mensch=entry("Anna hat einen Hund.", "t0", time=now),
        nova=entry("Wie schoen!", "t0", rolle="assistant", time=now), keep_turns=20, ttl_s=60))


def _rewrite_turn(stores, migrated, prefix: str, intentionen: list[str]):
    """A turn whose `vorab` ran at its start; returns the model calls made before the character
    chain's enricher ran, all calls, and the search text the read path got."""
    user, ch = new_pair(prefix)

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            await lzg.add_nodes(p, user, ch, [{"inhalt": "Anna hat einen Hund namens Bello.", "embedding": unit(0)}])
            await _gespraech(r, user, ch)
            llm, store = ScriptedLLM({"enricher": ["Wie heisst Annas Hund?"]}), PoolStore(p)
            services = Services(settings=Settings(), llm=llm, embedder=_Embedder(), store=store, redis=r,
                                prompts=PromptLibrary())
            state = TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id="t1", user_prompt="Und wie heisst er?"),
                              perzeption=PerzeptionRecord(user_intentionen=intentionen))
            trace = TurnTrace(user, ch, "t1")
            deps = Deps(services, trace)
            vorab_starten(deps, state.stimulus)  # the pair actor, once perzeption's call is out
            for _ in range(50):  # the human chain's time: the pre-check, the session, the call
                await asyncio.sleep(0.01)
            early = [c["node"] for c in llm.calls if c["node"] == "enricher"]
            trace.chain = "character"
            await run_node(enricher.NODE, state, deps)
            suche = [c[1][2] for c in store.calls if c[0] == "lesepfad.erinnern"]
            return early, [c["node"] for c in llm.calls if c["node"] == "enricher"], suche
        finally:
            await r.aclose()

    return asyncio.run(with_pool(migrated.database_url, go))


def test_the_query_rewrite_starts_with_the_turn_and_is_what_the_enricher_searches_with(stores, migrated):
    """With memory to search and history to read, the rewrite's model call goes out at the turn's
    start (beside perzeption's), once; the character chain's enricher searches with its answer."""
    early, calls, suche = _rewrite_turn(stores, migrated, "lp-rw", [])
    assert early == ["enricher"] and calls == ["enricher"]
    assert suche == ["Wie heisst Annas Hund?"]


def test_an_instruction_drops_the_early_rewrite_and_searches_the_message_itself(stores, migrated):
    early, calls, suche = _rewrite_turn(stores, migrated, "lp-rw-anw", ["anweisung"])
    assert early == ["enricher"] and calls == ["enricher"]  # asked early, not again
    assert suche == ["Und wie heisst er?"]  # seed 001: an instruction searches the raw utterance
