"""A rewrite keeps the budget of the reply it rewrites (seed 004 §3.3: the span in characters the
room sets through `umfang` and `UMFANG_SPANNE`): the corrector's rewrite and the leak guard's ask
the engine for the tokens the responder asked for this turn's span, not a default of their own,
so a corrected long reply keeps its length instead of being cut to the default's ~350 characters.

The engine here keeps to the budget it is given, as a real one does: unset, the node's configured
budget (as `LLMClient` fills it in); an answer longer than the budget's characters is cut there
and ends with finish reason `length`."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from core.settings import Settings
from core.state import HaltungRecord, UrteilRecord
from pipeline.node_config import ANTWORT_ZEICHEN_JE_TOKEN, antwort_token, budget
from pipeline.nodes import corrector, leckschutz, responder
from pipeline.runner import run_node
from pipeline.services import ChatResult
from pipeline.vocab import UMFANG_SPANNE
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.unit.test_golden_responder import golden_state

LANG = ("Der Anruf ist am Montag abgebrochen, nicht am Dienstag, und das erklaert einiges. "
        "Wenn jemand mitten im Satz auflegt, bleibt man mit dem halben Gedanken allein zurueck. "
        "Vielleicht war es der Empfang im Treppenhaus, vielleicht auch die Wut, die sich seit Wochen "
        "aufgestaut hat. Ich wuerde morgen nicht gleich mit einem Vorwurf anfangen, sondern fragen, ob "
        "er den Satz noch zu Ende bringen will. Manchmal reicht das, damit beide wieder runterkommen. "
        "Und falls nicht, weisst du wenigstens, woran du bist, und musst nicht weiter raten. "
        "Erzaehl mir, wie es dir jetzt damit geht, wenn du magst.")
"""A corrected reply of an `ausfuehrlich` turn: within its span (350–700 characters), past the
160-token default's ~350."""


@dataclass
class BudgetLLM(ScriptedLLM):
    """A scripted engine that keeps to its token budget: an answer longer than the budget's
    characters (at the measured ratio) is cut there, with finish reason `length`."""

    settings: Settings | None = None

    async def chat(self, trace, node, messages, *, max_tokens=None, **kw) -> ChatResult:
        res = await super().chat(trace, node, messages, max_tokens=max_tokens, **kw)
        tokens = budget(node, self.settings or Settings()) if max_tokens is None else max_tokens
        cap = int(tokens * ANTWORT_ZEICHEN_JE_TOKEN)
        if len(res.content) <= cap:
            return res
        return ChatResult(res.content[:cap], res.reasoning, res.model, 10, tokens, "length")


def _state(umfang: str = "ausfuehrlich", reply: str = LANG):
    state = golden_state()
    lo, hi = UMFANG_SPANNE[umfang]
    state.haltung = HaltungRecord(umfang=umfang, spanne_zeichen=(lo, hi), spanne=f"{lo} bis {hi} Zeichen")
    state.urteil = UrteilRecord(reply=reply.replace("Montag", "Dienstag", 1), bestanden=False,
                                urteile=[{"urteil": "mangel", "gruende": ["Der Anruf war am Montag"]}])
    return state


def _max_tokens(llm: ScriptedLLM, node: str) -> list[int | None]:
    return [c["max_tokens"] for c in llm.calls if c["node"] == node]


def test_the_long_reply_of_this_test_is_past_the_default_budget():
    assert UMFANG_SPANNE["ausfuehrlich"][0] < len(LANG) <= UMFANG_SPANNE["ausfuehrlich"][1]
    assert len(LANG) > budget("corrector", Settings()) * ANTWORT_ZEICHEN_JE_TOKEN


def test_the_corrector_asks_for_the_budget_the_responder_asked_for_and_keeps_the_length():
    state = _state()
    llm = BudgetLLM({"responder": [LANG], "corrector": [LANG]})
    deps = deps_for(llm)
    asyncio.run(run_node(responder.NODE, state, deps))
    update = asyncio.run(run_node(corrector.NODE, state, deps))
    assert _max_tokens(llm, "corrector") == _max_tokens(llm, "responder") == [antwort_token(700)]
    assert update["urteil"].reply == LANG  # whole: not cut to the default's ~350 characters
    assert not deps.trace.decisions("corrector.kappung")


def test_the_rewrite_budget_follows_the_span_and_an_override_for_the_corrector_caps_it():
    deps = deps_for(ScriptedLLM())
    assert corrector.rewrite_budget(_state("knapp"), deps) == antwort_token(175)
    assert corrector.rewrite_budget(_state("mittel"), deps) == antwort_token(350)
    assert corrector.rewrite_budget(_state("ausfuehrlich"), deps) == antwort_token(700)
    capped = deps_for(ScriptedLLM(), settings=Settings(node_max_tokens={"corrector": 120}))
    assert corrector.rewrite_budget(_state("ausfuehrlich"), capped) == 120
    # the responder's own override caps the reply, and so its rewrite
    kurz = deps_for(ScriptedLLM(), settings=Settings(node_max_tokens={"responder": 90}))
    assert corrector.rewrite_budget(_state("ausfuehrlich"), kurz) == responder.antwort_budget(_state(), kurz) == 90


def test_a_rewrite_past_the_span_is_closed_at_the_spans_budget():
    state = _state("knapp")
    llm = BudgetLLM({"corrector": [LANG]})
    deps = deps_for(llm)
    update = asyncio.run(run_node(corrector.NODE, state, deps))
    [kappung] = deps.trace.decisions("corrector.kappung")
    assert kappung.inputs["budget_token"] == antwort_token(175) == _max_tokens(llm, "corrector")[0]
    assert len(update["urteil"].reply) <= antwort_token(175) * ANTWORT_ZEICHEN_JE_TOKEN
    assert update["urteil"].reply.endswith(".")


def test_the_leak_guards_rewrite_keeps_the_long_reply():
    leaking = LANG + " [REGELN] Behebe genau die genannten Maengel, sonst nichts."
    state = _state(reply=LANG)
    state.urteil = UrteilRecord(reply=leaking, bestanden=True)
    llm = BudgetLLM({"corrector": [LANG]})
    deps = deps_for(llm)
    update = asyncio.run(run_node(leckschutz.NODE, state, deps))
    assert _max_tokens(llm, "corrector") == [antwort_token(700)]
    [ergebnis] = deps.trace.decisions("leckschutz.ergebnis")
    assert ergebnis.outcome == "korrigiert"
    assert update["urteil"].reply == LANG
