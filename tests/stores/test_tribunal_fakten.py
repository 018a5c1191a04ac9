"""The tribunal and the corrector judge with the facts (issue #11): today in the pair's time zone,
the turn's appointments and the memory the reducer shaped for them reach both prompts, so a
tribunal that reads them catches a wrong weekday; an unclear verdict keeps the reply under a
named fallback; the leak guard catches a reply that repeats a prompt line or a block marker,
replaces it, and the guarded reply is the one committed."""
import asyncio
import json
import logging
import re
from datetime import datetime
from zoneinfo import ZoneInfo

from pipeline.nodes import dispatcher, leckschutz, reducer
from pipeline.chains import CHARACTER_CHAIN, NODES, TRIBUNAL_LOOP
from pipeline.runner import ChainRunner, run_node
from core.state import (AgentResult, DraftRecord, MemoryRecord, PairRecord, PlanRecord, PruefungRecord,
                            RouteRecord, Stimulus, TurnState, Urteil, current_reply)
from pipeline.timefmt import WOCHENTAGE
from tests.scripted_llm import ScriptedLLM, deps_for

MONTAG = datetime(2026, 12, 7, 9, 30, tzinfo=ZoneInfo("Europe/Berlin"))
ZAHNARZT = {"id": 5, "typ": "termin", "titel": "Zahnarzt", "wochentag": "Montag",
            "beginn_lokal": "2026-12-07T14:00:00+01:00"}
OK = '{"urteil": "ok", "gruende": []}'


class LesendesTribunal(ScriptedLLM):
    """A tribunal that does what its rules ask: it reads the appointments in [FAKTEN] and calls a
    weekday in [ANTWORT] that none of them falls on a defect. It can only see what the prompt
    carries."""

    async def chat(self, trace, node, messages, **kw):
        if node == "tribunal":
            fakten, antwort = messages[-1]["content"].split("[FAKTEN]")[1].split("[ANTWORT]")
            tage = {m.group(1) for m in re.finditer(r"^- (\w+), \d\d\.\d\d\.\d{4}, [\d:]+ Uhr: ", fakten, re.M)}
            falsch = [w for w in WOCHENTAGE if w in antwort and tage and w not in tage]
            self.script["tribunal"] = [json.dumps({"urteil": "mangel", "gruende": [
                f"Termin ist {sorted(tage)[0]}, nicht {falsch[0]}"]}) if falsch else OK]
        return await super().chat(trace, node, messages, **kw)


def _state(reply: str, text="Wann ist mein Zahnarzttermin?", **records) -> TurnState:
    stim = Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt=text, received_at=MONTAG)
    base = dict(pair=PairRecord(character_name="Nova", direktiven=["Duze mich."]),
                draft=DraftRecord(reply=reply, model="m"), route=RouteRecord(termine=[ZAHNARZT]), plan=PlanRecord())
    return TurnState(stimulus=stim, **{**base, **records})


def _memory() -> MemoryRecord:
    resonanz = {"erinnerungen": [{"id": 1, "inhalt": "Bello war beim Tierarzt", "tiefe": 0, "eingefallen_ueber": ""},
                                 {"id": 2, "inhalt": "Der Park im Regen", "tiefe": 1, "eingefallen_ueber": "Bello"}], "ids": [1, 2]}
    window = [{"titel": "Yoga", "wochentag": "Mittwoch", "beginn_lokal": "2026-12-09T18:30:00+01:00",
               "bezug": "uebermorgen"}]
    return MemoryRecord(kzg=[{"inhalt": "Bello ist ein Beagle", "similarity": 0.8}], plugins={"timeline": window},
                        lzg_resonanz=resonanz)


def _decisions(deps) -> list[tuple[str, str]]:
    return [(r.entscheidung, r.outcome) for r in deps.trace.decisions()]


def _prompt(llm, node, i=0) -> str:
    return [c for c in llm.calls if c["node"] == node][i]["messages"][-1]["content"]


