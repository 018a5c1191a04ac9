"""The tribunal's and the corrector's prompts against seeds 000 §2 and 004 §6, block by block: the
table in prompts/README.md names for every block and rule where it lives and the phrase that shows
it (or must not show), or why it is no prompt text. Both prompts are rendered from one fixed turn
state — Monday 07.12.2026, 09:30 in Europe/Berlin; a dentist's appointment that Monday at 14:00;
the Thinker corrected the draft to a wrong weekday — through the reducer, the tribunal and the
corrector as the chain runs them. The table is read here, so it cannot drift from the prompts."""
from __future__ import annotations

import asyncio
import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from pipeline.nodes import corrector, reducer, tribunal
from pipeline.runner import run_node
from core.state import (AgentResult, DraftRecord, KzgTreffer, MemoryRecord, PairRecord, PlanRecord,
                            PruefungRecord, RouteRecord, Stimulus, TurnState)
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.unit.test_golden_responder import _phrase, table

SECTION = "## Tribunal und Corrector"
KNOTEN = ("tribunal", "corrector")
MONTAG = datetime(2026, 12, 7, 9, 30, tzinfo=ZoneInfo("Europe/Berlin"))
ZAHNARZT = {"id": 5, "typ": "termin", "titel": "Zahnarzt", "wochentag": "Montag",
            "beginn_lokal": "2026-12-07T14:00:00+01:00"}


def golden_state() -> TurnState:
    resonanz = {"erinnerungen": [{"id": 1, "inhalt": "Bello war beim Tierarzt", "tiefe": 0, "eingefallen_ueber": ""},
                                 {"id": 2, "inhalt": "Der Park im Regen", "tiefe": 1, "eingefallen_ueber": "Bello"}],
                "ids": [1, 2]}
    window = [{"titel": "Yoga", "wochentag": "Mittwoch", "beginn_lokal": "2026-12-09T18:30:00+01:00",
               "bezug": "uebermorgen"}]
    return TurnState(
        stimulus=Stimulus(user_id="u", character_id="nova", turn_id="golden", received_at=MONTAG,
                          user_prompt="Wann ist mein Zahnarzttermin?"),
        pair=PairRecord(character_name="Nova", identitaet="{{char}} ist eine neugierige Begleiterin.",
                        direktiven=["Duze mich."]),
        memory=MemoryRecord(kzg=[{"inhalt": "Bello ist ein Beagle", "similarity": 0.8}],
                            plugins={"timeline": window}, lzg_resonanz=resonanz),
        route=RouteRecord(termine=[ZAHNARZT]),
        plan=PlanRecord(agent_results=[AgentResult(agent_name="notizen", status="abgeschlossen",
                                                   ergebnis={"beschreibung": "Notiz 'Zahnarzt' angelegt"})]),
        draft=DraftRecord(reply="Dein Termin ist bald.", model="m"),
        pruefung=PruefungRecord(status="korrigiert", reply="Dein Termin ist am Dienstag um 14 Uhr.",
                                node_annotations=["Thinker-Korrektur: Uhrzeit ergaenzt."]))


def render() -> dict[str, str]:
    """Each node's prompt (system and user message joined) as the chain sends it: the reducer
    shapes the memory, the tribunal finds a defect, the corrector rewrites."""
    llm = ScriptedLLM({"tribunal": ['{"urteil": "mangel", "gruende": ["Termin ist Montag, nicht Dienstag"]}'],
                       "corrector": ["Dein Zahnarzttermin ist heute um 14 Uhr."]})
    deps, state = deps_for(llm), golden_state()

    async def go():
        for node in (reducer, tribunal, corrector):
            await run_node(node.NODE, state, deps)
    asyncio.run(go())
    return {c["node"]: "\n".join(m["content"] for m in c["messages"]) for c in llm.calls}


ROWS = table(SECTION)
PROMPTS = render()


def _knoten(row) -> tuple[str, ...]:
    return KNOTEN if row["Knoten"] == "beide" else (row["Knoten"],)


def _header(text: str, block: str) -> int:
    return re.search(r"^" + re.escape(block) + r"$", text, re.MULTILINE).start()


def _block_text(text: str, block: str) -> str:
    """The text of one block: from its header (a line of its own) to the next header."""
    start = _header(text, block)
    nxt = re.search(r"^\[[A-ZÄÖÜ —\-]+\]$", text[start + len(block):], re.MULTILINE)
    return text[start: start + len(block) + (nxt.start() if nxt else len(text))]


