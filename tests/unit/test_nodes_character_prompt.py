"""The character reaches the prompts: scene, way of speaking and example dialogue in the responder's
stable system blocks, the binding nature last ([PERSON A — IHR WESEN]); identity in [PERSON A — WER
SIE IST] with the profiles the background grows, after the history; the Verfasser and the tribunal
see the short form."""
import asyncio

from pipeline.nodes import responder, tribunal, verfasser
from core.state import DraftRecord, KontextRecord, PairRecord
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.stores.test_nodes_chain_parts import _full_state
from pipeline.runner import run_node

MIRA = PairRecord(
    character_name="Mira",
    identitaet="{{char}} ist Leuchtturmwaerterin auf Hallig Nordlicht.\n\nPersoenlichkeit: ruhig, trocken",
    sprechweise="knapp und norddeutsch, sagt lieber zu wenig als zu viel",
    szenario="{{user}} strandet bei Sturm an ihrer Tuer.",
    beispieldialog="<START>\n{{user}}: Wie alt ist der Turm?\n{{char}}: Aelter als meine Geduld.",
    charakter_anweisung="Bleib in der Rolle.", direktiven=["Duze mich."])


def _block(text: str, name: str) -> str:
    """The text of one [BLOCK] up to the next block marker."""
    start = text.index(name) + len(name)
    nxt = [i for i in (text.find("\n[", start),) if i != -1]
    return text[start:nxt[0] if nxt else len(text)]


def _messages(text="Ich vermisse Bello"):
    state = _full_state()
    state.pair = MIRA
    state.stimulus = state.stimulus.model_copy(update={"user_prompt": text})
    (system, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    return system["content"], user["content"]


def test_the_character_stands_in_the_stable_blocks_where_seed_004_puts_them():
    system, user = _messages()
    rolle = _block(system, "[ROLLE]")
    assert "Die Szene, in der die beiden sich begegnen: Person B strandet bei Sturm an ihrer Tuer." in rolle
    assert "[PERSON A — WER SIE IST]" not in system
    wer = _block(user, "[PERSON A — WER SIE IST]")
    assert user.index("[GESPRAECHSVERLAUF]") < user.index("[SZENE]") < user.index("[PERSON A — WER SIE IST]")
    assert "Wie sie angelegt ist: Mira ist Leuchtturmwaerterin auf Hallig Nordlicht." in wer
    assert "Persoenlichkeit: ruhig, trocken" in wer
    wesen = _block(system, "[PERSON A — IHR WESEN]")
    assert system.rstrip().endswith(wesen.rstrip())  # the binding block stays last
    assert wesen.index("Bleib in der Rolle.") < wesen.index("Wie Mira spricht: knapp und norddeutsch")
    assert "So klingt Mira" in wesen and "Person B: Wie alt ist der Turm?\nMira: Aelter als meine Geduld." in wesen
    # placeholders are filled; nothing of the character leaks into the per-turn message
    assert "{{" not in system and "<START>" in wesen
    assert "Leuchtturmwaerterin" not in system and "norddeutsch" not in user


def test_a_cards_user_placeholder_is_his_name_when_his_client_sent_one():
    state = _full_state()
    state.pair = MIRA.model_copy(update={"identitaet": "{{char}} wartet auf <USER>."})
    state.stimulus = state.stimulus.model_copy(update={"user_prompt": "Hallo", "person_name": "Bert"})
    (system, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    assert "Bert strandet bei Sturm an ihrer Tuer." in system["content"]
    assert "Bert: Wie alt ist der Turm?\nMira: Aelter als meine Geduld." in system["content"]
    assert "Mira wartet auf Bert." in user["content"]
    assert "Person B strandet" not in system["content"]


def test_the_system_message_is_byte_identical_across_turns():
    assert _messages("Hallo")[0] == _messages("Wie geht es dir heute?")[0]


def test_grown_profiles_leave_the_system_message_and_the_history_as_they_were():
    """The background grows her and his profiles after a turn; the engine can still reuse the
    system message and the whole history, and the next prompt shows the growth after it."""
    def prompt(pair):
        state = _full_state()
        state.pair = pair
        (system, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
        return system["content"], user["content"]

    grown = MIRA.model_copy(update={"nova_kern": "Mira ist geduldiger geworden.", "mensch_kern": "Er segelt.",
                                    "nova_beziehung": "Sie vertraut ihm.", "nova_adaptiv": "Der Sturm."})
    (sys_a, user_a), (sys_b, user_b) = prompt(MIRA), prompt(grown)
    assert sys_a == sys_b
    history_end = user_a.index("[SZENE]")
    assert user_a[:history_end] == user_b[:history_end] and "Turn 1" in user_a[:history_end]
    for text in ("Gewachsene Persoenlichkeit: Mira ist geduldiger geworden.", "Er segelt.",
                 "Wie Mira Person B sieht: Sie vertraut ihm.", "Was sie gerade beschaeftigt: Der Sturm."):
        assert text in user_b[history_end:] and text not in user_a, text


def test_a_character_without_fields_keeps_the_defaults():
    state = _full_state()
    (system, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    assert "Die Szene" not in system["content"] and "Wie sie angelegt ist" not in system["content"] + user["content"]
    assert "Nova ist warm, neugierig und aufmerksam." in _block(system["content"], "[PERSON A — IHR WESEN]")


def test_verfasser_and_tribunal_see_who_she_is():
    llm = ScriptedLLM({"verfasser": ["Mira stellt fest: Sturm."], "tribunal": ['{"urteil": "ok", "gruende": []}']})
    deps = deps_for(llm)
    state = _full_state()
    state.pair = MIRA
    state.kontext = KontextRecord(gedaechtnis_verfasser="- (bibliothek) Fenja: Miras Schwester")
    asyncio.run(run_node(verfasser.NODE, state, deps))
    state.draft = DraftRecord(reply="Komm rein.", model="m")
    asyncio.run(run_node(tribunal.NODE, state, deps))
    prompts = {c["node"]: "\n".join(m["content"] for m in c["messages"]) for c in llm.calls}
    for node in ("verfasser", "tribunal"):
        assert "Mira ist Leuchtturmwaerterin auf Hallig Nordlicht." in prompts[node], node
        assert "Sprechweise: knapp und norddeutsch" in prompts[node] and "{{" not in prompts[node]
    assert "faellt aus der Figur" in prompts["tribunal"]
