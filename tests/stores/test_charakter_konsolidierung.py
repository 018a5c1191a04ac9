"""Character instructions through the agent (seed 004: at most three active, then a consolidation
question): the planner's scripted model answer becomes the order, the charakter agent changes
the real store. A fourth asks back and adds nothing; the answer lifts or merges and brings the
fourth in; a replace, a lift by words of the text, an unknown reference; a turn run again."""
import asyncio
import json

from memory import beziehung
from core.beziehung import Anweisung
from pipeline.agents.charakter.dispatch import CharakterAuftrag, finden
from pipeline.chains import PLANNER_LOOP
from pipeline.runner import ChainRunner
from core.state import Auftrag, PairRecord, RouteRecord, Stimulus, TurnState
from tests.conftest import new_pair, with_pool
from tests.scripted_llm import PoolStore, ScriptedLLM, deps_for

FRECH = "Du bist ein freches Maedel vom Land"
BOTANIK = "Du liebst Botanik und erzaehlst gern von Pflanzen"
DIALEKT = "Du sprichst ein bisschen Dialekt"
SEEMANN = "Du fluchst wie ein Seemann"


def _plan(aktion: str, **parameter) -> str:
    return json.dumps({"auftraege": [{"agent": "charakter", "aktion": aktion, "parameter": parameter}]})


async def _turn(p, r, user, turn_id, plan, text="Aendere deinen Charakter"):
    """One turn's planner loop: the model's order, then (deciding again) nothing more."""
    llm = ScriptedLLM({"planner": [plan, '{"auftraege": []}']})
    deps = deps_for(llm, store=PoolStore(p), redis=r, turn=(user, "nova", turn_id))
    state = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id=turn_id, user_prompt=text),
                      pair=PairRecord(character_name="Nova"), route=RouteRecord(management="charakter"))
    await ChainRunner(chain=(PLANNER_LOOP,)).run(state, deps)
    [result] = state.plan.agent_results
    entscheidungen = {row.entscheidung: row for row in deps.trace.decisions()}
    return result, state.plan.task_block, entscheidungen


def _run(stores, pool, fn):
    from redis.asyncio import Redis

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            return await fn(p, r)
        finally:
            await r.aclose()

    return asyncio.run(with_pool(pool, go))


async def _drei(p, r, user):
    for i, text in enumerate((FRECH, BOTANIK, DIALEKT)):
        res, _, d = await _turn(p, r, user, f"add-{i}", _plan("anweisung", text=text))
        assert res.status == "abgeschlossen" and d["charakter.auftrag"].outcome == "aufgenommen"


async def _aktiv(p, user):
    return [a.text for a in await beziehung.instructions(p, user, "nova")]


def test_a_fourth_instruction_asks_to_consolidate_and_adds_nothing(stores, pool):
    async def go(p, r):
        user, _ = new_pair("konsol")
        await _drei(p, r, user)
        res, block, d = await _turn(p, r, user, "vierte", _plan("anweisung", text=SEEMANN))
        return res, block, d, await _aktiv(p, user)

    res, block, d, aktiv = _run(stores, pool, go)
    assert aktiv == [FRECH, BOTANIK, DIALEKT]  # no fourth active instruction
    assert res.status == "rueckfrage" and res.ergebnis["aktion"] == "konsolidieren"
    frage = res.ergebnis["frage"]
    assert all(f"'{t}'" in frage for t in (FRECH, BOTANIK, DIALEKT)) and SEEMANN in frage
    assert "zusammengefasst" in frage and "weichen" in frage
    assert block.startswith("Rueckfrage: Nova braucht noch eine Angabe") and frage in block
    assert d["charakter.auftrag"].outcome == "konsolidieren"


