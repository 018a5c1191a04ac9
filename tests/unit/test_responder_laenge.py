"""The reply's length: the responder's token budget follows the span haltungsraum chose (seed 004
§3.3), an override still caps it, and a reply the budget cut is closed at its last full sentence
(or with "…" when it holds none) — a named fallback in the log and a decision entry — while a reply
that stopped on its own stays as it is. The corrector's rewrite is closed the same way."""
from __future__ import annotations

import asyncio
import logging
import types

import pytest

from core.settings import Settings
from pipeline import satzende
from pipeline.node_config import ANTWORT_SPIELRAUM, ANTWORT_ZEICHEN_JE_TOKEN, antwort_token, budget, capped
from pipeline.nodes import corrector, responder
from pipeline.runner import run_node
from pipeline.services import LLMClient
from core.state import HaltungRecord, UrteilRecord
from pipeline.trace import TurnTrace
from pipeline.vocab import UMFANG_SPANNE
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.unit.test_golden_responder import golden_state

GEKAPPT = ("Das klingt nach einem langen Tag. Hat er wenigstens gesagt, warum? Ich an deiner Stelle wuerde "
           "morgen in Ruhe nachfragen, denn so einfach aufzulegen ist")
"""A reply the budget cut mid-sentence: two full sentences, then the cut."""
GESCHLOSSEN = "Das klingt nach einem langen Tag. Hat er wenigstens gesagt, warum?"
DEUTSCHE_ANTWORTEN = [
    "Oh, das klingt nach einem langen Tag. Hat er wenigstens gesagt, warum er einfach aufgelegt hat?",
    "Ich kann verstehen, dass dich das ärgert. Wenn dein Chef ständig Termine verschiebt, bleibt am Ende alles "
    "an dir hängen. Vielleicht hilft es, ihm morgen in Ruhe zu sagen, was das für deine Woche bedeutet – nicht "
    "als Vorwurf, sondern als Tatsache.",
    "Tritium entsteht in der oberen Atmosphäre, wenn kosmische Strahlung auf Stickstoff trifft. Die natürlichen "
    "Vorkommen sind winzig: Auf der ganzen Erde gibt es nur ein paar Kilogramm davon. Für Fusionsreaktoren muss "
    "man es deshalb selbst erbrüten, meistens aus Lithium, das mit Neutronen beschossen wird.",
    "Hm, manchmal ist es auch einfach okay, nichts zu schaffen. Du musst dir nicht jeden Abend beweisen, dass du "
    "produktiv warst.",
    "Weißt du, was mir gerade einfällt? Letzte Woche hast du erzählt, dass deine Schwester bald umzieht. Ist sie "
    "schon in der neuen Wohnung, oder steht das Chaos noch bevor?",
    "Gute Nacht! Träum was Schönes.",
    "Ach, der Regen hört bestimmt bald auf. Bis dahin: Tee, Decke, Lieblingsserie?",
    "Glückwunsch zur bestandenen Prüfung! Das hast du dir wirklich verdient, nach all den Nächten über den "
    "Büchern. Wie feierst du?",
]
"""Replies in the responder's register, with umlauts (a sample of those ANTWORT_ZEICHEN_JE_TOKEN was
measured on)."""


def _state(umfang: str, spanne: tuple[int, int] | None = None):
    state = golden_state()
    spanne = spanne or UMFANG_SPANNE[umfang]
    state.haltung = state.haltung.model_copy(update={"umfang": umfang, "spanne_zeichen": spanne,
                                                     "spanne": f"{spanne[0]} bis {spanne[1]} Zeichen"})
    return state


def _run(llm: ScriptedLLM, state, settings: Settings | None = None):
    deps = deps_for(llm, settings=settings)
    update = asyncio.run(run_node(responder.NODE, state, deps))
    return update["draft"].reply, deps


def _decisions(deps, name: str) -> list[dict]:
    return [r for r in deps.trace.decisions(name)]


# --- the budget follows the span


def test_the_budget_follows_the_span_of_the_turn():
    deps = deps_for(ScriptedLLM())
    knapp, mittel, ausfuehrlich = (responder.antwort_budget(_state(u), deps) for u in ("knapp", "mittel", "ausfuehrlich"))
    assert knapp < mittel < ausfuehrlich
    assert (knapp, mittel, ausfuehrlich) == (100, 199, 398)
    assert ausfuehrlich > 160  # the former fixed budget cut a reply of "ausfuehrlich" at ~400 characters
    # the configured budget is the widest span's: what the context keeps room for, what startup checks
    assert budget("responder", Settings()) == ausfuehrlich
    # a light utterance's cap narrows the span, and the budget with it
    assert responder.antwort_budget(_state("mittel", (40, 80)), deps) == antwort_token(80) < mittel
    # haltungsraum did not run: the record's default span (mittel)
    state = golden_state()
    state.haltung = None
    assert responder.antwort_budget(state, deps) == antwort_token(HaltungRecord().spanne_zeichen[1]) == mittel


