"""perzeption, ei_calc, haltungsraum, emotionale_gravitation: branches and named fallbacks."""
import asyncio
from datetime import datetime, timezone

from pipeline import vocab
from pipeline.nodes import ei_calc, emotionale_gravitation, haltungsraum, perzeption
from core.state import (EmotionsEintrag, GravitationsPunkt, HaltungRecord, MemoryRecord, PairRecord, PerzeptionRecord, RouteRecord, SessionTurn,
                            Stimulus, TurnState)
from tests.scripted_llm import ScriptedLLM, deps_for
from pipeline.runner import run_node


def _state(text="Hallo", **records):
    return TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt=text), **records)


def _decisions(deps):
    return {r.entscheidung: r for r in deps.trace.decisions()}


def test_perzeption_reads_the_answer_and_fits_the_vocabulary():
    llm = ScriptedLLM({"perzeption": ['Hier: {"emotion": "freude", "arousal": 1.7, "intent": "erzaehlen", '
                                      '"tone": "froh", "gespraechs_modus": "plaudern", "beziehungs_dynamik": "vertrauen",'
                                      ' "user_intentionen": ["smalltalk", "erfunden"]}']})
    deps = deps_for(llm)
    out = asyncio.run(run_node(perzeption.NODE, _state("Ich hab heute frei!"), deps))["perzeption"]
    assert (out.emotion, out.arousal, out.gespraechs_modus, out.user_intentionen) == ("freude", 1.0, "plaudern", ["smalltalk"])
    d = _decisions(deps)
    assert d["perzeption.antwort"].outcome == "ok"
    assert d["perzeption.ergebnis"].outcome == "angepasst"
    assert set(d["perzeption.ergebnis"].inputs["angepasst"]) == {"arousal", "user_intentionen"}


def test_perzeption_falls_back_by_name():
    for answer, outcome in (("kein json hier", "kein_json"), ("", "leer"), ('{"arousal": "hoch"}', "ungueltig")):
        deps = deps_for(ScriptedLLM({"perzeption": [answer]}))
        out = asyncio.run(run_node(perzeption.NODE, _state(), deps))["perzeption"]
        assert out.fallback == f"perzeption_{outcome}" and out.emotion == "neutral"
        assert _decisions(deps)["perzeption.antwort"].outcome == outcome
        if answer:  # the unusable answer stands in the decision entry, to be looked at
            assert _decisions(deps)["perzeption.antwort"].inputs["ende"] == answer[-80:]
    llm = ScriptedLLM()
    llm.fail.add("perzeption")
    deps = deps_for(llm)
    assert asyncio.run(run_node(perzeption.NODE, _state(), deps))["perzeption"].fallback == "perzeption_aufruf_gescheitert"


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
    assert rec.emotions_verlauf[0] == EmotionsEintrag(emotion="traurigkeit", arousal=0.8, gewicht=1.0)
    assert rec.nova_emotion == "traurigkeit" and rec.nova_sektor == "traurigkeit"  # strong feeling: empathy
    assert vec("ueberraschung", []).nova_emotion == "neutral"  # weak one: her own state stays


def _rolle(deps):
    return [(r.outcome, r.inputs["menschenseite"]) for r in deps.trace.decisions("ei_calc.rolle")]


def test_the_character_path_reads_the_human_chains_ei_calc():
    """Seed 001 §2: ei_calc runs in both graphs — the user path in the human chain (the human's
    side over the session its enricher loaded), the character path after db_zugriff (Nova's
    empathy update on that side). The human chain's record is read there, not overwritten."""
    state = _state("Alles scheisse!", perzeption=PerzeptionRecord(emotion="aerger", arousal=0.8),
                   memory=MemoryRecord(session_turns=[_turn("freude"), _turn("freude")]))
    deps = deps_for(ScriptedLLM())
    mensch = asyncio.run(run_node(ei_calc.NODE, state, deps))["emotion"]  # human chain: no pair yet
    assert mensch.emotions_vektor == "absturz" and [h.emotion for h in mensch.emotions_verlauf] == [
        "aerger", "freude", "freude"]
    assert (mensch.nova_emotion, mensch.konflikt) == ("neutral", False)  # her prior state is not loaded yet
    assert _rolle(deps) == [("user", "berechnet")]
    # the character chain: db_zugriff wrote her persisted state; what the human side is computed
    # from no longer matters — it is taken over from the human chain's record
    state.pair = PairRecord(character_name="Nova", nova_emotion="freude", nova_arousal=0.9)
    state.memory = MemoryRecord(session_turns=[_turn("aerger"), _turn("aerger")])
    nova = asyncio.run(run_node(ei_calc.NODE, state, deps))["emotion"]
    assert nova.emotions_verlauf == mensch.emotions_verlauf and nova.emotions_vektor == "absturz"
    assert (nova.ei_arousal, nova.sprach_stil) == (mensch.ei_arousal, mensch.sprach_stil)
    assert (nova.nova_emotion, nova.nova_arousal, nova.nova_sektor) == ("aerger", 0.86, vocab.SEKTOR["aerger"])
    assert _rolle(deps)[1] == ("character", "menschenkette")


def test_the_character_path_without_a_human_chain_computes_the_human_side():
    """Nova's own impulse runs no human chain: the character path computes the human's side
    itself, and says so."""
    state = _state(pair=PairRecord(character_name="Nova", nova_emotion="freude", nova_arousal=0.9),
                   memory=MemoryRecord(session_turns=[_turn("freude"), _turn("freude")]),
                   perzeption=PerzeptionRecord(emotion="aerger", arousal=0.8))
    deps = deps_for(ScriptedLLM())
    rec = asyncio.run(run_node(ei_calc.NODE, state, deps))["emotion"]
    assert rec.emotions_vektor == "absturz" and rec.nova_emotion == "aerger" and rec.konflikt is False
    assert _rolle(deps) == [("character", "berechnet")]


