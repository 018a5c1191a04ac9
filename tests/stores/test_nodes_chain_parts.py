"""reducer, router, gv_node, the tribunal loop and the responder's blocks, with a scripted LLM."""
import asyncio
from datetime import datetime, timezone

from core.bestand import Termin
from pipeline.nodes import gv_node, reducer, responder, router
from pipeline.chains import TRIBUNAL_LOOP
from pipeline.runner import ChainRunner
from core.state import (DraftRecord, EmotionRecord, HaltungRecord, LandschaftRecord, MemoryRecord, PairRecord,
                            PerzeptionRecord, PlanRecord, SessionTurn, Stimulus, TurnState, VerfasserRecord)
from tests.scripted_llm import ScriptedLLM, Zaehler, deps_for
from tests.stores.test_nodes_planner_agents import RecordingStore
from pipeline.runner import run_node


def _state(text="Hallo", impulse=False, **records):
    stim = Stimulus(user_id="u", character_id="nova", turn_id="t",
                    **({"eigener_gedanke": text, "herkunft": "eigener_impuls"} if impulse else {"user_prompt": text}))
    return TurnState(stimulus=stim, pair=PairRecord(character_name="Nova", direktiven=["Duze mich."]), **records)


def _decisions(deps):
    return [(r.entscheidung, r.outcome) for r in deps.trace.decisions()]


def test_reducer_dedups_scales_caps_and_passes_lzg_through():
    resonanz = {"erinnerungen": [{"id": 1, "inhalt": "Bello", "tiefe": 0, "eingefallen_ueber": "Anker"}], "ids": [1]}
    mem = MemoryRecord(
        kzg=[{"inhalt": "Bello ist ein Beagle", "similarity": 0.8}, {"inhalt": "bello  ist ein beagle", "similarity": 0.9}]
        + [{"inhalt": f"k{i}", "similarity": 0.5} for i in range(7)],
        bibliothek=[{"titel": "Hunde", "inhalt": "Beagle jagen gern", "gewicht": 0.4}],
        plugins={"notizen": [{"name": "Einkauf", "zusammenfassung": "Milch"}]}, lzg_resonanz=resonanz)
    deps = deps_for(ScriptedLLM())
    out = asyncio.run(run_node(reducer.NODE, _state(memory=mem), deps))["kontext"]
    kept = reducer.reduce(reducer.entries(mem))
    beagles = [e for e in kept if "beagle" in e["inhalt"].lower() and e["quelle"] == "kzg"]
    assert len(beagles) == 1 and beagles[0]["gewicht"] == 0.9  # highest weight wins
    lines = out.gedaechtnis_verfasser.split("\n")
    assert sum(x.startswith("- (kzg) ") for x in lines) == reducer.CAPS["kzg"]
    assert sum("beagle" in x.lower() and x.startswith("- (kzg) ") for x in lines) == 1
    assert "(erinnerung) Bello" in out.gedaechtnis_verfasser and "(notizen) Einkauf — Milch" in out.gedaechtnis_verfasser


def test_router_fallback_and_asked_appointments():
    deps = deps_for(ScriptedLLM({"router": ["unverstaendlich"]}), redis=Zaehler())
    out = asyncio.run(run_node(router.NODE, _state(memory=MemoryRecord()), deps))["route"]
    assert out.fallback == "router_regeln" and out.management == "keins"
    flags = next(r.inputs for r in deps.trace.decisions("router.management"))
    assert flags["needs_memory"] is True and flags["needs_timeline"] is False
    assert ("router.antwort", "kein_json") in _decisions(deps)
    zahnarzt = Termin(id=5, typ="termin", titel="Zahnarzt", personen=[], beginn_utc="2026-12-07T13:00:00+00:00",
                      beginn_lokal="2026-12-07T14:00:00+01:00", wochentag="Montag", ende_utc=None, turn_id=None)
    store = RecordingStore({"timeline.find_by_keyword": [zahnarzt]})
    ans = ('{"intent": "frage", "management": "keins", "needs_timeline": true, '
           '"timeline_query": {"art": "search", "stichwort": "Zahnarzt"}, "momentum": "sehr hoch"}')
    deps = deps_for(ScriptedLLM({"router": [ans]}), store=store, redis=Zaehler())
    out = asyncio.run(run_node(router.NODE, _state("Wann war nochmal der Zahnarzt?", memory=MemoryRecord()), deps))["route"]
    assert out.termine == [zahnarzt.model_dump(mode="json")] and out.termine[0]["titel"] == "Zahnarzt"
    assert out.momentum == "mid"
    assert store.calls[0][0] == "timeline.find_by_keyword"
    assert ("router.termine", "search") in _decisions(deps)