@pytest.mark.parametrize("umfang", list(UMFANG_SPANNE))
def test_every_span_fits_its_budget_with_room(umfang):
    oben = UMFANG_SPANNE[umfang][1]
    assert antwort_token(oben) * ANTWORT_ZEICHEN_JE_TOKEN >= oben * ANTWORT_SPIELRAUM
    assert antwort_token(oben) <= Settings().llm_max_tokens


def test_an_override_caps_the_span_budget():
    eng = Settings(node_max_tokens={"responder": 120})
    deps = deps_for(ScriptedLLM(), settings=eng)
    assert responder.antwort_budget(_state("knapp"), deps) == 100  # below the cap: the span's own
    assert responder.antwort_budget(_state("ausfuehrlich"), deps) == 120
    alle = deps_for(ScriptedLLM(), settings=Settings(node_max_tokens={"*": 24}))
    assert responder.antwort_budget(_state("ausfuehrlich"), alle) == 24
    bench = deps_for(ScriptedLLM(), settings=Settings(node_max_tokens=capped(64)))  # a benchmark's cap
    assert responder.antwort_budget(_state("mittel"), bench) == 64


def test_the_responder_asks_the_engine_for_its_span_budget():
    for umfang, erwartet in (("knapp", 100), ("ausfuehrlich", 398)):
        llm = ScriptedLLM({"responder": ["Schoen, dass du da bist."]})
        _run(llm, _state(umfang))
        assert [c["max_tokens"] for c in llm.calls] == [erwartet]
    llm = ScriptedLLM({"responder": ["Schoen, dass du da bist."]})
    _, deps = _run(llm, _state("ausfuehrlich"), Settings(node_max_tokens={"responder": 90}))
    assert llm.calls[0]["max_tokens"] == 90
    [ergebnis] = _decisions(deps, "responder.ergebnis")
    assert ergebnis.inputs["budget_token"] == 90 and ergebnis.inputs["ende"] == "stop"


def test_the_client_sends_an_explicit_budget_and_else_the_nodes():
    seen: list[dict] = []

    async def chat(request):
        from core.wire import ChatResponse

        seen.append(request)
        return ChatResponse.model_validate({"model": "m", "choices": [{"finish_reason": "stop",
                                                                        "message": {"content": "Ja."}}]})

    handle = types.SimpleNamespace(chat=types.SimpleNamespace(remote=chat))
    client = LLMClient(handle, Settings())

    async def go():
        trace = TurnTrace("u", "nova", "t1")
        await client.chat(trace, "responder", [{"role": "user", "content": "hi"}], max_tokens=123)
        await client.chat(trace, "responder", [{"role": "user", "content": "hi"}])
        await client.chat(trace, "thinker", [{"role": "user", "content": "hi"}])

    asyncio.run(go())
    assert [r.max_tokens for r in seen] == [123, 398, 400]