def test_the_reducer_shapes_a_block_per_reader():
    state = _state("x", memory=_memory())
    kontext = asyncio.run(run_node(reducer.NODE, state, deps_for(ScriptedLLM())))["kontext"]
    v, th, t = kontext.gedaechtnis_verfasser, kontext.gedaechtnis_thinker, kontext.gedaechtnis_tribunal
    yoga = "- (timeline) Mittwoch, 09.12.2026, 18:30 Uhr (uebermorgen): Yoga"
    for block in (v, th, t):
        assert "- (kzg) Bello ist ein Beagle" in block and "(erinnerung) Bello war beim Tierarzt" in block
    # seed 001 §3.2: the appointment window reaches Thinker, tribunal and corrector, with weekday, date
    # and time; the Verfasser's [GEDAECHTNIS] lacks it (it gets the asked appointments in [TERMINE])
    assert yoga in th and yoga in t and "Yoga" not in v
    # the Verfasser and the Thinker see the association and its path; the judges see anchors only (seed 000 §4.3)
    assert "- (erinnerung) Der Park im Regen [Bello]" in v and "- (erinnerung) Der Park im Regen [Bello]" in th
    assert "Park im Regen" not in t and "[Bello]" not in t


def test_the_verfasser_gets_the_asked_appointments_not_the_window():
    """The whole turn as the Verfasser sees it: the router's asked appointment in [TERMINE], the
    window's appointment nowhere in its prompt (seed 001 §3.2)."""
    llm = ScriptedLLM({"verfasser": ["Nova stellt fest: Zahnarzt am Montag."]})
    deps = deps_for(llm)
    state = _state("x", memory=_memory())
    asyncio.run(run_node(reducer.NODE, state, deps))
    asyncio.run(run_node(NODES["verfasser"], state, deps))
    prompt = "\n".join(m["content"] for m in next(c for c in llm.calls if c["node"] == "verfasser")["messages"])
    termine = prompt.split("[TERMINE]")[1].split("[")[0]
    assert "Montag, 2026-12-07 14:00: Zahnarzt" in termine
    assert "Yoga" not in prompt and "Bello ist ein Beagle" in prompt


def test_the_blocks_are_grouped_by_source():
    """Seed 001 §3.2: the formatter groups by `quelle`, not by list position: each source's entries
    stand together, strongest first within the group, whatever their weights across sources."""
    mem = MemoryRecord(kzg=[{"inhalt": "k stark", "similarity": 0.9}, {"inhalt": "k schwach", "similarity": 0.1}],
                       bibliothek=[{"titel": "B", "inhalt": "mittel", "gewicht": 0.5}],
                       plugins={"notizen": [{"name": "Einkauf"}],
                                "timeline": [{"titel": "Yoga", "wochentag": "Mittwoch",
                                              "beginn_lokal": "2026-12-09T18:30:00+01:00", "bezug": "uebermorgen"}]})
    kontext = asyncio.run(run_node(reducer.NODE, _state("x", memory=mem), deps_for(ScriptedLLM())))["kontext"]
    quellen = [line.split(")")[0][3:] for line in kontext.gedaechtnis_thinker.split("\n")]
    assert quellen == ["kzg", "kzg", "bibliothek", "notizen", "timeline"]
    assert kontext.gedaechtnis_thinker.index("k stark") < kontext.gedaechtnis_thinker.index("k schwach")


