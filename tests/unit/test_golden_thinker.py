"""The Thinker's prompts against seed 000, block by block: the table in prompts/README.md names for
every block and rule where it lives and the phrase that shows it (or must not show), or why it is
no prompt text. The prompts are rendered from one fixed turn state — Monday 07.12.2026, 09:30 in
Europe/Berlin; the draft puts the dentist on Tuesday; a note and a memory anchor were written this
turn; the router asks for the web; the sachlage researched the practice — through the reducer and
the Thinker as the chain runs them, with a scripted engine that walks the loop twice: once through
the follow-up (`thinker_nachfass`), the sachlage hits, the spent search budget and an unreadable
line; once through memory_search with both cache stages and web_fetch. The messages the loop
appends (tool results, the reminder) are the `verlauf`. The table is read here, so it cannot drift
from the prompts."""
from __future__ import annotations

import asyncio
import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from core.bestand import Termin
from memory.clients import StoreOps
from pipeline.nodes import reducer, thinker
from pipeline.runner import run_node
from core.state import (AgentResult, Anker, AnkerRecord, DraftRecord, MemoryRecord, PairRecord, PlanRecord,
                            Resonanz, RouteRecord, SachlageRecord, Stimulus, TurnState)
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.unit.test_golden_responder import _phrase, table

SECTION = "## Thinker"
AUFRUFE = ("thinker", "thinker_nachfass")
NACHRICHTEN = ("system", "user", "verlauf")
MONTAG = datetime(2026, 12, 7, 9, 30, tzinfo=ZoneInfo("Europe/Berlin"))
PRAXIS = "https://praxis.example/"
TEAM = "https://praxis.example/team"
TERMIN = Termin(id=1, typ="termin", titel="Zahnarzt", personen=["Dr. Weber"], beginn_utc="2026-12-07T13:00:00+00:00",
                beginn_lokal="2026-12-07T14:00:00+01:00", wochentag="Montag", ende_utc=None, turn_id=None)
LZG = [{"id": 11, "dimension": "fakt", "beobachter": "user", "inhalt": "Der Zahnarzt heisst Dr. Weber.",
        "gewicht": 0.93},
       {"id": 12, "dimension": "fakt", "beobachter": "nova", "inhalt": "Die Praxis liegt am Markt.", "gewicht": 0.41}]
REASONING = "Die Antwort nennt Dienstag, heute ist Montag; ich sehe im Kalender nach."
HEADER = r"^\[[A-ZÄÖÜ —\-]+\]$"


def golden_state() -> TurnState:
    resonanz = {"erinnerungen": [{"id": 1, "inhalt": "Bello war beim Tierarzt", "tiefe": 0, "eingefallen_ueber": ""},
                                 {"id": 2, "inhalt": "Der Park im Regen", "tiefe": 1, "eingefallen_ueber": "Bello"}],
                "ids": [1, 2]}
    window = [{"titel": "Yoga", "wochentag": "Mittwoch", "beginn_lokal": "2026-12-09T18:30:00+01:00",
               "bezug": "uebermorgen"}]
    hits = [{"titel": "Praxis Dr. Weber", "url": PRAXIS, "snippet": "Sprechzeiten"},
            {"titel": "Unser Team", "url": TEAM, "snippet": "Dr. Weber und Team"}]
    return TurnState(
        stimulus=Stimulus(user_id="u", character_id="nova", turn_id="golden", received_at=MONTAG,
                          user_prompt="Wann ist mein Zahnarzttermin?"),
        pair=PairRecord(character_name="Nova", identitaet="{{char}} ist eine neugierige Begleiterin."),
        memory=MemoryRecord(kzg=[{"inhalt": "Bello ist ein Beagle", "similarity": 0.8}],
                            plugins={"timeline": window}, lzg_resonanz=resonanz),
        sachlage=SachlageRecord(objekte=[{"name": "Zahnarztpraxis", "behauptung": "montags geoeffnet",
                                          "recherche": hits}]),
        anker=AnkerRecord(geschrieben=[Anker(id=7, datum="07.12.2026", titel="Zahnarzt")]),
        route=RouteRecord(needs_web=True),
        plan=PlanRecord(agent_results=[
            AgentResult(agent_name="notizen", status="abgeschlossen",
                        ergebnis={"beschreibung": "Notiz 'Zahnarzt' angelegt"}),
            AgentResult(agent_name="timeline", status="rueckfrage",
                        ergebnis={"beschreibung": "Termin 'Yoga' verschoben"})]),
        draft=DraftRecord(reply="Dein Zahnarzttermin ist am Dienstag um 14 Uhr.", model="m"))


