"""perzeption_assistant's early start: its model call goes out on the reply as it stands after the
Thinker, beside the tribunal loop; the node keeps that answer when the reply came through
unchanged (one call in all) and asks anew on the final reply when the loop or the leak guard
changed it (named fallback `voraus_verworfen`) — the turn perceives the reply it sends either way."""
import asyncio
import logging

from pipeline import schedule
from pipeline.nodes import enricher
from pipeline.nodes import perzeption_assistant as pa
from pipeline.runner import run_node, view_for
from pipeline.services import EMBEDDING
from core.state import DraftRecord, PairRecord, Stimulus, TurnState, UrteilRecord
from tests.scripted_llm import ScriptedLLM, deps_for

ANTWORT = '{"emotion": "freude", "arousal": 0.6, "stil": "locker"}'


def _state(reply: str) -> TurnState:
    return TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt="Hallo"),
                     pair=PairRecord(character_name="Nova"), draft=DraftRecord(reply=reply, model="m"))


def _perceived(llm: ScriptedLLM) -> list[str]:
    """The reply text each of the node's model calls was about."""
    return [c["messages"][-1]["content"] for c in llm.calls if c["node"] == pa.NAME]


async def _turn(final: str, llm: ScriptedLLM):
    deps = deps_for(llm)
    # what else the turn's slots hold by then: the embedder's prefetch (a keyed slot), plain values
    deps.trace.put(EMBEDDING.of("Hallo"), asyncio.get_running_loop().create_future())
    deps.trace.put(enricher.ZIELE, object())
    state = _state("Schoen, dass du da bist.")
    pa.voraus(view_for(state, schedule.early_reads(pa.NODE), pa.NAME), deps)  # what the runner does after the Thinker
    await asyncio.sleep(0)  # the early call is on its way while the tribunal judges
    state.urteil = UrteilRecord(reply=final, runden=1)
    await run_node(pa.NODE, state, deps)
    return state, deps


def test_an_unchanged_reply_keeps_the_early_answer(caplog):
    llm = ScriptedLLM({pa.NAME: [ANTWORT]})
    with caplog.at_level(logging.WARNING):
        state, _ = asyncio.run(_turn("Schoen, dass du da bist.", llm))
    assert len(_perceived(llm)) == 1 and "Schoen, dass du da bist." in _perceived(llm)[0]
    assert state.nova_perzeption.emotion == "freude" and state.nova_perzeption.arousal == 0.6
    assert "voraus_verworfen" not in caplog.text


def test_a_changed_reply_is_perceived_anew_and_the_early_answer_is_dropped(caplog):
    early, final = '{"emotion": "trauer", "arousal": 0.9}', ANTWORT
    llm = ScriptedLLM({pa.NAME: [early, final]})
    with caplog.at_level(logging.WARNING):
        state, deps = asyncio.run(_turn("Schoen, dass du da bist. Bis morgen!", llm))
    asked = _perceived(llm)
    assert len(asked) == 2 and "Bis morgen!" not in asked[0] and "Bis morgen!" in asked[1]
    assert state.nova_perzeption.emotion == "freude"  # the answer about the reply she sends
    assert "fallback voraus_verworfen" in caplog.text
    assert deps.trace.llm_calls == 2  # the dropped call is counted: it was made


def test_without_an_early_start_the_node_asks_once():
    llm = ScriptedLLM({pa.NAME: [ANTWORT]})
    state = _state("Gute Nacht.")
    state.urteil = UrteilRecord(reply="Gute Nacht.", runden=1)
    asyncio.run(run_node(pa.NODE, state, deps_for(llm)))  # the written order, or the node deployment
    assert len(_perceived(llm)) == 1 and state.nova_perzeption.emotion == "freude"