def test_a_wrong_weekday_is_caught_from_the_facts_and_corrected():
    llm = LesendesTribunal({"corrector": ["Dein Zahnarzttermin ist heute, am Montag, um 14 Uhr."]})
    deps = deps_for(llm)
    state = _state("Dein Termin ist am Dienstag um 14 Uhr.", memory=_memory(), plan=PlanRecord(agent_results=[
        AgentResult(agent_name="notizen", status="abgeschlossen", ergebnis={"beschreibung": "Notiz 'Zahnarzt' angelegt"})]))
    asyncio.run(run_node(reducer.NODE, state, deps))
    asyncio.run(ChainRunner(chain=(TRIBUNAL_LOOP, NODES["leckschutz"])).run(state, deps))
    erst = _prompt(llm, "tribunal")
    fakten = erst.split("[FAKTEN]")[1].split("[ANTWORT]")[0]
    assert "Heute ist Montag, 07.12.2026, 09:30 Uhr (Europe/Berlin)." in fakten
    assert "- Montag, 07.12.2026, 14:00 Uhr: Zahnarzt" in fakten
    assert "- (kzg) Bello ist ein Beagle" in fakten and "Park im Regen" not in fakten
    assert "In diesem Turn erledigt: Notiz 'Zahnarzt' angelegt" in fakten
    # the situation apart from the object: the reply stands only in [ANTWORT], after [LAGE] and [FAKTEN]
    assert erst.index("[LAGE]") < erst.index("[FAKTEN]") < erst.index("[ANTWORT]")
    assert erst.count("Dein Termin ist am Dienstag") == 1 and "Dienstag" not in erst.split("[ANTWORT]")[0]
    u = state.urteil
    assert [(x.urteil, x.gruende) for x in u.urteile] == [("mangel", ["Termin ist Montag, nicht Dienstag"]),
                                                                ("ok", [])]
    # the corrector rewrites with the same facts and the reason
    korr = _prompt(llm, "corrector")
    assert "Heute ist Montag, 07.12.2026" in korr and "- Montag, 07.12.2026, 14:00 Uhr: Zahnarzt" in korr
    assert "- Termin ist Montag, nicht Dienstag" in korr and "- Duze mich." in korr
    assert current_reply(state) == "Dein Zahnarzttermin ist heute, am Montag, um 14 Uhr." and u.runden == 1
    assert ("evaluate.entscheidung", "korrektur") in _decisions(deps)
    assert ("evaluate.entscheidung", "bestanden") in _decisions(deps)
    assert ("leckschutz.pruefung", "sauber") in _decisions(deps)


def test_the_right_weekday_passes_and_without_the_appointment_the_reading_tribunal_sees_nothing():
    llm = LesendesTribunal()
    state = _state("Dein Termin ist am Montag um 14 Uhr.")
    asyncio.run(ChainRunner(chain=(TRIBUNAL_LOOP,)).run(state, deps_for(llm)))
    assert state.urteil.urteile[-1].urteil == "ok"
    llm = LesendesTribunal()
    state = _state("Dein Termin ist am Dienstag um 14 Uhr.", route=RouteRecord())
    asyncio.run(ChainRunner(chain=(TRIBUNAL_LOOP,)).run(state, deps_for(llm)))
    assert "Termine, nach denen dieser Turn fragt:\n- (keine gefragt)" in _prompt(llm, "tribunal")
    assert state.urteil.urteile[-1].urteil == "ok"  # the prompt is what the judge can know