class Store(StoreOps):
    """The store's answers for the pair: the dentist on Monday, two anchors of the LZG."""

    def __init__(self):
        super().__init__(self._run)

    async def _run(self, op, args, kwargs):
        return {"timeline.find_by_date_range": [TERMIN], "timeline.find_by_keyword": [TERMIN],
                "lesepfad.erinnern": Resonanz.model_validate({"erinnerungen": LZG})}[op]


class Embedder:
    async def embed(self, trace, text):
        return [0.1, 0.2, 0.3]


class Web:
    """The web layer: the pages load; a search would be a provider call, which the sachlage hits spare."""

    configured = True

    async def search(self, query):
        raise AssertionError("the first search is served from the sachlage hits")

    async def fetch(self, url):
        return {"ok": True, "url": url, "text": f"Seite {url}: Sprechzeiten Montag bis Freitag, 8 bis 18 Uhr."}


KORREKTUR = ("ERGEBNIS: KORREKTUR\nPROBLEME: Der Termin ist heute, Montag, nicht Dienstag.\n"
             "KORRIGIERTE ANTWORT: Dein Zahnarzttermin ist heute, Montag, um 14 Uhr.")
LAEUFE = (
    # the model reasons apart (its name has a split stem): the first answer is reasoning only
    ("gemma4-golden", {"thinker": [("", REASONING), "TOOL: web_search(Zahnarztpraxis Dr. Weber Sprechzeiten)",
                                   "TOOL: web_search(Zahnarzt Montag geoeffnet)", "Ich bin fast fertig.", KORREKTUR],
                       "thinker_nachfass": ["TOOL: timeline_check(2026-12-07)"]}),
    ("scripted", {"thinker": ["TOOL: memory_search(Zahnarzt)", "TOOL: memory_search(Wer ist mein Zahnarzt?)",
                              "TOOL: memory_search(Zahnarzt)", f"TOOL: web_fetch({TEAM})", "ERGEBNIS: OK"]}),
)


def _lauf(model: str, script: dict) -> tuple[list[dict], dict]:
    llm = ScriptedLLM({k: list(v) for k, v in script.items()}, model=model)
    deps = deps_for(llm, store=Store(), embedder=Embedder(), web=Web(), turn=("u", "nova", "golden"))

    async def go():
        state = golden_state()
        for node in (reducer, thinker):
            state = state.model_copy(update=await run_node(node.NODE, state, deps))
        return state
    return llm.calls, asyncio.run(go()).pruefung.model_dump()


def render() -> dict[tuple[str, str], str]:
    """Each call's messages as the chain sends them: the Thinker's system message and its first
    user message (the same in every iteration of both runs), the verlauf (the user messages the
    loop appends, as the last call of each run carries them) and the follow-up's messages."""
    out: dict[tuple[str, str], str] = {}
    verlauf = []
    for model, script in LAEUFE:
        calls, _ = _lauf(model, script)
        mine = [c for c in calls if c["node"] == "thinker"]
        for c in mine:
            assert c["messages"][:2] == mine[0]["messages"][:2], "the prompt's head changed within the loop"
        system, user = mine[0]["messages"][:2]
        assert out.setdefault(("thinker", "system"), system["content"]) == system["content"]
        assert out.setdefault(("thinker", "user"), user["content"]) == user["content"]
        verlauf += [m["content"] for m in mine[-1]["messages"][2:] if m["role"] == "user"]
        for c in calls:
            if c["node"] == "thinker_nachfass":
                out[("thinker_nachfass", "system")], out[("thinker_nachfass", "user")] = (
                    m["content"] for m in c["messages"])
    out[("thinker", "verlauf")] = "\n".join(verlauf)
    return out