def test_sprach_stil_scoring():
    assert ei_calc.sprach_stil("Sehr geehrte Nova, koennten Sie mir bitte helfen?") == "formell"
    assert ei_calc.sprach_stil("digga das war voll krass lol") == "jugendlich"
    assert ei_calc.sprach_stil("ich fuehle mich so allein!!") == "emotional"
    assert ei_calc.sprach_stil("was") == "locker"
    # a window: one short message does not flip the style the human has kept
    formell = ["Koennten Sie mir bitte sagen, wann Sie Zeit haben?", "Sehr geehrte Nova, danke sehr."]
    assert ei_calc.sprach_stil("ok", formell) == "formell"
    assert ei_calc.sprach_stil("digga lol krass", formell[:1]) == "jugendlich"  # the current turn weighs most
    assert ei_calc.sprach_stil("was", ["a"] * 4 + formell) == "locker"  # beyond the window nothing counts


def _haltung(text, intentionen, momentum="high", impulse=False):
    stim = Stimulus(user_id="u", character_id="nova", turn_id="t",
                    **({"eigener_gedanke": text} if impulse else {"user_prompt": text}))
    st = TurnState(stimulus=stim, perzeption=PerzeptionRecord(user_intentionen=intentionen),
                   route=RouteRecord(momentum=momentum), memory=MemoryRecord(user_intentionen=intentionen))
    return haltungsraum.compute(st)


def test_haltungsraum_translates_umfang_into_characters():
    # seed 004 §3.3: the room sets `umfang`, UMFANG_SPANNE translates it into characters (60–175 the seed's row)
    for momentum, umfang in (("low", "knapp"), ("mid", "mittel"), ("high", "ausfuehrlich")):
        rec, info = _haltung("Wie entsteht ein Gammablitz, und warum ist er so hell?", ["frage"], momentum)
        assert rec.umfang == umfang and rec.spanne_zeichen == vocab.UMFANG_SPANNE[umfang]
        assert rec.spanne == f"{rec.spanne_zeichen[0]} bis {rec.spanne_zeichen[1]} Zeichen"
        assert info["deckel"] == "kein_deckel"
    assert vocab.UMFANG_SPANNE["knapp"] == (60, 175)
    # the record's defaults are the table's row `mittel`
    assert HaltungRecord().spanne_zeichen == vocab.UMFANG_SPANNE["mittel"]
    assert HaltungRecord().spanne == haltungsraum.spanne_text(vocab.UMFANG_SPANNE["mittel"])


def test_haltungsraum_caps_the_span_of_short_light_turns_only():
    rec, info = _haltung("haha ok", ["smalltalk", "humor"])
    # the length of the utterance caps the span, downwards only; the room's word stays
    assert rec.umfang == "ausfuehrlich" and info["deckel"] == "deckel_leichte_aeusserung"
    assert rec.spanne_zeichen == (42, 84) and rec.spanne == "42 bis 84 Zeichen"
    assert _haltung("ok", ["bestaetigung"], "low")[0].spanne_zeichen == (40, 80)  # never below the floor
    # one content intention among light ones lifts the cap: short, and still asking for length
    rec, info = _haltung("Erklaere mir die Tritiumvorkommen", ["smalltalk", "frage"])
    assert rec.spanne_zeichen == (350, 700) and info["deckel"] == "kein_deckel"
    assert _haltung("Tritium?", ["frage"])[0].spanne_zeichen == (350, 700)
    # a light utterance long enough to fill the span is not cut; no perceived intention is no licence either
    assert _haltung("x" * 70, ["smalltalk"])[1]["deckel"] == "deckel_ueber_spanne"
    assert _haltung("haha ok", [])[0].spanne_zeichen == (350, 700)
    # her own impulse has no utterance of his to measure
    assert _haltung("Ob Bello den Park vermisst?", ["smalltalk"], impulse=True)[0].spanne_zeichen == (350, 700)


def test_the_responder_direction_carries_the_turns_span():
    from pipeline.nodes import responder
    from tests.unit.test_golden_responder import golden_state

    def regie(intentionen):
        state = golden_state()
        state.stimulus = state.stimulus.model_copy(update={"user_prompt": "haha ok"})
        state.memory = state.memory.model_copy(update={"user_intentionen": intentionen})
        state.haltung, _ = haltungsraum.compute(state)
        (_, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
        return user["content"].split("[REGIE FUER DIESE REPLIK]")[1]

    assert "Umfang: mittel, 42 bis 84 Zeichen." in regie(["smalltalk"])
    assert "Umfang: mittel, 175 bis 350 Zeichen." in regie(["smalltalk", "frage"])
    assert "Saetze" not in regie(["smalltalk"])  # the default prompt speaks characters (seed 004 §3.1)


def test_emotional_gravity_is_normalised():
    empty = emotionale_gravitation.compute([])
    assert empty.term == 0.0 and empty.punkte == 0
    rec = emotionale_gravitation.compute([GravitationsPunkt(quelle="lzg", inhalt=f"e{i}", emotion=e, arousal=a)
                                          for i, (e, a) in enumerate([("traurigkeit", 0.9), ("freude", 0.2),
                                                                      ("traurigkeit", 0.8)])])
    assert 0 < rec.term < 1 and rec.richtung == "traurigkeit" and rec.punkte == 3
