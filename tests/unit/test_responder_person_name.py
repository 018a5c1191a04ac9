"""The person's name reaches Nova: [PERSON B — WER ER IST] names him when his client sent a name with
this message or with one in the session window; a name that is the character's own never stands
there (praegung keeps him as Person B then too, fallback `name_wie_figur`)."""
from pipeline.nodes import responder
from core.state import SessionTurn, Stimulus
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.unit.test_golden_responder import T0, golden_state


def _wer_er_ist(state) -> list[str]:
    (_, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    return user["content"].split("[PERSON B — WER ER IST]")[1].split("[ZWISCHEN BEIDEN]")[0].strip().splitlines()


def _mit_name(name: str | None):
    state = golden_state()
    for t in state.memory.session_turns:
        t.name = None
    state.stimulus = Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt="Hallo!",
                              received_at=T0, person_name=name)
    return state


def test_the_name_sent_with_the_message_stands_first_in_who_he_is():
    assert _wer_er_ist(_mit_name("Caroline")) == [
        "Sein Name: Caroline", "Sein Kern: Person B arbeitet in der Pflege.",
        "Was ihn gerade beschaeftigt: Der Umzug naechste Woche."]


def test_without_a_name_the_block_is_as_the_seed_has_it():
    assert _wer_er_ist(_mit_name(None))[0] == "Sein Kern: Person B arbeitet in der Pflege."


def test_a_message_without_a_name_keeps_the_latest_name_of_the_window():
    state = _mit_name(None)
    state.memory.session_turns += [
        SessionTurn(rolle="user", sprecher="Person B", inhalt="Hi", turn_id="a", time=T0, name="Caro"),
        SessionTurn(rolle="user", sprecher="Person B", inhalt="Ich bins", turn_id="b", time=T0, name="Caroline"),
        SessionTurn(rolle="assistant", sprecher="Nova", inhalt="Schoen!", turn_id="b", time=T0)]
    assert _wer_er_ist(state)[0] == "Sein Name: Caroline"
    state.pair.mensch_kern = state.pair.mensch_themen = ""
    assert _wer_er_ist(state) == ["Sein Name: Caroline"]


def test_the_characters_own_name_is_never_his():
    assert _wer_er_ist(_mit_name("NOVA"))[0] == "Sein Kern: Person B arbeitet in der Pflege."
