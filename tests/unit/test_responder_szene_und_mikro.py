"""The responder's computed parts: the colour tone rewritten for the actor (seed 004 §3.3), the EI
micro building blocks only where the situation calls for them (§3.2 b), her own emotion history."""
import logging

import pytest

from pipeline import vocab
from pipeline.figur import du_fassung
from pipeline.nodes import responder
from core.state import EmotionsEintrag, LandschaftRecord
from tests.unit.test_golden_responder import golden_state


@pytest.mark.parametrize("analyst, actor", [
    ("Nova ist offen und zugewandt, der Nutzer haelt Abstand.",
     "Du bist offen und zugewandt, der Nutzer haelt Abstand."),
    ("Heute wirkt Nova muede, Person B draengt.", "Heute wirkst Du muede, Person B draengt."),
    ("Person B sucht Naehe zu Nova, Nova haelt sich zurueck.", "Person B sucht Naehe zu Dir, Du haeltst dich zurueck."),
    ("Nova arbeitet mit, der Mensch setzt den Ton.", "Du arbeitest mit, der Mensch setzt den Ton."),
    ("Ein ruhiger Abend ohne Spannung.", "Ein ruhiger Abend ohne Spannung."),
])
def test_the_analyst_sentence_is_rewritten_for_the_actor(analyst, actor):
    assert du_fassung(analyst, "Nova") == actor


@pytest.mark.parametrize("analyst", ["Nova ist traurig, sie hoert zu.", "Novas Blick ist warm.",
                                     "Person B vertraut Nova.", "Nova und Person B lachen."])
def test_a_remaining_third_person_reference_leaves_no_mixed_address(analyst):
    assert du_fassung(analyst, "Nova") is None


def test_the_scene_carries_the_rewritten_colour_tone_or_none(caplog):
    state = golden_state()
    assert responder.farbton(state) == (" Farbton: Du bist offen und zugewandt, Person B haelt Abstand.", "du_fassung")
    state.landschaft = LandschaftRecord(cluster="paradox", gv_detail="")
    assert responder.farbton(state) == ("", "kein_farbton")  # no colour tone in gv_detail, none in the scene
    caplog.set_level(logging.WARNING, logger="novaberg.node.responder")
    state.landschaft = LandschaftRecord(cluster="paradox", gv_detail="Nova ist still, sie wartet.")
    assert responder.farbton(state) == ("", "ausgelassen") and "farbton_ausgelassen" in caplog.text


def test_the_ei_micro_direction_holds_only_what_the_situation_calls_for():
    state = golden_state()
    assert [k for k, _ in responder.ei_mikro(state)] == ["energie", "vektor", "ventil", "anti_therapeut", "rueckbezug"]
    # on an impulse turn Person B said nothing new: what answers his message is left out
    assert [k for k, _ in responder.ei_mikro(golden_state(impulse=True))] == ["vektor", "rueckbezug"]
    calm = golden_state()
    calm.perzeption = calm.perzeption.model_copy(update={"arousal": 0.3})
    calm.emotion = calm.emotion.model_copy(update={"emotions_vektor": "plateau", "emotions_verlauf": []})
    assert responder.ei_mikro(calm) == []


def test_a_change_of_direction_needs_three_entries():
    v = [EmotionsEintrag(emotion=e) for e in ("aerger", "freude", "traurigkeit")]
    assert responder.richtungswechsel(v) and not responder.richtungswechsel(v[:2])
    assert not responder.richtungswechsel([EmotionsEintrag(emotion=e) for e in ("aerger", "frustration", "freude")])


def test_her_own_emotion_history_is_this_turn_then_her_replies():
    history = responder.nova_verlauf(golden_state())
    assert [h.emotion for h in history] == ["zufriedenheit", "neutral", "freude"]
    assert [h.gewicht for h in history] == [1.0, 0.7, 0.49]


def test_every_vector_and_cluster_has_its_text():
    assert set(vocab.EI_MIKRO_VEKTOR) == set(vocab.EMOTIONS_VEKTOREN) - {"plateau"}
    assert tuple(vocab.LANDSCHAFTEN) == vocab.CLUSTER and len(vocab.CLUSTER) == 14


@pytest.mark.parametrize("stored, shown", [
    ("[emotionaler_ausdruck | aerger | emotional] Mein Chef nervt.", "Mein Chef nervt."),
    ("[Nova-Impuls] Ob Bello schlaeft?", "Ob Bello schlaeft?"),
    ("[1] erster Punkt", "[1] erster Punkt"),  # a list marker is no tag
    ("[hier](https://example.org) lesen", "[hier](https://example.org) lesen"),  # nor a link
])
def test_salience_tags_are_stripped_from_the_history(stored, shown):
    assert responder.TAG.sub("", stored) == shown
