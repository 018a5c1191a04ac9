"""Emotional gravity acts on this reply (seed 001 §2: the node stands before the responder): the
responder's [PERSON A — IHRE EMOTION] carries her emotion after the pull of her emotional memories."""
import asyncio

from pipeline.nodes import emotionale_gravitation, responder
from pipeline.nodes.ei_calc_persist import ZUG_RICHTUNG
from pipeline.runner import run_node
from core.state import EmotionRecord, EmotionsEintrag, GravitationsPunkt, MemoryRecord
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.unit.test_golden_responder import golden_state

TRAUER = [GravitationsPunkt(quelle="lzg", inhalt="Der Abschied", emotion="traurigkeit", arousal=0.9)] * 4


def _run(punkte, emotion="freude", arousal=0.4):
    state = golden_state()
    state.emotion = (state.emotion or EmotionRecord()).model_copy(update={"nova_emotion": emotion,
                                                                          "nova_arousal": arousal})
    state.memory = state.memory.model_copy(update={"emotionale_gravitationspunkte": punkte})
    deps = deps_for(ScriptedLLM())
    asyncio.run(run_node(emotionale_gravitation.NODE, state, deps))
    d = {r.entscheidung: r for r in deps.trace.decisions()}
    return state, d["emotionale_gravitation.emotion"]


def _ihre_emotion(state) -> str:
    (system, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    text = system["content"] + "\n" + user["content"]
    return text.split("[PERSON A — IHRE EMOTION]")[1].strip().splitlines()[0]


def test_a_strong_pull_turns_this_reply_s_emotion():
    state, d = _run(TRAUER)
    g = state.gravitation
    assert g.term >= ZUG_RICHTUNG and g.richtung == "traurigkeit"
    assert (g.emotion, d.outcome) == ("traurigkeit", "richtung") and g.arousal > 0.4
    zeile = _ihre_emotion(state)
    assert f"fuehlt gerade traurigkeit (Erregung {g.arousal:.1f})" in zeile
    assert "fuehlt gerade freude" not in zeile
    # her course starts with this turn's state after the pull
    assert responder.nova_verlauf(state)[0] == EmotionsEintrag(emotion="traurigkeit", arousal=g.arousal, gewicht=1.0)
    # and [SZENE] places her in the sector of that emotion, not of the one before the pull
    (_, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    assert "Sektor von Nova: traurigkeit." in user["content"].split("[SZENE]")[1]


def test_a_weak_pull_raises_only_the_arousal_and_no_pull_leaves_her_as_ei_calc_computed():
    weak, d = _run([GravitationsPunkt(quelle="kzg", inhalt="x", emotion="traurigkeit", arousal=0.3)])
    g = weak.gravitation
    assert 0 < g.term < ZUG_RICHTUNG and d.outcome == "erregung"
    assert g.emotion == "freude" and g.arousal > 0.4
    assert f"fuehlt gerade freude (Erregung {g.arousal:.1f})" in _ihre_emotion(weak)
    none, d = _run([])
    assert d.outcome == "kein_zug" and (none.gravitation.emotion, none.gravitation.arousal) == ("freude", 0.4)
    assert "fuehlt gerade freude (Erregung 0.4)" in _ihre_emotion(none)


def test_without_ei_calc_s_emotion_the_node_names_it_and_the_responder_shows_no_block():
    state = golden_state()
    state.emotion = None
    state.memory = MemoryRecord(emotionale_gravitationspunkte=TRAUER)
    deps = deps_for(ScriptedLLM())
    asyncio.run(run_node(emotionale_gravitation.NODE, state, deps))
    d = {r.entscheidung: r for r in deps.trace.decisions()}
    assert d["emotionale_gravitation.emotion"].outcome == "keine_emotion" and state.gravitation.emotion is None
    assert state.gravitation.term > 0  # the pull itself stays for ei_calc_persist