def test_a_replace_order_leaves_three_active_with_the_new_one(stores, pool):
    async def go(p, r):
        user, _ = new_pair("ersetzen")
        await _drei(p, r, user)
        res, block, d = await _turn(p, r, user, "ersetzen", _plan("ersetzen", alt="Botanik", text=SEEMANN),
                                    "Ersetze die Botanik durch: fluche wie ein Seemann")
        return res, block, d, await _aktiv(p, user)

    res, block, d, aktiv = _run(stores, pool, go)
    assert aktiv == [FRECH, DIALEKT, SEEMANN]
    assert res.status == "abgeschlossen" and res.ergebnis["aktion"] == "ersetzen"
    assert len(res.ergebnis["aufgehoben"]) == 1 and res.ergebnis["neu"] == [res.ergebnis["id"]]
    assert block.startswith("Erfolg: Nova hat soeben selbst erledigt: Anweisung 'Du liebst Botanik")
    assert d["charakter.auftrag"].outcome == "ersetzt" and d["charakter.verweis"].outcome == "woerter"


def test_the_answer_to_the_question_lifts_one_and_brings_the_fourth_in(stores, pool):
    """The human answers the consolidation question with the one to drop; the fourth, kept aside,
    takes its place in the same change."""
    async def go(p, r):
        user, _ = new_pair("antwort")
        await _drei(p, r, user)
        await _turn(p, r, user, "vierte", _plan("anweisung", text=SEEMANN))
        res, _, d = await _turn(p, r, user, "antwort", _plan("deaktivieren", alt="die mit den botanischen Sachen"),
                                "Die mit den botanischen Sachen kann weg")
        return res, d, await _aktiv(p, user)

    res, d, aktiv = _run(stores, pool, go)
    assert aktiv == [FRECH, DIALEKT, SEEMANN]
    assert res.status == "abgeschlossen"
    assert res.ergebnis["beschreibung"] == f"Anweisung '{BOTANIK}' durch '{SEEMANN}' ersetzt"
    assert d["charakter.auftrag"].outcome == "ersetzt" and d["charakter.auftrag"].inputs["vorgemerkt"]


def test_the_fourth_completed_with_the_one_to_give_way_replaces_it(stores, pool):
    """The consolidation question names what is missing (`fehlt`: alt): the planner may complete
    the pending order with the answer — the new instruction and the one it takes the place of."""
    async def go(p, r):
        user, _ = new_pair("ergaenzt")
        await _drei(p, r, user)
        frage, _, _ = await _turn(p, r, user, "vierte", _plan("anweisung", text=SEEMANN))
        res, _, d = await _turn(p, r, user, "antwort", _plan("anweisung", text=SEEMANN, alt="Dialekt"),
                                "Der Dialekt kann weg")
        return frage, res, d, await _aktiv(p, user)

    frage, res, d, aktiv = _run(stores, pool, go)
    assert frage.ergebnis["fehlt"] == "alt" and frage.ergebnis["angabe"]
    assert aktiv == [FRECH, BOTANIK, SEEMANN]
    assert res.status == "abgeschlossen" and res.ergebnis["aktion"] == "ersetzen"
    assert d["charakter.auftrag"].outcome == "ersetzt"


def test_a_merge_of_two_makes_room_for_the_fourth(stores, pool):
    async def go(p, r):
        user, _ = new_pair("merge")
        await _drei(p, r, user)
        await _turn(p, r, user, "vierte", _plan("anweisung", text=SEEMANN))
        res, _, d = await _turn(p, r, user, "merge", _plan("zusammenfassen", alt="die erste", alt2="2",
                                                           text="Du bist frech und liebst Pflanzen"),
                                "Fass die ersten beiden zusammen")
        return res, d, await _aktiv(p, user)

    res, d, aktiv = _run(stores, pool, go)
    assert aktiv == [DIALEKT, "Du bist frech und liebst Pflanzen", SEEMANN]
    assert res.status == "abgeschlossen" and res.ergebnis["aktion"] == "zusammenfassen"
    assert len(res.ergebnis["aufgehoben"]) == 2 and len(res.ergebnis["neu"]) == 2
    assert d["charakter.auftrag"].outcome == "zusammengefasst" and d["charakter.verweis"].outcome == "platz"


