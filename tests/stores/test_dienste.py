"""The services `wissen` and `dateien` of seed 001 (*Query Rewriting*) against the real stores:
`wissen` reads the library's query with its threshold (0.50) and at most 5 hits, `dateien` the
file index's dense channel without a floor and at most 8 hits; the Thinker calls both as tools
with the turn's search key, and without a key it names the fallback and reads nothing."""
import asyncio
import logging

from memory import aufzeichnungen, bibliothek
from memory.config import MemoryConfig
from pipeline import dienste
from pipeline.nodes import thinker
from pipeline.runner import run_node
from core.state import DraftRecord, MemoryRecord, PairRecord, RouteRecord, Stimulus, TurnState
from tests.conftest import at_cosine, new_pair, unit, with_pool
from tests.scripted_llm import PoolStore, ScriptedLLM, Zaehler, deps_for

DARUEBER = [0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.5001]
DARUNTER = [0.4999, 0.3]


def _deps(pool, user, ch, llm=None, embedder=None):
    deps = deps_for(llm or ScriptedLLM(), store=PoolStore(pool), embedder=embedder, turn=(user, ch, "t1"))
    deps.services.cache["memory_cfg"] = MemoryConfig()  # the seed's values: library threshold 0.50
    return deps


def _stimulus(user, ch, text="Und wie weist man das nach?"):
    return Stimulus(user_id=user, character_id=ch, turn_id="t1", user_prompt=text)


async def _bibliothek(p, user, ch) -> dict[str, float]:
    """Seven `wissen` entries at or above 0.50, two below, a report and another pair's entry near
    the key: title → cosine."""
    titles = {}
    for i, c in enumerate(DARUEBER + DARUNTER):
        titles[f"W{i}"] = c
        await bibliothek.add(p, user, ch, "wissen", f"W{i}", f"Inhalt {i}", at_cosine(c, 2 + i), 5.0)
    await bibliothek.add(p, user, ch, "bericht", "Bericht", "ein Bericht", at_cosine(0.99, 20), 5.0)
    await bibliothek.add(p, "jemand-anders", ch, "wissen", "Fremd", "fremd", at_cosine(0.99, 21), 5.0)
    return titles


def test_wissen_returns_only_entries_at_or_above_the_threshold_at_most_five(pool, caplog):
    user, ch = new_pair("dw")

    async def go(p):
        titles = await _bibliothek(p, user, ch)
        deps = _deps(p, user, ch)
        with caplog.at_level(logging.INFO, logger="novaberg.dienste"):
            hits = await dienste.wissen(deps, _stimulus(user, ch), unit(0), "thinker")
        # a library holding only the boundary pair: the one above comes, the one below does not
        u2, _ = new_pair("dw2")
        await bibliothek.add(p, u2, ch, "wissen", "Drueber", "x", at_cosine(0.5001, 2))
        await bibliothek.add(p, u2, ch, "wissen", "Drunter", "x", at_cosine(0.4999, 3))
        rand = await dienste.wissen(_deps(p, u2, ch), _stimulus(u2, ch), unit(0), "thinker")
        return titles, hits, deps, rand

    titles, hits, deps, rand = asyncio.run(with_pool(pool, go))
    assert [h.titel for h in hits] == ["W0", "W1", "W2", "W3", "W4"]  # the five nearest, nearest first
    assert all(h.similarity >= 0.5 for h in hits)
    assert [h.titel for h in rand] == ["Drueber"]
    d = [r for r in deps.trace.decisions("thinker.dienst_wissen")]
    assert len(d) == 1 and d[0].outcome == "treffer" and len(d[0].inputs["treffer"]) == 5
    assert d[0].threshold == 0.5 and d[0].inputs["kappung"] == 5
    assert "dienst wissen: 5 Treffer (Schwelle 0.50, Kappung 5), schwaechster Kosinus 0.7000" in caplog.text


def test_dateien_has_no_floor_and_caps_at_eight(pool, caplog):
    user, ch = new_pair("dd")

    async def go(p):
        deps = _deps(p, user, ch)
        stim = _stimulus(user, ch)
        for i, c in enumerate((0.9, 0.2, 0.05)):
            await aufzeichnungen.add(p, user, ch, f"/a/{i}.txt", f"A{i}", "Garten", f"Text {i}", at_cosine(c, 2 + i))
        drei = await dienste.dateien(deps, stim, unit(0), "thinker")
        enricher = await aufzeichnungen.suchen(p, user, ch, "", unit(0), MemoryConfig())  # floor 0.30, cap 3
        for i in range(8):
            await aufzeichnungen.add(p, user, ch, f"/b/{i}.txt", f"B{i}", "Garten", "y", at_cosine(0.8 - i * 0.01, 10 + i))
        with caplog.at_level(logging.INFO, logger="novaberg.dienste"):
            acht = await dienste.dateien(deps, stim, unit(0), "thinker")
        return drei, enricher, acht, deps

    drei, enricher, acht, deps = asyncio.run(with_pool(pool, go))
    assert [h.titel for h in drei] == ["A0", "A1", "A2"]  # 0.2 and 0.05 arrive: no floor
    assert [h.titel for h in enricher.treffer] == ["A0"]  # the enricher's channel keeps its floor
    assert [h.titel for h in acht] == ["A0", "B0", "B1", "B2", "B3", "B4", "B5", "B6"]  # the cap is 8
    assert all(h.kanal == "dicht" for h in acht)
    d = [r for r in deps.trace.decisions("thinker.dienst_dateien")]
    assert [len(r.inputs["treffer"]) for r in d] == [3, 8] and d[1].inputs["bestand"] == 11
    assert "dienst dateien: 8 Treffer, Bestand 11 (ohne Schwelle, Kappung 8)" in caplog.text