def test_router_keeps_an_explicit_request_the_model_missed():
    # the model answered keins for an explicit note: the rules' reading stands, named
    ans = '{"intent": "mitteilung", "management": "keins", "momentum": "mid"}'
    deps = deps_for(ScriptedLLM({"router": [ans]}), redis=Zaehler())
    out = asyncio.run(run_node(router.NODE, _state("Notiz Einkauf: Milch und Brot", memory=MemoryRecord()), deps))["route"]
    assert out.management == "notizen" and out.fallback is None and out.intent == "mitteilung"
    assert ("router.management_quelle", "management_regel") in _decisions(deps)
    # a cut answer that ended before it named a management: the same
    deps = deps_for(ScriptedLLM({"router": ['{"intent": "auftrag", "needs_memory": false, "momen']}), redis=Zaehler())
    out = asyncio.run(run_node(router.NODE, _state("Trag einen Termin ein: Zahnarzt morgen", memory=MemoryRecord()),
                               deps))["route"]
    assert out.management == "timeline" and ("router.antwort", "geschlossen") in _decisions(deps)
    # the model's reading of a plain message and its own management stay untouched
    for text, ans, want in (("Wie geht es dir?", '{"management": "keins"}', "keins"),
                            ("Notiz Einkauf: Milch", '{"management": "timeline"}', "timeline")):
        deps = deps_for(ScriptedLLM({"router": [ans]}), redis=Zaehler())
        out = asyncio.run(run_node(router.NODE, _state(text, memory=MemoryRecord()), deps))["route"]
        assert out.management == want
        assert not any(k == "router.management_quelle" for k, _ in _decisions(deps))


def test_gv_node_unknown_cluster_falls_back_to_paradox(stores):
    from redis.asyncio import Redis

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            deps = deps_for(ScriptedLLM({"gv_node": ['{"cluster": "mondlandschaft", "gv_detail": "Still.", "werkzeug": "frage"}']}),
                            redis=r, turn=("gvu", "nova", "t"))
            out = await run_node(gv_node.NODE, _state(memory=MemoryRecord()), deps)
            stored = await r.hgetall(gv_node.gv_key("u", "nova"))
            return out["landschaft"], stored, deps
        finally:
            await r.aclose()

    rec, stored, deps = asyncio.run(go())
    assert rec.cluster == "paradox" and rec.werkzeug == "Frage" and stored[b"cluster"] == b"paradox"
    assert ("gv_node.cluster", "paradox") in _decisions(deps)


def test_tribunal_loop_corrects_until_it_passes_and_ships_the_last_version():
    llm = ScriptedLLM({"tribunal": ['{"urteil": "mangel", "gruende": ["beantwortet die Frage nicht"]}',
                                    '{"urteil": "ok", "gruende": []}'],
                       "corrector": ["Bello ist ein Beagle."]})
    state = _state("Was fuer ein Hund ist Bello?", draft=DraftRecord(reply="Schoenes Wetter heute.", model="m"))
    deps = deps_for(llm)
    asyncio.run(ChainRunner(chain=(TRIBUNAL_LOOP,)).run(state, deps))
    assert state.urteil.reply == "Bello ist ein Beagle." and state.urteil.bestanden and state.urteil.runden == 1
    assert [u.urteil for u in state.urteil.urteile] == ["mangel", "ok"]
    assert ("evaluate.entscheidung", "korrektur") in _decisions(deps)
    assert ("evaluate.entscheidung", "bestanden") in _decisions(deps)
    # a tribunal that never passes stops at the bound; the last version ships
    llm = ScriptedLLM({"tribunal": ['{"urteil": "mangel", "gruende": ["x"]}'], "corrector": [""]})
    state = _state("?", draft=DraftRecord(reply="Erste Fassung.", model="m"))
    deps = deps_for(llm)
    asyncio.run(ChainRunner(chain=(TRIBUNAL_LOOP,)).run(state, deps))
    assert state.urteil.reply == "Erste Fassung." and ("evaluate.entscheidung", "grenze_erreicht") in _decisions(deps)
    assert ("corrector.ergebnis", "vorige_fassung") in _decisions(deps)


