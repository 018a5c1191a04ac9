"""The notes plugin's two branches (seed 001 §3.2): a question about a specific note finds it by
keyword, then by a word of its body (full text), and hands its text on; otherwise the proactive
listing. Each run names its branch in a decision entry."""
import asyncio

from memory import notizen
from pipeline.nodes import reducer
from pipeline.plugins import notizen as plugin
from core.state import MemoryRecord, Stimulus, TurnState
from tests.conftest import new_pair, with_pool
from tests.scripted_llm import PoolStore, ScriptedLLM, deps_for


def _ask(user: str, text: str):
    return TurnState.model_construct(stimulus=Stimulus(user_id=user, character_id="nova", turn_id="t1",
                                                       user_prompt=text))


def _branch(deps) -> str:
    rows = [r for r in deps.trace.decisions("enricher.notizen")]
    assert len(rows) == 1
    return rows[0].outcome


def test_targeted_branch_finds_a_note_by_a_word_of_its_body(pool):
    async def go(p):
        user, _ = new_pair("notizplugin")
        await notizen.create(p, user, "Hundeschule", "Der Beagle braucht jeden Tag zwei Stunden Auslauf.",
                             "Training am Samstag", ["hund"])
        await notizen.create(p, user, "Einkaufsliste", "Milch, Brot, Kaese", "Wocheneinkauf", ["haushalt"])
        store = PoolStore(p)

        deps = deps_for(ScriptedLLM(), store=store, turn=(user, "nova", "t1"))
        hits = await plugin.enrich(_ask(user, "Was steht in meiner Notiz über den Auslauf?"), deps, None)
        assert [h["name"] for h in hits] == ["Hundeschule"]
        assert "zwei Stunden Auslauf" in hits[0]["inhalt"]
        assert _branch(deps) == "gezielt_volltext"
        # keyword first (name, topics), then the full text
        assert [c[0] for c in store.calls] == ["notizen.find_by_keyword", "notizen.find_fulltext"]
        block = reducer.block(reducer.reduce(reducer.entries(MemoryRecord(plugins={"notizen": hits}))), None)
        assert "(notizen) Hundeschule — Training am Samstag: Der Beagle braucht" in block

        deps = deps_for(ScriptedLLM(), store=store, turn=(user, "nova", "t2"))
        hits = await plugin.enrich(_ask(user, "Zeig mir die Notiz Einkaufsliste"), deps, None)
        assert [h["name"] for h in hits] == ["Einkaufsliste"] and _branch(deps) == "gezielt_stichwort"

        deps = deps_for(ScriptedLLM(), store=store, turn=(user, "nova", "t3"))
        hits = await plugin.enrich(_ask(user, "Was hatte ich mir über Segelboote notiert?"), deps, None)
        assert _branch(deps) == "gezielt_ohne_treffer"
        assert sorted(h["name"] for h in hits) == ["Einkaufsliste", "Hundeschule"] and "inhalt" not in hits[0]

        deps = deps_for(ScriptedLLM(), store=store, turn=(user, "nova", "t4"))
        hits = await plugin.enrich(_ask(user, "Wie war dein Tag?"), deps, None)
        assert _branch(deps) == "proaktiv" and len(hits) == 2

    asyncio.run(with_pool(pool, go))