def test_the_table_is_well_formed():
    assert len(ROWS) >= 30
    for row in ROWS:
        assert len(row) == 8, row
        if _phrase(row) is None:
            assert row["Phrase"] == "—" and len(row["Anmerkung"]) > 20, row
        else:
            assert row["Knoten"] in KNOTEN + ("beide",) and row["Art"] in ("Block", "Inhalt", "Regel", "Ohne"), row
            assert row["Block"].startswith("[") and row["Wo"], row


@pytest.mark.parametrize("row", [r for r in ROWS if _phrase(r)], ids=lambda r: f"{r['Seed']} {r['Block oder Regel']}")
def test_each_phrase_stands_where_the_table_says(row):
    for node in _knoten(row):
        text = _block_text(PROMPTS[node], row["Block"])
        if row["Art"] == "Ohne":
            assert _phrase(row) not in text, (node, row["Block"], _phrase(row))
        else:
            assert _phrase(row) in text, (node, row["Block"], _phrase(row))


@pytest.mark.parametrize("node", KNOTEN)
def test_the_blocks_come_in_the_order_of_the_table_and_the_judged_reply_after_the_facts(node):
    text = PROMPTS[node]
    own = [_phrase(r) for r in ROWS if r["Art"] == "Block" and r["Knoten"] == node]
    positions = [_header(text, b) for b in own]
    assert positions == sorted(positions), (node, own)
    # seed 004 §6: the situation and the facts first, the object judged after them
    assert _header(text, "[FAKTEN]") < _header(text, "[ANTWORT]")


def test_every_block_of_the_prompts_is_in_the_table():
    named = {(n, _phrase(r)) for r in ROWS if r["Art"] == "Block" for n in _knoten(r)}
    for node, text in PROMPTS.items():
        for header in re.findall(r"^\[[A-ZÄÖÜ —\-]+\]$", text, re.MULTILINE):
            assert (node, header) in named, (node, header)


def test_the_golden_prompts_are_stable():
    # the same state renders the same prompts: today is the turn's time, not the clock's
    assert render() == PROMPTS


def _tribunal_prompt(state: TurnState) -> str:
    llm = ScriptedLLM({"tribunal": ['{"urteil": "ok", "gruende": []}']})
    deps = deps_for(llm)

    async def go():
        for node in (reducer, tribunal):
            await run_node(node.NODE, state, deps)
    asyncio.run(go())
    return "".join(f"<{m['role']}>{m['content']}" for m in llm.calls[0]["messages"])


def test_the_next_turns_tribunal_prompt_repeats_everything_that_stayed_the_same():
    """Prefix reuse (issue #16): a pair's next turn — seven minutes later, another message, another
    search hit, no appointment asked, another reply — sends the same bytes up to the end of what
    stayed: the rules, the figure, the directives, the window's appointments. What changed comes
    after it: this turn's search hit, the clock, the message, the hints, the reply."""
    now = golden_state()
    later = golden_state().model_copy(update={
        "stimulus": now.stimulus.model_copy(update={"received_at": MONTAG.replace(minute=37), "turn_id": "spaeter",
                                                    "user_prompt": "Und was mache ich am Mittwoch?"}),
        "memory": now.memory.model_copy(update={"kzg": [KzgTreffer(inhalt="Yoga tut ihm gut", similarity=0.7)]}),
        "route": RouteRecord(), "plan": PlanRecord(),
        "pruefung": PruefungRecord(status="ok", reply="Am Mittwoch hast du Yoga.")})
    a, b = _tribunal_prompt(now), _tribunal_prompt(later)
    same = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    stayed = a.index("- (timeline) Mittwoch, 09.12.2026, 18:30 Uhr (uebermorgen): Yoga\n") + len(
        "- (timeline) Mittwoch, 09.12.2026, 18:30 Uhr (uebermorgen): Yoga\n")
    assert same >= stayed and a[stayed:].startswith("- (kzg) Bello ist ein Beagle")
    for changed in ("Bello ist ein Beagle", "09:30 Uhr", "Wann ist mein Zahnarzttermin?", "Thinker-Korrektur",
                    "Dein Termin ist am Dienstag"):
        assert a.index(changed) >= same, changed
    assert same / len(b) > 0.75, same / len(b)