def _full_state(impulse=False, stil="locker", cut=False):
    turns = [SessionTurn(rolle="user", sprecher="Person B", inhalt="[emotionaler_ausdruck] Hi", turn_id="a",
                         time=datetime.now(timezone.utc), emotion="freude", arousal=0.6)]
    return _state("Ich vermisse Bello" if not impulse else "Ob Bello den Park vermisst?", impulse=impulse,
                  memory=MemoryRecord(session_turns=turns), perzeption=PerzeptionRecord(emotion="traurigkeit"),
                  emotion=EmotionRecord(sprach_stil=stil, emotions_vektor="einbruch", nova_emotion="traurigkeit"),
                  plan=PlanRecord(task_block="Erfolg: Nova hat soeben selbst erledigt: Notiz angelegt.", task_context_cut=cut),
                  landschaft=LandschaftRecord(cluster="lagerfeuer", gv_detail="Ruhig."), haltung=HaltungRecord(),
                  verfasser=VerfasserRecord(inhalt="Nova stellt fest, dass Bello fehlt."))


def test_responder_blocks_in_order():
    deps = deps_for(ScriptedLLM())
    (system, user), info = [m["content"] for m in responder.build_messages(_full_state(), deps, "m")[0]], \
        responder.build_messages(_full_state(), deps, "m")[1]
    # seed 004 §3.1: coarse to fine, the binding blocks last — [DIREKTIVEN] and [PERSON A — IHR WESEN]
    # close the system message, [REGIE FUER DIESE REPLIK] the user message
    order = ["[ROLLE]", "[REGELN]", "[DIREKTIVEN]", "[PERSON A — IHR WESEN]"]
    assert [system.index(b) for b in order] == sorted(system.index(b) for b in order)
    assert system.rindex("\n[") == system.index("[PERSON A — IHR WESEN]") - 1
    # what changes from turn to turn, the grown profiles with it, after the history (prompts/README.md)
    uorder = ["[GESPRAECHSVERLAUF]", "[SZENE]", "[PERSON A — WER SIE IST]", "[PERSON A — IHRE EMOTION]",
              "[PERSON B — WER ER IST]", "[ZWISCHEN BEIDEN]", "[AUFGABE]",
              "[PERSON B — WIE ER GERADE DA IST]", "[INHALT]", "[AKTUELLER PROMPT]", "[DEIN SPRACHSTIL]",
              "[REGIE FUER DIESE REPLIK]"]
    assert [user.index(b) for b in uorder] == sorted(user.index(b) for b in uorder)
    assert user.rindex("\n[") == user.index("[REGIE FUER DIESE REPLIK]") - 1
    assert "----- Turn 1 (freude, a=0.6) -----\nPerson B: Hi\n----- 1 Turn, Turn 1 ist der neueste -----" in user
    assert "Duze mich." in system
    assert "[emotionaler_ausdruck]" not in user  # salience tags are stripped from the history (§4)
    assert "[EIGENER GEDANKE]" not in system and info["form"] == "verlauf_mit_reiz"
    assert "eingebrochen" in user  # the EI micro direction of the vector
    # on an impulse turn the own thought joins the system message before the rules, not after them
    (isystem, _), _ = responder.build_messages(_full_state(impulse=True), deps, "m")
    iorder = ["[ROLLE]", "[EIGENER GEDANKE]", "[REGELN]", "[DIREKTIVEN]", "[PERSON A — IHR WESEN]"]
    assert [isystem["content"].index(b) for b in iorder] == sorted(isystem["content"].index(b) for b in iorder)