def test_the_ratio_holds_for_smollm2_on_german_replies():
    """Each sample reply, counted with the embedded model's own tokenizer, has at least
    ANTWORT_ZEICHEN_JE_TOKEN characters per token: a reply of the span's characters fits its budget."""
    from llama_cpp import Llama

    from serve.llm_backends import smollm2_gguf

    tok = Llama(model_path=str(smollm2_gguf()), vocab_only=True, verbose=False)
    for text in DEUTSCHE_ANTWORTEN:
        n = len(tok.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        assert len(text) / n >= ANTWORT_ZEICHEN_JE_TOKEN, (round(len(text) / n, 2), text)
        assert n <= antwort_token(len(text))


# --- a reply the budget cut


def test_a_cut_reply_is_closed_at_its_last_full_sentence(caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.responder")
    reply, deps = _run(ScriptedLLM({"responder": [(GEKAPPT, None, "length")]}), _state("knapp"))
    assert reply == GESCHLOSSEN
    assert "fallback antwort_gekappt_satzende" in caplog.text
    [kappung] = _decisions(deps, "responder.kappung")
    assert kappung.outcome == "satzende" and kappung.node == "responder"
    assert kappung.inputs["zeichen_gekappt"] == len(GEKAPPT) and kappung.inputs["zeichen"] == len(GESCHLOSSEN)
    assert kappung.inputs["verworfen"] == len(GEKAPPT) - len(GESCHLOSSEN) and kappung.inputs["budget_token"] == 100
    [ergebnis] = _decisions(deps, "responder.ergebnis")
    assert ergebnis.outcome == "antwort" and ergebnis.inputs["zeichen"] == len(GESCHLOSSEN)
    assert ergebnis.inputs["ende"] == "length"
    # the entries in their order: the message, the closing, the outcome
    assert [r.entscheidung for r in deps.trace.rows if r.node == "responder"] == [
        "responder.nachricht", "responder.kappung", "responder.ergebnis"]


def test_a_cut_reply_without_a_full_sentence_is_kept_and_ends_with_an_ellipsis(caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.responder")
    reply, deps = _run(ScriptedLLM({"responder": [("Ach, der Regen hoert bestimmt bald auf, und bis dahin", None,
                                                   "length")]}), _state("knapp"))
    assert reply == "Ach, der Regen hoert bestimmt bald auf, und bis dahin…"
    assert "fallback antwort_gekappt_ellipse" in caplog.text
    [kappung] = _decisions(deps, "responder.kappung")
    assert kappung.outcome == "ellipse" and kappung.inputs["verworfen"] == 0


def test_a_reply_that_stopped_on_its_own_is_untouched(caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.responder")
    offen = "Das klingt nach einem langen Tag, und dann"  # no sentence end, but the engine stopped
    reply, deps = _run(ScriptedLLM({"responder": [offen]}), _state("knapp"))
    assert reply == offen
    assert "antwort_gekappt" not in caplog.text and not _decisions(deps, "responder.kappung")
    reply, deps = _run(ScriptedLLM({"responder": [GESCHLOSSEN]}), _state("ausfuehrlich"))
    assert reply == GESCHLOSSEN and not _decisions(deps, "responder.kappung")


def test_the_repeated_call_after_an_empty_reply_is_closed_too(caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.responder")
    llm = ScriptedLLM({"responder": [("", None, "length"), (GEKAPPT, None, "length")]})
    reply, deps = _run(llm, _state("mittel"))
    assert reply == GESCHLOSSEN and "leer_wiederholung" in caplog.text
    assert [c["max_tokens"] for c in llm.calls] == [199, 199]
    assert [r.outcome for r in _decisions(deps, "responder.ergebnis")] == ["leer", "antwort"]
    assert [r.outcome for r in _decisions(deps, "responder.kappung")] == ["satzende"]


@pytest.mark.parametrize("gekappt, geschlossen, wie", [
    ("Das ist gut. Und dann hat er", "Das ist gut.", "satzende"),
    ("Wirklich? Ja! Und", "Wirklich? Ja!", "satzende"),
    ("Na gut … vielleicht", "Na gut …", "satzende"),
    ("Sie sagte: „Komm mit.“ Dann ging", "Sie sagte: „Komm mit.“", "satzende"),
    ("Das war schoen (wirklich.) Und", "Das war schoen (wirklich.)", "satzende"),
    ("Der Termin ist am 20.08.2026. Bis dann, und", "Der Termin ist am 20.08.2026.", "satzende"),
    ("Erster Satz.\nZweiter Satz ohne", "Erster Satz.", "satzende"),
    # no sentence end: an abbreviation's point, an ordinal's, a point inside a number
    ("Das ist z. B. ein", "Das ist z. B. ein…", "ellipse"),
    ("Am 3. Mai war", "Am 3. Mai war…", "ellipse"),
    ("Frag Dr. Weber, ob", "Frag Dr. Weber, ob…", "ellipse"),
    ("Es dauert 3.5 Stunden, bis", "Es dauert 3.5 Stunden, bis…", "ellipse"),
    # an open separator at the cut goes before the ellipsis
    ("Ich denke, ", "Ich denke…", "ellipse"),
    ("Er nannte es „", "Er nannte es…", "ellipse"),
])
def test_closing_at_the_last_full_sentence(gekappt, geschlossen, wie):
    assert satzende.schliessen(gekappt) == (geschlossen, wie)


# --- the corrector's rewrite


def _corrector_state():
    state = golden_state()
    state.urteil = UrteilRecord(reply="Dein Termin ist am Dienstag.", bestanden=False,
                                urteile=[{"urteil": "mangel", "gruende": ["Termin ist Montag"]}])
    return state


def test_a_cut_rewrite_of_the_corrector_is_closed_the_same_way(caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.corrector")
    deps = deps_for(ScriptedLLM({"corrector": [(GEKAPPT, None, "length")]}))
    update = asyncio.run(run_node(corrector.NODE, _corrector_state(), deps))
    assert update["urteil"].reply == GESCHLOSSEN
    assert "corrector: fallback antwort_gekappt_satzende" in caplog.text
    [kappung] = _decisions(deps, "corrector.kappung")
    # the rewrite's budget is the reply's, the turn's span (tests/unit/test_rewrite_budget.py)
    assert kappung.outcome == "satzende" and kappung.inputs["budget_token"] == antwort_token(175)
    assert [r.outcome for r in _decisions(deps, "corrector.ergebnis")] == ["korrigiert"]


def test_a_rewrite_that_stopped_on_its_own_is_untouched():
    deps = deps_for(ScriptedLLM({"corrector": ["Dein Termin ist am Montag, und"]}))
    update = asyncio.run(run_node(corrector.NODE, _corrector_state(), deps))
    assert update["urteil"].reply == "Dein Termin ist am Montag, und"
    assert not _decisions(deps, "corrector.kappung")