class _Embedder:
    def __init__(self, vectors):
        self.vectors = vectors

    async def embed(self, trace, text):
        return list(self.vectors[text])


def _thinker_state(user, ch, memory: MemoryRecord) -> TurnState:
    return TurnState(stimulus=_stimulus(user, ch), pair=PairRecord(character_name="Nova"), route=RouteRecord(),
                     memory=memory, draft=DraftRecord(reply="Dein Termin ist am Montag um 14 Uhr.", model="m"))


def test_the_thinker_calls_both_services_with_the_turns_search_key(pool):
    user, ch = new_pair("dt")
    key = MemoryRecord(such_vektor=[float(x) for x in unit(0)])

    async def go(p):
        await _bibliothek(p, user, ch)
        await aufzeichnungen.add(p, user, ch, "/a/steuer.txt", "Steuer", "Finanzamt", "Die Frist endet im Juli.",
                                 at_cosine(0.1, 30))
        llm = ScriptedLLM({"thinker": ["TOOL: wissen()", "TOOL: dateien()", "TOOL: wissen(Etwas ganz anderes)",
                                       "ERGEBNIS: OK"]})
        deps = _deps(p, user, ch, llm, _Embedder({"Etwas ganz anderes": unit(40)}))
        out = await run_node(thinker.NODE, _thinker_state(user, ch, key), deps)
        return llm, deps, out["pruefung"]

    llm, deps, p = asyncio.run(with_pool(pool, go))
    assert "wissen() — die Bibliothek" in llm.calls[0]["messages"][1]["content"]  # the tool is offered
    wissen, dateien, frage = [c["messages"][-1]["content"] for c in llm.calls[1:]]
    lines = [line for line in wissen.splitlines() if line.startswith("[Bibliothek")]
    assert [line.split("] ")[1].split(":")[0] for line in lines] == ["W0", "W1", "W2", "W3", "W4"]
    assert lines[0] == "[Bibliothek, Kosinus 0.90] W0: Inhalt 0"
    assert "W6" not in wissen and "W7" not in wissen and "Bericht" not in wissen and "Fremd" not in wissen
    assert "Aus den Dateien, die Person B gegeben hat (nicht Novas Erinnerung):" in dateien
    assert "[Datei /a/steuer.txt, Kosinus 0.10] Steuer" in dateien and "Die Frist endet im Juli." in dateien
    assert "Keine Eintraege in der Bibliothek" in frage  # a question's own vector: nothing near it
    assert p.status == "ok" and p.werkzeuge == ["wissen", "dateien", "wissen"]
    outcomes = [r.outcome for r in deps.trace.decisions("thinker.dienst_wissen")]
    assert outcomes == ["treffer", "keine"]


def test_without_a_search_key_the_thinker_reads_nothing_and_says_so(pool, caplog):
    user, ch = new_pair("dk")

    async def go(p):
        await _bibliothek(p, user, ch)
        llm = ScriptedLLM({"thinker": ["TOOL: wissen()", "TOOL: dateien()", "ERGEBNIS: OK"]})
        deps = _deps(p, user, ch, llm)
        with caplog.at_level(logging.INFO, logger="novaberg.thinker.tools"):
            await run_node(thinker.NODE, _thinker_state(user, ch, MemoryRecord()), deps)
        return llm, deps

    llm, deps = asyncio.run(with_pool(pool, go))
    wissen, dateien = [c["messages"][-1]["content"] for c in llm.calls[1:]]
    assert "keinen Suchschluessel" in wissen and "keinen Suchschluessel" in dateien
    assert not [r for r in deps.trace.decisions() if r.entscheidung.startswith("thinker.dienst_")]
    assert "wissen fallback kein_suchschluessel" in caplog.text and "dateien fallback kein_suchschluessel" in caplog.text


def test_an_agent_that_declares_the_memory_calls_the_services_with_the_turns_key(pool, monkeypatch):
    """Seed 001: the services get `such_vektor` as a declared need: an agent that declares the
    memory record receives the turn's key through the dispatch and reads the library with it."""
    from pipeline import agents
    from pipeline.nodes import agent_dispatch
    from core.state import AgentResult, Auftrag, PlanRecord

    user, ch = new_pair("da")
    gesehen: dict = {}

    async def bibliothekar(state, deps):
        hits = await dienste.wissen(deps, state.stimulus, state.memory.such_vektor, "agent_dispatch")
        gesehen["titel"] = [h.titel for h in hits]
        return AgentResult(agent_name="bibliothekar", status="abgeschlossen")

    monkeypatch.setitem(agents.registry(), "bibliothekar", bibliothekar)
    monkeypatch.setattr(agents, "bedarf", lambda name: ("plan", "memory") if name == "bibliothekar" else ("plan",))

    async def go(p):
        await _bibliothek(p, user, ch)
        state = _thinker_state(user, ch, MemoryRecord(such_vektor=[float(x) for x in unit(0)]))
        state.plan = PlanRecord(agent_name="bibliothekar", auftrag=Auftrag(agent="bibliothekar", aktion="suchen"))
        deps = _deps(p, user, ch)
        deps.services.redis = Zaehler()  # the router's and the dispatch's counters
        await run_node(agent_dispatch.NODE, state, deps)
        return deps

    deps = asyncio.run(with_pool(pool, go))
    assert gesehen["titel"] == ["W0", "W1", "W2", "W3", "W4"]
    assert [r.outcome for r in deps.trace.decisions("agent_dispatch.dienst_wissen")] == ["treffer"]
