"""A Thinker's correction the token budget cut (seed 000 §3: `ERGEBNIS: KORREKTUR` rewrites the
reply) is closed at its last full sentence, as the responder's reply and the corrector's rewrite are
(`pipeline/satzende.py`): a correction never replaces the reply mid-sentence. The engine is the
scripted engine answering as a reasoning model, which cuts its answer at the call's budget and
says so with finish reason `length`."""
from __future__ import annotations

import asyncio
import logging

from core.state import DraftRecord, PairRecord, RouteRecord, Stimulus, TurnState
from pipeline.nodes import thinker
from pipeline.runner import run_node
from tests.scripted_engine import ScriptedEngine
from tests.scripted_llm import deps_for, engine_client

SATZ = "Dein Termin ist am Dienstag um 14 Uhr."
LANG = SATZ + " Bring bitte die Unterlagen mit, die du beim letzten Mal vergessen hast, und" * 400
"""A correction longer than any budget of the reasoning pass: its text is cut after its first sentence."""


def _state() -> TurnState:
    return TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t1",
                                       user_prompt="Wann ist mein Termin?"),
                     pair=PairRecord(character_name="Nova"), route=RouteRecord(needs_web=False),
                     draft=DraftRecord(reply="Dein Termin ist am Montag um 14 Uhr.", model="scripted"))


def _check(antwort: str):
    korrektur = f"ERGEBNIS: KORREKTUR\nPROBLEME: Der Termin ist am Dienstag.\nKORRIGIERTE ANTWORT: {antwort}"
    llm = engine_client(ScriptedEngine.with_script({"thinker": [korrektur]}, reasoning="Ich pruefe den Kalender."))
    deps = deps_for(llm)
    p = asyncio.run(run_node(thinker.NODE, _state(), deps))["pruefung"]
    (call,) = llm.handle.deployment.record(False)
    assert call["request"]["caller"] == "thinker"
    return p, deps, call["request"]["max_tokens"]


def test_a_correction_the_budget_cut_is_closed_at_its_last_full_sentence(caplog):
    with caplog.at_level(logging.WARNING):
        p, deps, budget = _check(LANG)
    assert p.status == "korrektur" and p.reply == SATZ
    (kappung,) = deps.trace.decisions("thinker.kappung")
    assert kappung.outcome == "satzende" and kappung.inputs["zeichen"] == len(SATZ)
    assert kappung.inputs["budget_token"] == budget and kappung.inputs["zeichen_gekappt"] > len(SATZ)
    assert "thinker: fallback antwort_gekappt_satzende" in caplog.text


def test_a_whole_correction_stays_as_written():
    p, deps, _ = _check(SATZ)
    assert p.status == "korrektur" and p.reply == SATZ
    assert not deps.trace.decisions("thinker.kappung")