def test_responder_impulse_variant_cut_and_missing_style(caplog):
    import logging

    caplog.set_level(logging.INFO, logger="novaberg.node.responder")
    deps = deps_for(ScriptedLLM())
    state = _full_state(impulse=True, stil="", cut=True)
    state.landschaft = None  # no landscape and no style: [DEIN SPRACHSTIL] has nothing to say (§4.1)
    (system, user), info = [m["content"] for m in responder.build_messages(state, deps, "m")[0]], \
        responder.build_messages(state, deps, "m")[1]
    assert "[EIGENER GEDANKE]" in system and "Ob Bello den Park vermisst?" in system
    assert "Person B hat nichts Neues gesagt" in user and "[PERSON B — WIE ER GERADE DA IST]" not in user
    assert "[AKTUELLER PROMPT]" not in user  # §4: the opening replaces the prompt's block
    assert "[INHALT]" not in user  # context cut: no memory content
    assert "[DEIN SPRACHSTIL]" not in user and "omitted" in caplog.text
    assert info["form"] == "verlauf_mit_auftrag"


def test_responder_records_both_decisions_also_when_empty():
    deps = deps_for(ScriptedLLM({"responder": [""]}))
    out = asyncio.run(run_node(responder.NODE, _full_state(), deps))["draft"]
    assert out.reply == ""
    assert _decisions(deps) == [("responder.nachricht", "verlauf_mit_reiz"), ("responder.ergebnis", "leer"),
                                ("responder.ergebnis", "leer")]
    # the reply's characters stand next to the span it was asked for (seed 004 §3.3, 05.09.2026)
    ergebnis = next(r for r in deps.trace.decisions("responder.ergebnis"))
    assert ergebnis.inputs["spanne_zeichen"] == [175, 350] and ergebnis.inputs["zeichen"] == 0


def test_responder_trims_the_history_in_blocks_to_fit_the_context(caplog):
    from core.settings import Settings

    long_turns = [SessionTurn(rolle="user", sprecher="Person B", inhalt="x" * 400, turn_id=f"t{i}",
                              time=datetime.now(timezone.utc)) for i in range(20)]
    state = _state("Hallo", memory=MemoryRecord(session_turns=long_turns))
    deps = deps_for(ScriptedLLM(), settings=Settings(llm_ctx=4096))
    (system, user), info = [m["content"] for m in responder.build_messages(state, deps, "m")[0]], \
        responder.build_messages(state, deps, "m")[1]
    assert info["verlauf_gekuerzt"] % responder.TRIM_BLOCK == 0 and 0 < info["verlauf_gekuerzt"] < 20
    from pipeline.node_config import budget

    # the room kept for the reply is the widest span's budget (node_config.antwort_token)
    assert len(system) + len(user) < (4096 - budget("responder", deps.settings)) * responder.CHARS_PER_TOKEN
    assert "verlauf_gekuerzt" in caplog.text


def test_the_trimmed_prompt_fits_the_context_by_the_models_own_count():
    """German turns with figures, as the history holds them: the prompt the responder builds,
    counted by the embedded model's tokenizer with its chat template, leaves the responder's
    budget free in the context (an estimate too high let a real prompt run past 4096 tokens)."""
    from llama_cpp import Llama

    from core.settings import Settings
    from pipeline.node_config import budget
    from serve.llm_backends import smollm2_gguf

    satz = ("Am 03.12. um 14:30 war ich beim Zahnarzt (Dr. Mueller, Praxis am Ring 7), danach 2,5 km "
            "zu Fuss heim; Bello (3 J.) war 'ganz aufgeregt' — 80 % der Zeit! ")
    turns = [SessionTurn(rolle="user" if i % 2 == 0 else "assistant", sprecher="Person B" if i % 2 == 0 else "Nova",
                         inhalt=satz * 3, turn_id=f"t{i}", time=datetime.now(timezone.utc), emotion="freude",
                         arousal=0.6) for i in range(60)]
    state = _state("Und was meinst du dazu?", memory=MemoryRecord(session_turns=turns))
    for ctx in (2048, 4096):
        deps = deps_for(ScriptedLLM(), settings=Settings(llm_ctx=ctx))
        messages, info = responder.build_messages(state, deps, "m")
        tok = Llama(model_path=str(smollm2_gguf()), vocab_only=True, verbose=False)
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        used = len(tok.tokenize(text.encode(), add_bos=False, special=True))
        assert info["verlauf_gekuerzt"] > 0 and used + budget("responder", deps.settings) <= ctx, (ctx, used)