def test_a_merge_without_a_merged_text_joins_the_two(stores, pool, caplog):
    async def go(p, r):
        user, _ = new_pair("verbunden")
        await _drei(p, r, user)
        res, _, _ = await _turn(p, r, user, "merge", _plan("zusammenfassen", alt="frech", alt2="Dialekt"))
        return res, await _aktiv(p, user)

    res, aktiv = _run(stores, pool, go)
    assert aktiv == [BOTANIK, f"{FRECH}; {DIALEKT}"] and res.status == "abgeschlossen"
    assert "fallback zusammenfassung_verbunden" in caplog.text


def test_deactivate_by_words_of_the_text(stores, pool):
    async def go(p, r):
        user, _ = new_pair("worte")
        await _drei(p, r, user)
        res, block, d = await _turn(p, r, user, "weg", _plan("deaktivieren", alt="Dialekt sprechen"),
                                    "Hoer auf, Dialekt zu sprechen")
        return res, block, d, await _aktiv(p, user)

    res, block, d, aktiv = _run(stores, pool, go)
    assert aktiv == [FRECH, BOTANIK]
    assert res.status == "abgeschlossen" and res.ergebnis["beschreibung"] == f"Anweisung aufgehoben: '{DIALEKT}'"
    assert d["charakter.auftrag"].outcome == "aufgehoben" and d["charakter.verweis"].outcome == "woerter"
    assert block.startswith("Erfolg:")


def test_an_unknown_reference_asks_back_naming_the_candidates(stores, pool):
    async def go(p, r):
        user, _ = new_pair("unbekannt")
        await _drei(p, r, user)
        unbekannt = await _turn(p, r, user, "astro", _plan("deaktivieren", alt="Astronomie"))
        return unbekannt, await _aktiv(p, user)

    (res, block, d), aktiv = _run(stores, pool, go)
    assert aktiv == [FRECH, BOTANIK, DIALEKT]  # nothing lifted
    assert res.status == "rueckfrage" and "'Astronomie'" in res.ergebnis["frage"]
    assert all(f"'{t}'" in res.ergebnis["frage"] for t in (FRECH, BOTANIK, DIALEKT))
    assert block.startswith("Rueckfrage:")
    assert d["charakter.verweis"].outcome == "unbekannt" and d["charakter.auftrag"].outcome == "verweis_unbekannt"


def test_an_order_that_names_no_instruction_asks_which_and_nothing_to_lift_is_said(stores, pool):
    async def go(p, r):
        user, _ = new_pair("ohne")
        leer = await _turn(p, r, user, "leer", _plan("deaktivieren", alt="Botanik"))
        await _turn(p, r, user, "a", _plan("anweisung", text=BOTANIK))
        ohne = await _turn(p, r, user, "ohne", _plan("ersetzen", text=SEEMANN))
        return leer, ohne, await _aktiv(p, user)

    (leer, _, d_leer), (ohne, _, d_ohne), aktiv = _run(stores, pool, go)
    assert aktiv == [BOTANIK]
    assert leer.status == "verworfen" and d_leer["charakter.auftrag"].outcome == "keine_anweisung"
    assert ohne.status == "rueckfrage" and ohne.ergebnis["fehlt"] == "alt" and f"'{BOTANIK}'" in ohne.ergebnis["frage"]
    assert d_ohne["charakter.auftrag"].outcome == "ohne_verweis"


