"""The responder's prompt against seed 004 §3/§4, block by block: the table in prompts/README.md
names for every block and rule where it lives and the phrase that shows it, or why it is not
there. The prompt is rendered from one fixed turn state (and its impulse variant); every phrase
of the table must stand in the message and case the row names, and the blocks must come in the
table's order. The seed's [GEDAECHTNIS] (§3a 3.4) is read by the Verfasser, whose notes become
[INHALT]: its user message (`verfasser`) is rendered from the same state, its memory shaped by the
reducer, as the chain sends it. The table is read here, so it cannot drift from the prompt."""
from __future__ import annotations

import asyncio
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pipeline.nodes import reducer, responder, verfasser
from pipeline.runner import run_node
from core.state import (EmotionRecord, HaltungRecord, KzgTreffer, LandschaftRecord, MemoryRecord, PairRecord,
                            PerzeptionRecord, PlanRecord, Resonanz, SessionTurn, Stimulus, TurnState,
                            VerfasserRecord)
from tests.scripted_llm import ScriptedLLM, deps_for

README = Path(__file__).resolve().parents[2] / "prompts" / "README.md"
SECTION = "## Responder"
FAELLE = ("reiz", "impuls")
NACHRICHTEN = ("system", "user", "verfasser")
T0 = datetime(2026, 8, 20, 10, 0, tzinfo=timezone.utc)  # a Thursday; 12:00 in Europe/Berlin


def _turn(i: int, rolle: str, inhalt: str, emotion: str, arousal: float) -> SessionTurn:
    return SessionTurn(rolle=rolle, sprecher="Person B" if rolle == "user" else "Nova", inhalt=inhalt,
                       turn_id=f"t{i}", time=T0, emotion=emotion, arousal=arousal,
                       name="Caroline" if rolle == "user" else None)  # the name his client sends


def golden_state(impulse: bool = False) -> TurnState:
    """One turn with every block filled and every EI micro building block called for."""
    stim = Stimulus(user_id="u", character_id="nova", turn_id="golden", received_at=T0,
                    **({"eigener_gedanke": "Ob Bello den Park vermisst?", "herkunft": "eigener_impuls"} if impulse
                       else {"user_prompt": "Und dann hat er einfach aufgelegt!"}))
    pair = PairRecord(
        character_name="Nova", identitaet="{{char}} ist eine neugierige Begleiterin.",
        charakter_anweisung="Bleib neugierig.", sprechweise="knapp und warm",
        nova_kern="Nova ist geduldig.", nova_adaptiv="Nova denkt an Bello.", nova_emotions="Meist heiter.",
        nova_intentionen="Fragt gern nach.", nova_beziehung="Nova mag seine Direktheit.",
        mensch_kern="Person B arbeitet in der Pflege.", mensch_themen="Der Umzug naechste Woche.", mensch_beziehung="Person B vertraut Nova.",
        direktiven=["Nenne mich nie Schatz."])
    turns = [_turn(1, "user", "[information_teilen] Heute war ein guter Tag.", "freude", 0.5),
             _turn(2, "assistant", "Das freut mich.", "freude", 0.5),
             _turn(3, "user", "[emotionaler_ausdruck | aerger | emotional] Mein Chef nervt.", "aerger", 0.7),
             _turn(4, "assistant", "Was war los?", "neutral", 0.4)]
    verlauf = [{"emotion": "aerger", "arousal": 0.8, "gewicht": 1.0},
               {"emotion": "frustration", "arousal": 0.7, "gewicht": 0.7},
               {"emotion": "neutral", "arousal": 0.4, "gewicht": 0.49},
               {"emotion": "freude", "arousal": 0.5, "gewicht": 0.343},
               {"emotion": "neutral", "arousal": 0.3, "gewicht": 0.24}]
    return TurnState(
        stimulus=stim, pair=pair,
        memory=MemoryRecord(session_turns=turns, user_intentionen=["emotionaler_ausdruck"],
                            zusammenfassung="Person B hat von Bello erzaehlt."),
        perzeption=PerzeptionRecord(emotion="aerger", arousal=0.8, gespraechs_modus="austausch",
                                    beziehungs_dynamik="distanz", user_intentionen=["emotionaler_ausdruck"]),
        emotion=EmotionRecord(emotions_verlauf=verlauf, emotions_vektor="spirale", ei_arousal=0.7,
                              sprach_stil="locker", nova_emotion="zufriedenheit", nova_arousal=0.5,
                              nova_sektor="freude", konflikt=True),
        plan=PlanRecord(task_block="Erfolg: Nova hat soeben selbst erledigt: Notiz 'Chef' angelegt."),
        landschaft=LandschaftRecord(cluster="kissenschlacht", werkzeug="Impuls", vehikel="Frage",
                                    gv_detail="Nova ist offen und zugewandt, Person B haelt Abstand."),
        haltung=HaltungRecord(umfang="knapp", spanne_zeichen=(60, 175), spanne="60 bis 175 Zeichen", naehe=0.7,
                              waerme=0.5, energie="lebhaft", initiative=0.5),
        verfasser=VerfasserRecord(inhalt="Nova stellt fest, dass der Anruf abrupt endete."))