def _user_prompt(state):
    return responder.build_messages(state, deps_for(ScriptedLLM()), "m")[0][1]["content"]


def test_what_ei_calc_and_haltungsraum_compute_reaches_the_responder():
    from pipeline.nodes import ei_calc

    # seed 004: opposite sectors with high arousal make the conflict flag, and the responder names it
    assert ei_calc.konflikt("traurigkeit", 0.8, "freude", 0.4)
    assert not ei_calc.konflikt("traurigkeit", 0.8, "angst", 0.8) and not ei_calc.konflikt("wut", 0.3, "freude", 0.4)
    state = _full_state()
    ruhig = _user_prompt(state)
    state.emotion = state.emotion.model_copy(update={"konflikt": True, "modus_plausibel": False})
    state.perzeption = state.perzeption.model_copy(update={"gespraechs_modus": "konflikt"})
    gegen = _user_prompt(state)
    assert "gegeneinander" in gegen and "gegeneinander" not in ruhig
    # a register ei_calc found implausible is not passed on as a fact
    assert "Register: unklar." in gegen and "Register: konflikt" not in gegen
    # the attitude's axes, the initiative among them, stand in [SZENE]; the size word in the direction
    state.haltung = HaltungRecord(initiative=0.3, umfang="knapp", spanne_zeichen=(60, 175), spanne="60 bis 175 Zeichen")
    szene = _user_prompt(state)
    assert "Initiative 0.3" in szene.split("[SZENE]")[1].split("\n[")[0]
    assert "Umfang: knapp, 60 bis 175 Zeichen" in szene


def test_a_dictated_note_is_written_as_dictated():
    from pipeline.nodes import planner
    from core.state import PairRecord, PlanRecord, RouteRecord, Stimulus, TurnState

    def plan_for(text, management, answer):
        state = TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt=text),
                          pair=PairRecord(character_name="Nova"), route=RouteRecord(management=management),
                          plan=PlanRecord())
        deps = deps_for(ScriptedLLM({"planner": [answer]}))
        return asyncio.run(run_node(planner.NODE, state, deps))["plan"], deps

    # the model paraphrased the dictated content: the person's words are written
    plan, deps = plan_for("Notiz Einkauf: Milch, Brot und Kaese", "notizen",
                          '{"auftraege": [{"agent": "notizen", "aktion": "anlegen", '
                          '"parameter": {"name": "Einkaufsliste", "inhalt": "Milch und Brot", "themen": "essen"}}]}')
    assert plan.auftrag.parameter == {"name": "Einkauf", "inhalt": "Milch, Brot und Kaese", "themen": "essen"}
    assert ("planner.quelle", "diktat_woertlich") in _decisions(deps)
    # the model named another order only: the dictated one comes first, the model's stays planned
    plan, _ = plan_for("Trag einen Termin ein: Zahnarzt, morgen um 14 Uhr", "timeline",
                       '{"auftraege": [{"agent": "notizen", "aktion": "anlegen", "parameter": {"name": "Zahnarzt"}}]}')
    assert (plan.auftrag.agent, plan.auftrag.parameter) == ("timeline", {"titel": "Zahnarzt", "wann": "morgen um 14 Uhr"})
    assert [a.agent for a in plan.offen] == ["notizen"]
    # a request in the model's own words (no dictation) stays the model's
    plan, deps = plan_for("Kannst du dir merken, dass ich Milch brauche?", "notizen",
                          '{"auftraege": [{"agent": "notizen", "aktion": "anlegen", '
                          '"parameter": {"name": "Milch", "inhalt": "Milch kaufen"}}]}')
    assert plan.auftrag.parameter == {"name": "Milch", "inhalt": "Milch kaufen"}
    assert not any(k == "planner.quelle" for k, _ in _decisions(deps))
    # the model gave no usable order and the router named the wrong agent: the rules read the
    # dictated appointment, not the router's management
    plan, deps = plan_for("Trag einen Termin ein: Zahnarzt, morgen um 14 Uhr", "notizen", '{"auftraege": []}')
    assert (plan.auftrag.agent, plan.auftrag.aktion, plan.auftrag.parameter) == (
        "timeline", "anlegen", {"titel": "Zahnarzt", "wann": "morgen um 14 Uhr"})
    assert ("planner.quelle", "planner_regeln") in _decisions(deps)


