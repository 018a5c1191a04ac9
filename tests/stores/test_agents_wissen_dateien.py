"""The services `wissen` and `dateien` as agents (seed 001, *Query Rewriting*: "die beiden
NMCP-Dienste `wissen` und `dateien`, denen `such_vektor` als angemeldeter Bedarf mitwandert"):
declared with the memory record as their need, ordered by the planner (seed 003: the planner sets
`agent_name`, the dispatch cuts the state to the declared need), they read the real library and
file index with the turn's search key, and what they found reaches the responder's [AUFGABE] as
the planner's block (seed 004 §3.5), the files labelled as not Nova's memory (seed 001 §3.1a)."""
import asyncio
import logging

from memory import aufzeichnungen
from pipeline import agents, regeln
from pipeline.chains import PLANNER_LOOP
from pipeline.nodes import planner, responder
from pipeline.runner import ChainRunner, run_node
from core.state import MemoryRecord, PairRecord, RouteRecord, Stimulus, TurnState
from tests.conftest import at_cosine, new_pair, unit, with_pool
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.stores.test_dienste import _bibliothek, _deps
from tests.stores.test_nodes_chain_parts import _full_state

SCHLUESSEL = [float(x) for x in unit(0)]


def _auftrag(agent: str) -> str:
    return '{"auftraege": [{"agent": "%s", "aktion": "suchen", "parameter": {}}]}' % agent


def _turn_state(user, ch, management: str, memory: MemoryRecord) -> TurnState:
    return TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id="t1",
                                       user_prompt="Und wie weist man das nach?"),
                     pair=PairRecord(character_name="Nova"), route=RouteRecord(management=management), memory=memory)


async def _planner_loop(p, redis_url, user, ch, agent, memory, setup):
    """The planner loop of one turn against the real stores: the planner orders `agent`, then nothing.
    The deps have no embedder: the agent can read only with the key the memory record carries."""
    from redis.asyncio import Redis

    await setup(p)
    r = Redis.from_url(redis_url)
    try:
        llm = ScriptedLLM({"planner": [_auftrag(agent), '{"auftraege": []}']})
        deps = _deps(p, user, ch, llm)
        deps.services.redis = r
        state = _turn_state(user, ch, agent, memory)
        await ChainRunner(chain=(PLANNER_LOOP,)).run(state, deps)
        return state, deps
    finally:
        await r.aclose()


def test_the_agents_are_declared_with_the_memory_record_as_their_need():
    assert agents.bedarf("wissen") == agents.bedarf("dateien") == ("plan", "memory")
    assert {"wissen", "dateien"} <= set(agents.registry())


def test_a_turn_whose_planner_orders_wissen_gets_the_librarys_hits_by_the_search_key(pool, stores, caplog):
    user, ch = new_pair("aw")

    async def go(p):
        with caplog.at_level(logging.INFO, logger="novaberg.node.agent_dispatch"):
            return await _planner_loop(p, stores.redis_url, user, ch, "wissen",
                                       MemoryRecord(such_vektor=SCHLUESSEL), lambda p: _bibliothek(p, user, ch))

    state, deps = asyncio.run(with_pool(pool, go))
    [result] = state.plan.agent_results
    assert (result.agent_name, result.status, result.auftrag.aktion) == ("wissen", "abgeschlossen", "suchen")
    assert len(result.ergebnis["treffer"]) == 5
    # the service's own reading: the five nearest at or above 0.50, no report, no other pair's entry
    assert [r.outcome for r in deps.trace.decisions("agent_dispatch.dienst_wissen")] == ["treffer"]
    block = state.plan.task_block
    assert block.startswith("Erfolg: Nova hat soeben selbst erledigt: in ihrer Bibliothek nachgesehen, 5 Eintraege")
    assert "Aus ihrer Bibliothek (was sie selbst erarbeitet hat):" in block
    assert [line.split(":")[0] for line in block.splitlines() if line.startswith("- ")] == [
        "- W0", "- W1", "- W2", "- W3", "- W4"]
    assert "- W0: Inhalt 0" in block and "W5" not in block and "Bericht" not in block and "Fremd" not in block
    assert state.plan.task_context_cut
    # the dispatch cut the state to the declared need: the route and the pair did not reach it
    assert "agent_dispatch: wissen gets no pair" in caplog.text and "wissen gets no memory" not in caplog.text
    # and the responder's [AUFGABE] carries what it found
    full = _full_state()
    full.plan = state.plan
    (_, user_msg), _ = responder.build_messages(full, deps_for(ScriptedLLM()), "m")
    aufgabe = user_msg["content"].split("[AUFGABE]")[1]
    assert "- W0: Inhalt 0" in aufgabe and "- W4: Inhalt 4" in aufgabe