def test_a_reference_two_instructions_match_equally_asks_which(stores, pool):
    async def go(p, r):
        user, _ = new_pair("mehrdeutig")
        for i, text in enumerate(("Sei frech zu Fremden", "Sei frech zu Freunden")):
            await _turn(p, r, user, f"add-{i}", _plan("anweisung", text=text))
        res, _, d = await _turn(p, r, user, "frech", _plan("ersetzen", alt="frech", text="Sei hoeflich"))
        return res, d, await _aktiv(p, user)

    res, d, aktiv = _run(stores, pool, go)
    assert aktiv == ["Sei frech zu Fremden", "Sei frech zu Freunden"]
    assert res.status == "rueckfrage" and "mehrere" in res.ergebnis["frage"]
    assert "'Sei frech zu Fremden'" in res.ergebnis["frage"] and "'Sei frech zu Freunden'" in res.ergebnis["frage"]
    assert d["charakter.verweis"].outcome == "mehrdeutig"


def test_a_turn_run_again_changes_nothing_twice_and_answers_the_same(stores, pool):
    async def go(p, r):
        user, _ = new_pair("wieder")
        await _drei(p, r, user)
        plan = _plan("ersetzen", alt="Botanik", text=SEEMANN)
        erst = await _turn(p, r, user, "ersetzen", plan)
        nochmal = await _turn(p, r, user, "ersetzen", plan)  # the same turn once more
        add = _plan("anweisung", text="Sei neugierig")
        await _turn(p, r, user, "voll", add)
        voll_nochmal = await _turn(p, r, user, "voll", add)
        return erst, nochmal, voll_nochmal, await _aktiv(p, user)

    erst, nochmal, voll_nochmal, aktiv = _run(stores, pool, go)
    assert aktiv == [FRECH, DIALEKT, SEEMANN]
    assert nochmal[0].ergebnis == erst[0].ergebnis and nochmal[2]["charakter.auftrag"].outcome == "schon_erledigt"
    assert voll_nochmal[0].status == "rueckfrage" and voll_nochmal[0].ergebnis["aktion"] == "konsolidieren"


def test_an_existing_instruction_is_not_added_twice(stores, pool):
    async def go(p, r):
        user, _ = new_pair("doppelt")
        await _turn(p, r, user, "a", _plan("anweisung", text=FRECH))
        res, block, d = await _turn(p, r, user, "b", _plan("anweisung", text=f"  {FRECH.upper()}. "))
        return res, block, d, await _aktiv(p, user)

    res, block, d, aktiv = _run(stores, pool, go)
    assert aktiv == [FRECH] and res.status == "verworfen" and block.startswith("Verworfen:")
    assert d["charakter.auftrag"].outcome == "schon_vorhanden"


def test_the_order_is_read_leniently():
    a = CharakterAuftrag.lesen(Auftrag(agent="charakter", aktion="Löschen",
                                       parameter={"alt": " die  zweite ", "id": 7}))
    assert (a.aktion, a.verweise, a.verweis_ids) == ("deaktivieren", ["7", "die zweite"], {"7"})
    assert CharakterAuftrag.lesen(Auftrag(agent="charakter", aktion="zusammenfassen")).aktion == "ersetzen"
    assert CharakterAuftrag.lesen(Auftrag(agent="charakter", aktion="irgendwas", parameter={"text": "x"})).aktion == ""


def test_a_reference_is_matched_by_id_place_or_words():
    aktiv = [Anweisung(id=14, text=FRECH), Anweisung(id=15, text=BOTANIK), Anweisung(id=17, text=DIALEKT)]
    assert finden("15", aktiv, nur_id=True).anweisung.id == 15
    assert finden("16", aktiv, nur_id=True).wie == "unbekannt"
    platz = ("2", "die zweite", "Nr. 3", "die letzte", "17")  # "17": no place among three, the stored id
    assert [finden(v, aktiv).anweisung.id for v in platz] == [15, 15, 17, 17, 17]
    t = finden("das botanische Zeug", aktiv)
    assert (t.wie, t.anweisung.id) == ("woerter", 15)
    assert finden("frecher sein", aktiv).anweisung.id == 14
    assert finden("Astronomie", aktiv).wie == "unbekannt" and finden("9", aktiv).wie == "unbekannt"
    assert finden("Du", aktiv).wie == "mehrdeutig"  # only function words: all three share it