def test_an_order_that_changes_or_deletes_runs_only_when_the_message_asks_for_it():
    from pipeline.nodes import planner
    from core.state import PairRecord, PlanRecord, RouteRecord, Stimulus, TurnState

    def plan_for(text, answer):
        state = TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt=text),
                          pair=PairRecord(character_name="Nova"), route=RouteRecord(management="notizen"),
                          plan=PlanRecord())
        deps = deps_for(ScriptedLLM({"planner": [answer]}))
        return asyncio.run(run_node(planner.NODE, state, deps))["plan"], deps

    loeschen = ('{"auftraege": [{"agent": "notizen", "aktion": "loeschen", "parameter": {"name": "Einkauf"}}, '
                '{"agent": "notizen", "aktion": "finden", "parameter": {"name": "Einkauf"}}]}')
    # a question: the model's deletion is dropped, its search stays
    plan, deps = plan_for("Was steht eigentlich an?", loeschen)
    assert (plan.auftrag.agent, plan.auftrag.aktion) == ("notizen", "finden") and plan.offen == []
    assert ("planner.quelle", "aenderung_ungefragt") in _decisions(deps)
    # only a deletion, for a question: nothing is deleted, she asks back
    plan, deps = plan_for("Was steht eigentlich an?", '{"auftraege": [{"agent": "timeline", "aktion": "verschieben", '
                          '"parameter": {"titel": "Zahnarzt", "wann": "morgen"}}]}')
    assert plan.auftrag is None and plan.task_block.startswith("Rueckfrage:")
    assert ("planner.entscheidung", "rueckfrage_ohne_auftrag") in _decisions(deps)
    # asked for: the deletion runs first, as planned
    plan, deps = plan_for("Lösch bitte die Notiz Einkauf", loeschen)
    assert (plan.auftrag.agent, plan.auftrag.aktion) == ("notizen", "loeschen")
    assert not any(k == "planner.quelle" for k, _ in _decisions(deps))


def test_a_dictation_is_read_whatever_management_the_router_named_and_stays_as_dictated():
    from pipeline import regeln
    from pipeline.nodes import planner
    from core.state import AgentResult, Auftrag, PairRecord, PlanRecord, RouteRecord, Stimulus, TurnState

    # the router's model named the wrong agent: the explicit form still gives the dictated order
    assert regeln.diktat("timeline", "Notiz Einkauf: Milch, Brot und Kaese")["parameter"] == {
        "name": "Einkauf", "inhalt": "Milch, Brot und Kaese"}
    assert regeln.diktat("notizen", "Trag einen Termin ein: Zahnarzt, morgen um 14 Uhr")["agent"] == "timeline"
    assert regeln.diktat("notizen", "Ich war beim Zahnarzt, morgen wieder.") is None

    # after the dictated note was written, the model's re-plan in its own words does not overwrite it
    text = "Notiz Einkauf: Milch, Brot und Kaese"
    done = AgentResult(agent_name="notizen", status="abgeschlossen", ergebnis={"id": 1},
                       auftrag=Auftrag(agent="notizen", aktion="anlegen",
                                       parameter={"name": "Einkauf", "inhalt": "Milch, Brot und Kaese"}))
    state = TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt=text),
                      pair=PairRecord(character_name="Nova"), route=RouteRecord(management="notizen"),
                      plan=PlanRecord(schleifen=2, agent_results=[done]))
    deps = deps_for(ScriptedLLM({"planner": [
        '{"auftraege": [{"agent": "notizen", "aktion": "aendern", "parameter": {"name": "Einkauf", '
        '"inhalt": "Milch und Brot"}}, {"agent": "timeline", "aktion": "finden", "parameter": {"titel": "x"}}]}']}))
    plan = asyncio.run(run_node(planner.NODE, state, deps))["plan"]
    assert (plan.auftrag.agent, plan.auftrag.aktion) == ("timeline", "finden") and plan.offen == []
    assert ("planner.quelle", "diktat_bleibt") in _decisions(deps)
