"""perzeption, ei_calc, haltungsraum, emotionale_gravitation: branches and named fallbacks."""
import asyncio
from datetime import datetime, timezone

from pipeline.nodes import ei_calc, emotionale_gravitation, haltungsraum, perzeption
from pipeline.state import (MemoryRecord, PairRecord, PerzeptionRecord, RouteRecord, SessionTurn, Stimulus,
                            TurnState)
from tests.scripted_llm import ScriptedLLM, deps_for
from pipeline.runner import run_node


def _state(text="Hallo", **records):
    return TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt=text), **records)


def _decisions(deps):
    return {r["entscheidung"]: r for r in deps.trace.rows if r["art"] == "switch"}


def test_perzeption_reads_the_answer_and_fits_the_vocabulary():
    llm = ScriptedLLM({"perzeption": ['Hier: {"emotion": "freude", "arousal": 1.7, "intent": "erzaehlen", '
                                      '"tone": "froh", "gespraechs_modus": "plaudern", "beziehungs_dynamik": "vertrauen",'
                                      ' "user_intentionen": ["smalltalk", "erfunden"]}']})
    deps = deps_for(llm)
    out = asyncio.run(run_node(perzeption, _state("Ich hab heute frei!"), deps))["perzeption"]
    assert (out.emotion, out.arousal, out.gespraechs_modus, out.user_intentionen) == ("freude", 1.0, "plaudern", ["smalltalk"])
    d = _decisions(deps)
    assert d["perzeption.antwort"]["outcome"] == "ok"
    assert d["perzeption.ergebnis"]["outcome"] == "angepasst"
    assert set(d["perzeption.ergebnis"]["inputs"]["angepasst"]) == {"arousal", "user_intentionen"}


def test_perzeption_falls_back_by_name():
    for answer, outcome in (("kein json hier", "kein_json"), ("", "leer"), ('{"arousal": "hoch"}', "ungueltig")):
        deps = deps_for(ScriptedLLM({"perzeption": [answer]}))
        out = asyncio.run(run_node(perzeption, _state(), deps))["perzeption"]
        assert out.fallback == f"perzeption_{outcome}" and out.emotion == "neutral"
        assert _decisions(deps)["perzeption.antwort"]["outcome"] == outcome
    llm = ScriptedLLM()
    llm.fail.add("perzeption")
    deps = deps_for(llm)
    assert asyncio.run(run_node(perzeption, _state(), deps))["perzeption"].fallback == "perzeption_aufruf_gescheitert"


def _turn(emotion, arousal=0.5):
    return SessionTurn(rolle="user", sprecher="Person B", inhalt="x", turn_id="t0", time=datetime.now(timezone.utc),
                       emotion=emotion, arousal=arousal)


def test_ei_calc_vectors_and_turn_zero():
    def vec(now, history):
        state = _state(perzeption=PerzeptionRecord(emotion=now, arousal=0.8),
                       memory=MemoryRecord(session_turns=[_turn(e) for e in history]), pair=PairRecord(character_name="Nova"))
        return ei_calc.run_sync(state)

    assert vec("aerger", ["freude", "freude"]).emotions_vektor == "absturz"  # turn 0 sees the fall at once
    assert vec("frustration", ["neutral", "neutral"]).emotions_vektor == "einbruch"
    assert vec("freude", ["traurigkeit", "traurigkeit"]).emotions_vektor == "erholung"
    assert vec("traurigkeit", ["neutral", "frustration"]).emotions_vektor == "spirale"
    assert vec("neutral", []).emotions_vektor == "plateau"
    assert vec("neutral", ["neutral", "freude", "aerger"]).emotions_vektor == "stabilisierung"
    rec = vec("traurigkeit", ["neutral"])
    assert rec.emotions_verlauf[0] == {"emotion": "traurigkeit", "arousal": 0.8, "gewicht": 1.0}
    assert rec.nova_emotion == "traurigkeit" and rec.nova_sektor == "traurigkeit"  # strong feeling: empathy
    assert vec("ueberraschung", []).nova_emotion == "neutral"  # weak one: her own state stays


def test_sprach_stil_scoring():
    assert ei_calc.sprach_stil("Sehr geehrte Nova, koennten Sie mir bitte helfen?") == "formell"
    assert ei_calc.sprach_stil("digga das war voll krass lol") == "jugendlich"
    assert ei_calc.sprach_stil("ich fuehle mich so allein!!") == "emotional"
    assert ei_calc.sprach_stil("was") == "locker"


def test_haltungsraum_caps_short_light_turns_only():
    def h(text, intentionen, momentum="high"):
        st = _state(text, perzeption=PerzeptionRecord(user_intentionen=intentionen),
                    route=RouteRecord(momentum=momentum), memory=MemoryRecord(user_intentionen=intentionen))
        return haltungsraum.compute(st)

    rec, grund = h("haha ok", ["smalltalk", "humor"])
    assert rec.umfang == "knapp" and grund == "deckel_kurze_leichte_aeusserung" and rec.spanne == "ein bis zwei Saetzen"
    rec, grund = h("Erklaere mir Tritium", ["smalltalk", "frage"])  # one substantive intention lifts the cap
    assert rec.umfang == "ausfuehrlich" and grund == "momentum_high"


def test_emotional_gravity_is_normalised():
    empty = emotionale_gravitation.compute([])
    assert empty.term == 0.0 and empty.punkte == 0
    rec = emotionale_gravitation.compute([{"emotion": "traurigkeit", "arousal": 0.9}, {"emotion": "freude", "arousal": 0.2},
                                          {"emotion": "traurigkeit", "arousal": 0.8}])
    assert 0 < rec.term < 1 and rec.richtung == "traurigkeit" and rec.punkte == 3