def test_an_unclear_verdict_keeps_the_reply_by_name(caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.evaluate")
    for antwort, grund in (("Schwer zu sagen.", "tribunal_kein_json"),
                           ('{"urteil": "mangel", "gruende": []}', "mangel_ohne_gruende"),
                           ('{"urteil": "vielleicht", "gruende": ["hm"]}', "urteil_unbekannt")):
        llm = ScriptedLLM({"tribunal": [antwort], "corrector": ["Sollte nicht kommen."]})
        deps = deps_for(llm)
        state = _state("Dein Termin ist am Montag um 14 Uhr.",
                       pruefung=PruefungRecord(status="ok", reply="Dein Termin ist am Montag um 14 Uhr!"))
        asyncio.run(ChainRunner(chain=(TRIBUNAL_LOOP,)).run(state, deps))
        assert state.urteil.urteile == [Urteil(urteil="unklar", gruende=[grund], runde=0)]
        assert state.urteil.bestanden and current_reply(state) == "Dein Termin ist am Montag um 14 Uhr!"
        assert [c["node"] for c in llm.calls] == ["tribunal"]  # nothing for the corrector to fix
        entry = next(r for r in deps.trace.decisions("evaluate.entscheidung"))
        assert entry.outcome == "unklar_behalten" and entry.inputs["gruende"] == [grund]
        assert ("tribunal.urteil", "unklar") in _decisions(deps)
        assert f"fallback unklar_behalten: the tribunal's verdict was unclear ({grund})" in caplog.text


def _guard(reply, llm, text="Wann ist mein Zahnarzttermin?", **records):
    deps = deps_for(llm)
    state = _state(reply, text, **records)
    asyncio.run(ChainRunner(chain=(TRIBUNAL_LOOP, NODES["leckschutz"])).run(state, deps))
    return state, deps


def _entry(deps, name):
    return next(r for r in deps.trace.decisions(name))


def test_the_leak_guard_stands_between_the_tribunal_loop_and_the_reply_leaving():
    i = CHARACTER_CHAIN.index(TRIBUNAL_LOOP)
    assert [n.name for n in CHARACTER_CHAIN[i + 1:i + 3]] == ["leckschutz", "perzeption_assistant"]


def test_a_reply_that_repeats_a_system_prompt_line_is_replaced_by_the_corrector(caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.leckschutz")
    leck = "Sprich als Nova, niemals als Person B. Dein Termin ist am Montag um 14 Uhr."
    state, deps = _guard(leck, ScriptedLLM({"tribunal": [OK], "corrector": ["Dein Termin ist am Montag um 14 Uhr."]}))
    pruefung = _entry(deps, "leckschutz.pruefung")
    assert pruefung.outcome == "leck" and pruefung.inputs["funde"] == [
        "Prompt-Zeile »sprich als nova niemals als person b«"]
    assert _entry(deps, "leckschutz.ergebnis").outcome == "korrigiert"
    assert current_reply(state) == "Dein Termin ist am Montag um 14 Uhr."
    # what the client gets and the dispatcher commits is the guarded reply
    assert dispatcher.turn_result(state, deps).reply == "Dein Termin ist am Montag um 14 Uhr."
    assert "reproduces the prompt" in caplog.text


def test_any_line_of_the_rendered_system_prompt_is_caught():
    """The responder's system message as it went out in this turn (not only its templates): a
    line of the character's record rendered into it is caught like a template line."""
    pair = PairRecord(character_name="Mira", identitaet="{{char}} ist Leuchtturmwaerterin auf Hallig Nordlicht.")
    llm = ScriptedLLM({"tribunal": [OK], "corrector": ["Komm rein, der Wind ist kalt."]})
    deps = deps_for(llm)
    system = "[ROLLE]\nDu spielst Mira.\n\n[REGIE INTERN]\nHeute bleibt Mira am Leuchtfeuer und schweigt dazu."
    asyncio.run(llm.chat(deps.trace, "responder", [{"role": "system", "content": system},
                                                     {"role": "user", "content": "Hallo"}]))
    state = _state("Heute bleibt Mira am Leuchtfeuer und schweigt dazu. Komm rein.", "Hallo", pair=pair)
    asyncio.run(ChainRunner(chain=(TRIBUNAL_LOOP, NODES["leckschutz"])).run(state, deps))
    p = _entry(deps, "leckschutz.pruefung")
    assert p.outcome == "leck" and p.inputs["systemprompts"] == ["responder"]
    assert p.inputs["funde"] == ["Prompt-Zeile »heute bleibt mira am leuchtfeuer und schweigt dazu«"]
    assert current_reply(state) == "Komm rein, der Wind ist kalt."
    # without the rendered prompt the pair's record still stands in
    state, deps = _guard("Mira ist Leuchtturmwaerterin auf Hallig Nordlicht.", ScriptedLLM({
        "tribunal": [OK], "corrector": ["Ich hüte das Licht hier draußen."]}), "Wer bist du?", pair=pair)
    assert _entry(deps, "leckschutz.pruefung").inputs["systemprompts"] == []
    assert current_reply(state) == "Ich hüte das Licht hier draußen."


def test_every_line_of_the_responders_system_prompt_as_it_went_out_is_caught():
    from pipeline.nodes import responder
    from tests.stores.test_nodes_chain_parts import _full_state
    from tests.unit.test_nodes_character_prompt import MIRA

    state = _full_state()
    state.pair = MIRA
    llm = ScriptedLLM({"responder": ["Komm rein."]})
    deps = deps_for(llm)
    asyncio.run(run_node(responder.NODE, state, deps))
    system = deps.trace.system_prompts["responder"]
    frags, marker, gesehen = leckschutz.muster(deps, "scripted", MIRA)
    lines = [x for x in system.split("\n") if len(x.strip()) >= leckschutz.MIN_ZEICHEN]
    assert gesehen == ["responder"] and len(lines) > 5
    assert [x for x in lines if not leckschutz.pruefen(f"Also: {x} Gut.", frags, marker, "Hallo")] == []


def test_a_block_marker_is_cut_out_when_the_corrector_fails(caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.leckschutz")
    llm = ScriptedLLM({"tribunal": [OK]}, fail={"corrector"})
    state, deps = _guard("[REGELN]\nDein Termin ist am Montag um 14 Uhr.", llm)
    assert _entry(deps, "leckschutz.pruefung").inputs["funde"] == ["Blockmarkierung [REGELN]"]
    ergebnis = _entry(deps, "leckschutz.ergebnis")
    assert ergebnis.outcome == "bereinigt" and ergebnis.inputs["korrektor"] == "aufruf_gescheitert"
    assert current_reply(state) == "Dein Termin ist am Montag um 14 Uhr."
    assert "fallback bereinigt" in caplog.text


def test_nothing_clean_left_gives_the_named_replacement(caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.leckschutz")
    leck = "[PERSON A — WER SIE IST]\nSprich als Nova, niemals als Person B."
    llm = ScriptedLLM({"tribunal": [OK], "corrector": ["[REGELN] Sprich als Nova, niemals als Person B."]})
    state, deps = _guard(leck, llm)
    ergebnis = _entry(deps, "leckschutz.ergebnis")
    assert ergebnis.outcome == "ersatzantwort" and ergebnis.inputs["korrektor"] == "leckt"
    assert current_reply(state) == leckschutz.ERSATZ_ANTWORT
    assert dispatcher.turn_result(state, deps).reply == leckschutz.ERSATZ_ANTWORT
    assert "fallback ersatzantwort" in caplog.text
    # the corrector was asked first, and told what leaked
    maengel = _prompt(llm, "corrector").split("[MAENGEL]")[1]
    assert f"- {leckschutz.GRUND}" in maengel and "- Blockmarkierung [PERSON A — WER SIE IST]" in maengel
    assert "- Prompt-Zeile »sprich als nova niemals als person b«" in maengel


def test_a_normal_reply_passes_and_what_the_human_wrote_is_no_leak():
    llm = ScriptedLLM({"tribunal": [OK]})
    state, deps = _guard("Dein Termin ist am Montag um 14 Uhr. [lacht] Ich erfinde keine Details!", llm)
    assert _entry(deps, "leckschutz.pruefung").outcome == "sauber"
    assert "leckschutz.ergebnis" not in {e for e, _ in _decisions(deps)} and [c["node"] for c in llm.calls] == ["tribunal"]
    assert current_reply(state) == "Dein Termin ist am Montag um 14 Uhr. [lacht] Ich erfinde keine Details!"
    frage = "Was heisst [REGELN] und 'Sprich als Nova, niemals als Person B'?"
    state, deps = _guard("[REGELN] steht fuer: Sprich als Nova, niemals als Person B.", ScriptedLLM({"tribunal": [OK]}),
                         frage)
    assert _entry(deps, "leckschutz.pruefung").outcome == "sauber"