def test_a_turn_whose_planner_orders_dateien_gets_the_files_labelled_as_not_her_memory(pool, stores):
    user, ch = new_pair("ad")

    async def dateien(p):
        for i, c in enumerate((0.9, 0.2, 0.05)):  # no floor: 0.2 and 0.05 arrive too
            await aufzeichnungen.add(p, user, ch, f"/a/{i}.txt", f"A{i}", "Garten", f"Text {i}", at_cosine(c, 2 + i))
        await aufzeichnungen.add(p, "jemand-anders", ch, "/x.txt", "Fremd", "Garten", "fremd", at_cosine(0.99, 9))

    async def go(p):
        return await _planner_loop(p, stores.redis_url, user, ch, "dateien", MemoryRecord(such_vektor=SCHLUESSEL),
                                   dateien)

    state, deps = asyncio.run(with_pool(pool, go))
    [result] = state.plan.agent_results
    assert (result.agent_name, result.status) == ("dateien", "abgeschlossen")
    block = state.plan.task_block
    assert "in den Dateien nachgesehen, 3 Dateien zu diesem Gegenstand" in block
    assert "Aus den Dateien, die Person B gegeben hat (nicht ihre Erinnerung):" in block
    files = [line for line in block.splitlines() if line.startswith("- Datei ")]
    assert files == ["- Datei /a/0.txt: A0", "- Datei /a/1.txt: A1", "- Datei /a/2.txt: A2"]  # nearest first
    assert "  Text 0" in block and "Fremd" not in block
    assert [len(r.inputs["treffer"]) for r in deps.trace.decisions("agent_dispatch.dienst_dateien")] == [3]


def test_without_a_search_key_the_agent_reads_nothing_and_she_says_she_found_nothing(pool, stores, caplog):
    user, ch = new_pair("an")

    async def go(p):
        with caplog.at_level(logging.INFO, logger="novaberg.agent.nachschlagen"):
            return await _planner_loop(p, stores.redis_url, user, ch, "wissen", MemoryRecord(),
                                       lambda p: _bibliothek(p, user, ch))

    state, deps = asyncio.run(with_pool(pool, go))
    [result] = state.plan.agent_results
    assert result.status == "abgeschlossen" and result.ergebnis["treffer"] == []
    assert not deps.trace.decisions("agent_dispatch.dienst_wissen")  # the service was not asked
    assert [r.outcome for r in deps.trace.decisions("agent_dispatch.wissen_schluessel")] == ["kein_suchschluessel"]
    assert "wissen: fallback kein_suchschluessel" in caplog.text
    assert state.plan.task_block == ("Erfolg: Nova hat soeben selbst erledigt: in ihrer Bibliothek nachgesehen, nichts "
                                     "zu diesem Gegenstand. Sie sagt offen, dass sie dazu nichts gefunden hat.")


def test_a_request_to_look_up_is_read_by_the_rules_when_the_model_fails():
    assert regeln.management("Was steht in deiner Bibliothek dazu?") == "wissen"
    assert regeln.management("Schau mal in meinen Dateien nach, was da zur Steuer steht") == "dateien"
    assert regeln.management("Ich war heute in der Bibliothek.") == "keins"
    llm = ScriptedLLM({"planner": ["kein json"]})
    deps = deps_for(llm)
    state = TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t",
                                        user_prompt="Schau mal in meinen Dateien nach"),
                      pair=PairRecord(character_name="Nova"), route=RouteRecord(management="dateien"))
    plan = asyncio.run(run_node(planner.NODE, state, deps))["plan"]
    assert plan.agent_name == "dateien" and plan.auftrag.aktion == "suchen"
    assert "- wissen: suchen" in llm.calls[0]["messages"][0]["content"] + llm.calls[0]["messages"][-1]["content"]
