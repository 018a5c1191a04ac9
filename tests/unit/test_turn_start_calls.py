"""Model calls that start with the turn (`model_call_at_start`): the erinnerungsanker's and the router's
prompts read only what the turn's start has (the message, the session the enricher hands on), so
the pair actor's `vorab` sends them beside perzeption's; the nodes use those answers in their
places in the chain, and the prompts are byte for byte the ones the nodes would have sent there."""
import asyncio
from datetime import datetime, timezone

from pipeline.nodes import enricher, erinnerungsanker, router
from pipeline.runner import run_node
from core.state import MemoryRecord, PerzeptionRecord, SessionTurn, Stimulus, TurnState
from tests.scripted_llm import ScriptedLLM, Zaehler, deps_for

ROUTE = '{"intent": "austausch", "management": "keins", "needs_memory": false, "momentum": "mid"}'
ANKER = '{"datiert": false}'
TURNS = [SessionTurn(rolle="user", sprecher="Person B", inhalt="Gestern war ich beim Zahnarzt.", turn_id="t0",
                     time=datetime(2026, 12, 1, tzinfo=timezone.utc)),
         SessionTurn(rolle="assistant", sprecher="Nova", inhalt="Und, wie war es?", turn_id="t0",
                     time=datetime(2026, 12, 1, tzinfo=timezone.utc))]


def _stimulus(text: str | None = "Es hat gar nicht wehgetan.") -> Stimulus:
    if text is None:  # Nova's own thought: no message of the human
        return Stimulus(user_id="u", character_id="nova", turn_id="t1", eigener_gedanke="Wie es ihm wohl geht?",
                        herkunft="eigener_impuls")
    return Stimulus(user_id="u", character_id="nova", turn_id="t1", user_prompt=text)


def _state(s: Stimulus) -> TurnState:
    return TurnState(stimulus=s, perzeption=PerzeptionRecord(), memory=MemoryRecord(session_turns=TURNS))


async def _turn(early: bool, s: Stimulus):
    llm = ScriptedLLM({"router": [ROUTE], "erinnerungsanker": [ANKER]})
    deps = deps_for(llm, redis=Zaehler())
    session = asyncio.get_running_loop().create_future()
    session.set_result(TURNS)
    deps.trace.put(enricher.SESSION, session)  # the enricher's vorab read of this turn
    if early:
        erinnerungsanker.vorab(deps, s)
        router.vorab(deps, s)
        for _ in range(5):
            await asyncio.sleep(0)
    sent_early = [c["node"] for c in llm.calls]
    state = _state(s)
    await run_node(erinnerungsanker.NODE, state, deps)
    await run_node(router.NODE, state, deps)
    return sent_early, llm.calls, state


def test_the_anchor_and_the_router_ask_at_the_turns_start_what_they_would_ask_in_their_places():
    sent_early, calls, state = asyncio.run(_turn(True, _stimulus()))
    assert sorted(sent_early) == ["erinnerungsanker", "router"]  # before either node ran
    assert [c["node"] for c in calls] == sent_early  # and not again
    assert state.route.management == "keins" and state.anker.geschrieben == []
    _, in_place, _ = asyncio.run(_turn(False, _stimulus()))  # no vorab: the written order, a remote node
    by_node = {c["node"]: c["messages"] for c in in_place}
    assert {c["node"]: c["messages"] for c in calls} == by_node  # the same prompts, byte for byte
    assert "Gestern war ich beim Zahnarzt." in by_node["router"][-1]["content"]


def test_a_turn_without_a_message_of_the_human_starts_no_anchor_call():
    sent_early, calls, state = asyncio.run(_turn(True, _stimulus(None)))
    assert sent_early == ["router"] and "erinnerungsanker" not in [c["node"] for c in calls]


def test_the_router_counts_each_utterance_once_for_the_agents_quota():
    from memory import agent_quoten

    async def go():
        deps = deps_for(ScriptedLLM({"router": [ROUTE]}), redis=Zaehler())
        deps.trace.chain = "character"
        session = asyncio.get_running_loop().create_future()
        session.set_result(TURNS)
        deps.trace.put(enricher.SESSION, session)
        await run_node(router.NODE, _state(_stimulus()), deps)
        await run_node(router.NODE, _state(_stimulus()), deps)  # the same turn run again: counted once
        return deps.services.redis.counted

    assert asyncio.run(go()) == [(agent_quoten.ROUTED, "character", 1)]
