"""The enricher's query rewrite: every exit named, the first line checked, the prefix stripped."""
import asyncio
from datetime import datetime, timezone

from core.settings import Settings
from pipeline.nodes.enricher import REWRITE_MAX_CHARS, rewrite
from core.state import SessionTurn
from tests.scripted_llm import ScriptedLLM, deps_for

RAW = "Und wie weist man das nach?"


def _turns(n):
    return [SessionTurn(rolle="user" if i % 2 == 0 else "assistant", sprecher="Person B" if i % 2 == 0 else "Nova",
                        inhalt=f"Beitrag {i} ueber Schwarze Loecher", turn_id=f"t{i}", time=datetime.now(timezone.utc))
            for i in range(n)]


def _rw(answer, turns=4, settings=None, fail=False, caplog=None):
    llm = ScriptedLLM({"enricher": [answer]})
    if fail:
        llm.fail.add("enricher")
    deps = deps_for(llm, settings=settings)
    return asyncio.run(rewrite(deps, _turns(turns), RAW)), llm


def test_rewrite_takes_the_first_line_without_prefix():
    (text, origin), llm = _rw("Suchanfrage: Wie weist man das Informationsparadoxon nach?\nzweite Zeile")
    assert (text, origin) == ("Wie weist man das Informationsparadoxon nach?", "rewrite")
    assert "Beitrag 3" in llm.calls[0]["messages"][1]["content"]


def test_every_other_exit_returns_the_raw_utterance(caplog):
    cases = [
        (_rw("x", settings=Settings(query_rewrite=False)), "abgeschaltet"),
        (_rw("x", turns=0), "verlauf_leer"),
        (_rw("x", turns=1), "zu_wenig_verlauf"),
        (_rw("   "), "leer"),
        (_rw("Suchanfrage:   "), "leer"),
        (_rw("a" * (REWRITE_MAX_CHARS + 1)), "zu_lang"),
        (_rw("x", fail=True), "aufruf_gescheitert"),
    ]
    for ((text, origin), _), expected in cases:
        assert (text, origin) == (RAW, expected)
    # the log names the exit and the utterance's length; it quotes the person only with log_utterances
    assert "query rewrite exit zu_lang: searching with the raw utterance <27 chars>" in caplog.text
    assert RAW not in caplog.text
    caplog.clear()
    _rw("a" * (REWRITE_MAX_CHARS + 1), settings=Settings(log_utterances=True))
    assert f"query rewrite exit zu_lang: searching with the raw utterance {RAW!r}" in caplog.text


def test_the_utterance_is_the_history_s_last_line_and_the_next_prompt_extends_this_one():
    from memory.session import PERSON_B

    (_, _), llm = _rw("Wie weist man das nach?")
    first = llm.calls[0]["messages"][1]["content"]
    assert first.split("\n\n")[0].splitlines()[-1] == f"{PERSON_B}: {RAW}"
    # the next turn: this utterance and the reply joined the history
    turns = _turns(4) + [SessionTurn(rolle="user", sprecher=PERSON_B, inhalt=RAW, turn_id="t4", time=datetime.now(timezone.utc)),
                         SessionTurn(rolle="assistant", sprecher="Nova", inhalt="So.", turn_id="t5", time=datetime.now(timezone.utc))]
    llm2 = ScriptedLLM({"enricher": ["x"]})
    asyncio.run(rewrite(deps_for(llm2), turns, "Und dann?"))
    second = llm2.calls[0]["messages"][1]["content"]
    assert second.startswith(first.split("\n\nSuchanfrage:")[0] + "\nNova: So.\n")


def test_her_own_thought_is_the_last_line_under_the_label_the_history_gives_it():
    from memory import session

    gedanke = SessionTurn(rolle="assistant", sprecher=session.sprecher("Nova", True), inhalt="Ob es regnet?",
                          turn_id="t4", time=datetime.now(timezone.utc), herkunft="eigener_impuls")
    turns = _turns(4) + [gedanke]
    assert session.figur_im_verlauf(turns) == "Nova"  # from her replies, not from the thought's label
    llm = ScriptedLLM({"enricher": ["x"]})
    asyncio.run(rewrite(deps_for(llm), turns, "Ob die Sonne wiederkommt?", session.sprecher("Nova", True)))
    last = llm.calls[0]["messages"][1]["content"].split("\n\n")[0].splitlines()[-1]
    assert last == "Nova (eigener Gedanke): Ob die Sonne wiederkommt?"