ERINNERUNGEN = {"erinnerungen": [{"id": 1, "inhalt": "Bello war beim Tierarzt", "tiefe": 0, "eingefallen_ueber": ""},
                               {"id": 2, "inhalt": "Der Park im Regen", "tiefe": 1, "eingefallen_ueber": "Bello"}],
                "ids": [1, 2]}
"""The long-term memories of the golden turn: an anchor and one that came by spreading."""


def verfasser_prompt(impulse: bool = False) -> str:
    """The user message the Verfasser sends for the golden turn: its memory (a KZG hit, a note, the
    long-term memories) shaped by the reducer, as the chain runs them."""
    state = golden_state(impulse)
    state.memory = state.memory.model_copy(update={
        "kzg": [KzgTreffer(inhalt="Bello ist ein Beagle", similarity=0.8)],
        "plugins": {"notizen": [{"name": "Einkauf", "zusammenfassung": "Milch und Brot"}]},
        "lzg_resonanz": Resonanz.model_validate(ERINNERUNGEN)})
    llm = ScriptedLLM({"verfasser": ["Nova stellt fest, dass der Anruf abrupt endete."]})
    deps = deps_for(llm)

    async def go():
        for node in (reducer, verfasser):
            await run_node(node.NODE, state, deps)
    asyncio.run(go())
    [call] = [c for c in llm.calls if c["node"] == "verfasser"]
    return call["messages"][-1]["content"]


def render(impulse: bool = False) -> dict[str, str]:
    (system, user), _ = responder.build_messages(golden_state(impulse), deps_for(ScriptedLLM()), "m")
    return {"system": system["content"], "user": user["content"], "verfasser": verfasser_prompt(impulse)}


def _cells(line: str) -> list[str]:
    """The cells of a markdown table row; `\\|` is a pipe inside a cell."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]


def table(heading: str = SECTION) -> list[dict[str, str]]:
    """The rows of the table under `heading` in prompts/README.md (the responder's by default), by
    column name."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    nxt = section.find("\n## ", 1)
    lines = [x.strip() for x in section[: nxt if nxt != -1 else len(section)].splitlines() if x.strip().startswith("|")]
    head = _cells(lines[0])
    rows = []
    for line in lines[2:]:
        cells = _cells(line)
        assert len(cells) == len(head), f"row with {len(cells)} cells, table has {len(head)}: {line}"
        rows.append(dict(zip(head, cells)))
    return rows


def _phrase(row: dict[str, str]) -> str | None:
    m = re.fullmatch(r"`(.+)`", row["Phrase"])
    return m.group(1) if m else None


def _faelle(row: dict[str, str]) -> tuple[str, ...]:
    return FAELLE if row["Fall"] == "beide" else (row["Fall"],)


ROWS = table()


def test_the_table_is_well_formed():
    assert len(ROWS) >= 40
    for row in ROWS:
        if _phrase(row) is None:
            # a row without a phrase says why the seed's item is not in the prompt
            assert row["Phrase"] == "—" and len(row["Anmerkung"]) > 20, row
        else:
            assert row["Nachricht"] in NACHRICHTEN and row["Fall"] in FAELLE + ("beide",), row
            assert row["Wo"], row


@pytest.mark.parametrize("row", [r for r in ROWS if _phrase(r)], ids=lambda r: f"{r['Seed']} {r['Block oder Regel']}")
def test_each_phrase_stands_where_the_table_says(row):
    prompts = {fall: render(fall == "impuls") for fall in _faelle(row)}
    for fall, messages in prompts.items():
        assert _phrase(row) in messages[row["Nachricht"]], (fall, row["Nachricht"], _phrase(row))


@pytest.mark.parametrize("fall", FAELLE)
def test_the_blocks_come_in_the_order_of_the_table(fall):
    messages = render(fall == "impuls")
    for nachricht in NACHRICHTEN:
        blocks = [_phrase(r) for r in ROWS if r["Art"] == "Block" and r["Nachricht"] == nachricht
                  and fall in _faelle(r)]
        positions = [messages[nachricht].index(b) for b in blocks]
        assert positions == sorted(positions), (fall, nachricht, blocks)
        # the binding block closes its message
        assert messages[nachricht].rindex("\n[") + 1 == positions[-1], (fall, nachricht)


def test_every_block_of_the_prompt_is_in_the_table():
    named = {_phrase(r) for r in ROWS if r["Art"] == "Block"}
    for fall in FAELLE:
        for text in render(fall == "impuls").values():
            for header in re.findall(r"^\[[A-ZÄÖÜ —\-]+\]$", text, re.MULTILINE):
                assert header in named, (fall, header)


def test_the_golden_prompt_is_stable():
    # the same state renders the same prompt: the time is the turn's, not the clock's
    assert render() == render() and render(True) == render(True)