ROWS = table(SECTION)
PROMPTS = render()


def _key(row) -> tuple[str, str]:
    return row["Aufruf"], row["Nachricht"]


def _header(text: str, block: str) -> int:
    """Where a block begins: its header on a line of its own (a block may name another in its text)."""
    return re.search(r"^" + re.escape(block) + r"$", text, re.MULTILINE).start()


def test_the_table_is_well_formed():
    assert len(ROWS) >= 40
    for row in ROWS:
        assert len(row) == 8, row
        if _phrase(row) is None:
            # a row without a phrase says why the seed's item is not in the prompt
            assert row["Phrase"] == "—" and len(row["Anmerkung"]) > 20, row
        else:
            assert _key(row) in PROMPTS and row["Art"] in ("Block", "Inhalt", "Regel", "Ohne"), row
            assert row["Wo"], row


@pytest.mark.parametrize("row", [r for r in ROWS if _phrase(r)], ids=lambda r: f"{r['Seed']} {r['Block oder Regel']}")
def test_each_phrase_stands_where_the_table_says(row):
    text = PROMPTS[_key(row)]
    if row["Art"] == "Ohne":
        assert _phrase(row) not in text, (_key(row), _phrase(row))
    else:
        assert _phrase(row) in text, (_key(row), _phrase(row))


@pytest.mark.parametrize("key", [k for k in PROMPTS])
def test_the_blocks_come_in_the_order_of_the_table(key):
    text = PROMPTS[key]
    own = [_phrase(r) for r in ROWS if r["Art"] == "Block" and _key(r) == key]
    positions = [_header(text, b) for b in own]
    assert positions == sorted(positions), (key, own)


def test_the_reply_to_check_comes_last():
    # §3.2: [VERARBEITUNG] right after [TOOLS]; the object checked after everything it is checked against
    user = PROMPTS[("thinker", "user")]
    headers = re.findall(HEADER, user, re.MULTILINE)
    assert headers[:2] == ["[TOOLS]", "[VERARBEITUNG]"] and headers[-1] == "[ANTWORT]"


def test_every_block_of_the_prompts_is_in_the_table():
    named = {_phrase(r) for r in ROWS if r["Art"] == "Block"}
    for key, text in PROMPTS.items():
        for header in re.findall(HEADER, text, re.MULTILINE):
            assert header in named, (key, header)


def test_the_runs_end_as_scripted():
    # the scripts walk the paths the table relies on: a correction after the follow-up, an OK after the cache hints
    (_, first), (_, second) = (_lauf(*lauf) for lauf in LAEUFE)
    assert first["status"] == "korrektur" and first["reply"] == "Dein Zahnarzttermin ist heute, Montag, um 14 Uhr."
    assert first["werkzeuge"] == ["timeline_check", "web_search", "web_search"] and first["iterationen"] == 5
    assert second["status"] == "ok" and second["werkzeuge"] == ["memory_search"] * 3 + ["web_fetch"]


def test_the_follow_up_asks_without_reasoning():
    calls, _ = _lauf(*LAEUFE[0])
    assert [(c["node"], c["think"]) for c in calls[:3]] == [("thinker", True), ("thinker_nachfass", False),
                                                             ("thinker", True)]


def test_the_golden_prompts_are_stable():
    # the same state renders the same prompts: now is the turn's time, not the clock's
    assert render() == PROMPTS
