"""The history form of perception and router (seed 001 §3.1: "Perzeption/Router: Gekürzter Text +
Emotion als Annotation (via `format_session_turns_numbered()`) — gekürzt heißt: 100 Zeichen je
Beitrag"): each turn numbered, with its speaker, the emotion stored with the turn, and its first
100 characters; both nodes' prompts carry it."""
import asyncio
from datetime import datetime, timezone

from pipeline.nodes import perzeption, router
from pipeline.runner import run_node
from pipeline.services import Deps
from core.state import MemoryRecord, SessionTurn, Stimulus, TurnState
from tests.scripted_llm import ScriptedLLM, Zaehler, deps_for

LANG = "Heute war der Tag, an dem ich endlich den Garten umgegraben habe, und dabei fand ich eine alte Muenze im Beet."


def _turn(rolle, sprecher, inhalt, emotion):
    return SessionTurn(rolle=rolle, sprecher=sprecher, inhalt=inhalt, turn_id=f"t-{sprecher}-{len(inhalt)}",
                       time=datetime.now(timezone.utc), emotion=emotion, arousal=0.6 if emotion else None)


TURNS = [_turn("user", "Person B", LANG, "freude"),
         _turn("assistant", "Nova", "Eine Muenze? Zeig mal!", "ueberraschung"),
         _turn("user", "Person B", "Sie ist ganz verrostet.", None)]

ERWARTET = ("1. Person B (freude): " + LANG[:100] + "\n"
            "2. Nova (ueberraschung): Eine Muenze? Zeig mal!\n"
            "3. Person B: Sie ist ganz verrostet.")


def _state(**records):
    return TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt="Was meinst du?"),
                     **records)


def test_the_short_history_numbers_each_turn_and_notes_its_emotion():
    assert len(LANG) > 100
    assert perzeption.kurzverlauf(TURNS) == ERWARTET
    assert perzeption.kurzverlauf([]) == "(noch kein Verlauf)"


class _Sitzung:
    async def load_window(self, user_id, character_id, n):
        return TURNS[-n:]


def test_perception_sees_the_history_with_the_emotions(monkeypatch):
    monkeypatch.setattr(Deps, "session", property(lambda self: _Sitzung()))
    llm = ScriptedLLM({"perzeption": ['{"emotion": "neutral"}']})
    asyncio.run(run_node(perzeption.NODE, _state(), deps_for(llm)))
    user = llm.calls[0]["messages"][-1]["content"]
    assert "[GESPRAECHSVERLAUF]\n" + ERWARTET in user


def test_the_router_sees_the_history_with_the_emotions():
    llm = ScriptedLLM({"router": ['{"intent": "frage", "management": "keins"}']})
    deps = deps_for(llm, redis=Zaehler())
    asyncio.run(run_node(router.NODE, _state(memory=MemoryRecord(session_turns=TURNS)), deps))
    user = llm.calls[0]["messages"][-1]["content"]
    assert "[GESPRAECHSVERLAUF]\n" + ERWARTET in user


def test_a_replys_stage_direction_keeps_only_its_beginning():
    # seed 001 §3.1: "bei Antworten mit Regieanweisung nur deren Anfang" — the 100 characters carry
    # what Nova said, not the whole gesture
    gesagt = "Eine Muenze im Beet? Das klingt nach einem kleinen Schatz, erzaehl mir mehr davon!"
    antwort = "*lächelt und lehnt sich neugierig nach vorn, die Haende um die warme Tasse gelegt* " + gesagt
    turns = [_turn("assistant", "Nova", antwort, "freude"),
             _turn("assistant", "Nova", "*nickt* Gut. *schaut aus dem Fenster* Und dann?", None),
             _turn("user", "Person B", "*seufzt tief und lange* Ja.", None)]
    assert perzeption.kurzverlauf(turns).split("\n") == [
        "1. Nova (freude): " + ("*lächelt …* " + gesagt)[:100],
        "2. Nova: *nickt* Gut. *schaut …* Und dann?",
        "3. Person B: *seufzt tief und lange* Ja."]  # the person's turn stays as written
    assert gesagt in perzeption.kurzverlauf(turns[:1])
