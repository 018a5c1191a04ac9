"""[DEIN SPRACHSTIL]'s tone follows the human at once (seed 004 §4.1: "Der Ton kommt aus dem
Register des aktuellen Nutzer-Turns … Der Ton folgt dem Nutzer sofort, die Landschaft mit ein bis
zwei Turns Verzug")."""
import asyncio

from pipeline.nodes import ei_calc, responder
from pipeline.runner import run_node
from core.state import PerzeptionRecord, SessionTurn, Stimulus, TurnState
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.unit.test_golden_responder import T0, golden_state

FORMELL = "Koennten Sie mir bitte helfen?"


def _state(text: str | None) -> TurnState:
    """The golden turn after four formal turns of his, with ei_calc's result for this message."""
    state = golden_state(impulse=text is None)
    if text is not None:
        state.stimulus = Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt=text, received_at=T0)
    state.memory.session_turns = [SessionTurn(rolle="user", sprecher="Person B", inhalt=FORMELL, turn_id=f"f{i}",
                                              time=T0) for i in range(4)]
    state.perzeption, state.emotion = state.perzeption or PerzeptionRecord(), None
    state.emotion = asyncio.run(run_node(ei_calc.NODE, state, deps_for(ScriptedLLM())))["emotion"]
    return state


def _ton(state: TurnState) -> str:
    (_, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    stil = user["content"].split("[DEIN SPRACHSTIL]")[1]
    return stil.split("Ton: ")[1].split(" ·")[0].strip()


def test_the_tone_follows_a_changed_register_at_once():
    state = _state("na, alles gut? :)")
    # the style of his last turns is still formal (ei_calc weighs the window) ...
    assert state.emotion.sprach_stil == "formell"
    # ... but the tone of this reply follows the register of this message
    assert _ton(state) == "locker"


def test_a_message_without_any_register_keeps_the_style_of_his_last_turns():
    assert _ton(_state("Ich war heute im Park.")) == "formell"
    assert _ton(_state(None)) == "formell"  # an impulse: no message of his to follow
