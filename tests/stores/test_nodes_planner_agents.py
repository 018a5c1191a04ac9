"""Planner ⇄ agent_dispatch: the registry and its error paths, the counters in Redis, the
[AUFGABE] block variants and the context cut; the agents do real store operations."""
import asyncio
import uuid


from memory import agent_quoten
from memory.clients import StoreOps
from pipeline import agents
from pipeline.nodes import agent_dispatch, planner
from pipeline.chains import PLANNER_LOOP
from pipeline.runner import ChainRunner
from core.state import AgentResult, PairRecord, PlanRecord, RouteRecord, Stimulus, TurnState
from tests.scripted_llm import ScriptedLLM, deps_for
from pipeline.runner import run_node


class RecordingStore(StoreOps):
    """Stands in for the store deployment: records the memory operations a node asks for."""

    def __init__(self, answers=None):
        super().__init__(self._run)
        self.calls = []
        self.answers = answers or {}

    async def _run(self, op, args, kwargs):
        self.calls.append((op, args, kwargs))
        value = self.answers.get(op, 1)
        return value(*args, **kwargs) if callable(value) else value


def _state(text, management="keins", **plan):
    return TurnState(stimulus=Stimulus(user_id="u1", character_id="nova", turn_id="t", user_prompt=text),
                     pair=PairRecord(character_name="Nova"), route=RouteRecord(management=management),
                     plan=PlanRecord(**plan) if plan else None)


def test_registry_discovers_every_agent_folder():
    assert set(agents.registry()) == {"notizen", "timeline", "direktiven", "charakter", "wissen", "dateien"}


def test_missing_dispatch_and_failing_agent_become_fehler(stores, monkeypatch):
    from redis.asyncio import Redis

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            deps = deps_for(ScriptedLLM(), redis=r, turn=("u1", "nova", uuid.uuid4().hex))
            before = int(await r.hget(agent_quoten.DELIVERED, "geist:character") or 0)
            out = await run_node(agent_dispatch.NODE, _state("x", agent_name="geist"), deps)
            res = out["plan"].agent_results[-1]
            assert res.status == "fehler" and "Kein Dispatch" in res.fehler and out["plan"].agent_name == ""
            assert int(await r.hget(agent_quoten.DELIVERED, "geist:character")) == before + 1
            # the same turn run again (its turn_id repeated) counts its delivery once; its next step counts
            await run_node(agent_dispatch.NODE, _state("x", agent_name="geist"), deps)
            assert int(await r.hget(agent_quoten.DELIVERED, "geist:character")) == before + 1
            await run_node(agent_dispatch.NODE, _state("x", agent_name="geist", agent_results=[res]), deps)
            assert int(await r.hget(agent_quoten.DELIVERED, "geist:character")) == before + 2

            async def boom(state, deps):
                raise RuntimeError("kaputt")

            monkeypatch.setitem(agents.registry(), "notizen", boom)
            out = await run_node(agent_dispatch.NODE, _state("x", agent_name="notizen"), deps)
            assert out["plan"].agent_results[-1].fehler == "RuntimeError: kaputt"
            assert int(await r.hget(agent_quoten.PROCESSED, "notizen:character:fehler")) >= 1
            assert await run_node(agent_dispatch.NODE, _state("x", agent_name=""), deps) == {}
        finally:
            await r.aclose()

    asyncio.run(go())


def test_task_block_variants_and_context_cut():
    ok = AgentResult(agent_name="notizen", status="abgeschlossen", ergebnis={"beschreibung": "Notiz 'Einkauf' angelegt"})
    ask = AgentResult(agent_name="timeline", status="rueckfrage", ergebnis={"frage": "Wann genau?"})
    no = AgentResult(agent_name="notizen", status="verworfen", ergebnis={"grund": "es keine solche Notiz gibt"})
    err = AgentResult(agent_name="timeline", status="fehler", fehler="DB weg")
    block, cut = planner.task_block("Nova", [ok])
    assert block.startswith("Erfolg: Nova hat soeben selbst erledigt: Notiz 'Einkauf' angelegt") and cut
    assert "Fachabteilung" not in block  # Nova is the one who acted
    assert planner.task_block("Nova", [ask]) == ("Rueckfrage: Nova braucht noch eine Angabe und fragt genau danach: Wann genau?", False)
    assert planner.task_block("Nova", [no])[0].startswith("Verworfen:") and planner.task_block("Nova", [no])[1]
    assert planner.task_block("Nova", [err])[0].startswith("Fehler:") and planner.task_block("Nova", [err])[1]


def test_planner_loop_runs_several_agents_in_one_turn(stores):
    from redis.asyncio import Redis

    answer = ('{"auftraege": [{"agent": "notizen", "aktion": "anlegen", "parameter": {"name": "Einkauf", '
              '"inhalt": "Milch"}}, {"agent": "timeline", "aktion": "anlegen", "parameter": {"titel": "Zahnarzt", '
              '"wann": "2026-12-03T14:00"}}, {"agent": "unbekannt", "aktion": "x"}]}')

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            store = RecordingStore({"notizen.create": 11, "timeline.add": 22})
            # after each result the planner decides again: the appointment is still to do, then nothing
            llm = ScriptedLLM({"planner": [answer, NUR_TERMIN, '{"auftraege": []}']})
            deps = deps_for(llm, store=store, redis=r)
            state = _state("Notiz Einkauf: Milch, und Zahnarzt am 3.12. um 14 Uhr", management="notizen")
            runner = ChainRunner(chain=(PLANNER_LOOP,))
            await runner.run(state, deps)
            return state, store, deps, llm
        finally:
            await r.aclose()

    state, store, deps, llm = asyncio.run(go())
    assert [r.status for r in state.plan.agent_results] == ["abgeschlossen", "abgeschlossen"]
    assert [c[0] for c in store.calls] == ["notizen.create", "timeline.add"]
    assert store.calls[1][1][3].isoformat() == "2026-12-03T14:00:00"  # local wall time, stored in UTC by the store
    assert state.plan.task_context_cut and state.plan.task_block.count("Erfolg:") == 2
    nodes = [row.node for row in deps.trace.node_runs()]
    assert nodes == ["planner", "agent_dispatch", "planner", "agent_dispatch", "planner"]
    neu = [(r.outcome, r.inputs["jetzt"]) for r in deps.trace.decisions("planner.neu")]
    assert neu == [("weiter", ["timeline/anlegen"]), ("genug", [])]
    # the second decision saw the first result and what was still planned
    second = llm.calls[1]["messages"][-1]["content"]
    assert "- notizen: abgeschlossen" in second and "timeline/anlegen" in second


NUR_TERMIN = ('{"auftraege": [{"agent": "timeline", "aktion": "anlegen", "parameter": {"titel": "Zahnarzt", '
              '"wann": "2026-12-03T14:00"}}]}')


def test_a_model_that_repeats_its_plan_writes_nothing_twice(stores, caplog):
    """The tiny model names its whole plan again after each result: what is done and no longer
    planned is dropped by name, so the note and the appointment are written once."""
    from redis.asyncio import Redis

    plan = ('{"auftraege": [{"agent": "notizen", "aktion": "anlegen", "parameter": {"name": "Einkauf", '
            '"inhalt": "Milch"}}, {"agent": "timeline", "aktion": "anlegen", "parameter": {"titel": "Zahnarzt", '
            '"wann": "2026-12-03T14:00"}}]}')

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            store = RecordingStore({"notizen.create": 11, "timeline.add": 22})
            deps = deps_for(ScriptedLLM({"planner": [plan]}), store=store, redis=r)  # the same answer every time
            state = _state("Notiz Einkauf: Milch, und Zahnarzt am 3.12. um 14 Uhr", management="notizen")
            await ChainRunner(chain=(PLANNER_LOOP,)).run(state, deps)
            return state, store, deps
        finally:
            await r.aclose()

    state, store, deps = asyncio.run(go())
    assert [c[0] for c in store.calls] == ["notizen.create", "timeline.add"]
    assert [(r.auftrag.agent, r.status) for r in state.plan.agent_results] == [("notizen", "abgeschlossen"),
                                                                              ("timeline", "abgeschlossen")]
    neu = [(r.outcome, r.inputs["wiederholt"]) for r in deps.trace.decisions("planner.neu")]
    assert neu == [("weiter", ["notizen/anlegen"]), ("genug", ["notizen/anlegen", "timeline/anlegen"])]
    assert "fallback wiederholung_verworfen" in caplog.text


def test_the_planner_keeps_its_plan_when_it_cannot_decide_again():
    from core.state import AgentResult, Auftrag

    done = AgentResult(agent_name="notizen", status="abgeschlossen", ergebnis={"beschreibung": "Notiz angelegt"})
    state = _state("Notiz Einkauf: Milch, und Zahnarzt am 3.12.", management="notizen", schleifen=1,
                   agent_results=[done], offen=[Auftrag(agent="timeline", aktion="anlegen", parameter={"titel": "Z"})])
    deps = deps_for(ScriptedLLM({"planner": ["kein json"]}))
    out = asyncio.run(run_node(planner.NODE, state, deps))["plan"]
    assert out.agent_name == "timeline" and out.auftrag.parameter == {"titel": "Z"} and out.offen == []
    assert ("planner.neu", "plan_beibehalten") in [(r.entscheidung, r.outcome) for r in deps.trace.decisions()]


def test_planner_without_management_makes_no_call_and_unusable_orders_ask_back():
    llm = ScriptedLLM()
    state = _state("Wie geht's?")
    out = asyncio.run(run_node(planner.NODE, state, deps_for(llm)))
    assert out["plan"].agent_name == "" and llm.calls == []
    llm = ScriptedLLM({"planner": ["weiss nicht"]})
    out = asyncio.run(run_node(planner.NODE, _state("Mach mal was mit Terminen", management="timeline"), deps_for(llm)))
    assert out["plan"].task_block.startswith("Rueckfrage:") and not out["plan"].task_context_cut


def test_timeline_agent_reads_german_relative_dates():
    from datetime import datetime

    from pipeline.agents.timeline.dispatch import parse_when

    now = datetime(2026, 11, 30, 10, 0)
    assert parse_when("morgen um 14 Uhr", "Europe/Berlin", now) == datetime(2026, 12, 1, 14, 0)
    assert parse_when("2026-12-24T18:30", "Europe/Berlin", now) == datetime(2026, 12, 24, 18, 30)
    assert parse_when("naechsten Dienstag um 9:30 Uhr", "Europe/Berlin", now) == datetime(2026, 12, 1, 9, 30)
    assert parse_when("am 3.12. um 14 Uhr", "Europe/Berlin", now) == datetime(2026, 12, 3, 14, 0)
    assert parse_when("irgendwann", "Europe/Berlin", now) is None


def test_rules_read_plain_management_requests():
    from pipeline import regeln

    t = "Bitte leg eine Notiz Einkauf an: Milch, Brot und Kaese"
    assert regeln.management(t) == "notizen"
    assert regeln.auftrag("notizen", t) == {"agent": "notizen", "aktion": "anlegen",
                                            "parameter": {"name": "Einkauf an", "inhalt": "Milch, Brot und Kaese"}} or \
        regeln.auftrag("notizen", "Notiz Einkauf: Milch")["parameter"] == {"name": "Einkauf", "inhalt": "Milch"}
    t = "Trag einen Termin ein: Zahnarzt, morgen um 14 Uhr"
    assert regeln.management(t) == "timeline"
    assert regeln.auftrag("timeline", t) == {"agent": "timeline", "aktion": "anlegen",
                                             "parameter": {"titel": "Zahnarzt", "wann": "morgen um 14 Uhr"}}
    assert regeln.auftrag("timeline", "Termin mit Oma irgendwann") is None
    assert regeln.management("Wie geht es dir?") == "keins"


def test_planner_falls_back_to_the_rules():
    llm = ScriptedLLM({"planner": ["kein json"]})
    deps = deps_for(llm)
    out = asyncio.run(run_node(planner.NODE, _state("Notiz Einkauf: Milch und Brot", management="notizen"), deps))
    assert out["plan"].agent_name == "notizen"
    assert out["plan"].auftrag.parameter == {"name": "Einkauf", "inhalt": "Milch und Brot"}
    assert any(r.outcome == "planner_regeln" for r in deps.trace.rows)


def test_the_planner_warms_the_agents_only_on_a_turn_that_may_delegate(monkeypatch):
    started = []
    monkeypatch.setattr(planner, "vorwaermen_starten", lambda: started.append(True) or [])
    asyncio.run(run_node(planner.NODE, _state("Wie geht's?"), deps_for(ScriptedLLM())))
    assert started == []  # no management: no agent runs, nothing to load
    llm = ScriptedLLM({"planner": ['{"auftraege": []}']})
    asyncio.run(run_node(planner.NODE, _state("Trag mir morgen was ein", management="timeline"), deps_for(llm)))
    assert started == [True] and len(llm.calls) == 1


def test_the_quota_counters_read_with_the_routers_denominator(stores):
    """Seed 003: delivered against came back (the difference a delivery loss), and the quota against
    the router's utterances of the chain, judged from 100 on; the counters live in Redis."""
    from redis.asyncio import Redis

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            for key in (agent_quoten.DELIVERED, agent_quoten.PROCESSED, agent_quoten.ROUTED):
                await r.delete(key)
            from pipeline.nodes import router
            for i in range(3):  # three utterances classified, each its own turn
                deps = deps_for(ScriptedLLM({"router": ['{"intent": "austausch", "management": "keins"}']}), redis=r,
                                turn=("u1", "nova", f"quote-{uuid.uuid4().hex}"))
                deps.trace.chain = "character"
                await run_node(router.NODE, _state("Wie geht es dir?"), deps)
            await run_node(agent_dispatch.NODE, _state("x", agent_name="geist"), deps)  # delivered, came back: fehler
            await agent_quoten.zugestellt(r, "notizen", "character")  # delivered, never came back
            early = {(q.agent, q.chain): q for q in await agent_quoten.lesen(r)}
            await r.hset(agent_quoten.ROUTED, "character", agent_quoten.MIN_SAMPLE)
            late = {(q.agent, q.chain): q for q in await agent_quoten.lesen(r)}
            return early, late
        finally:
            await r.aclose()

    early, late = asyncio.run(go())
    geist, notizen = early[("geist", "character")], early[("notizen", "character")]
    assert (geist.zugestellt, geist.bearbeitet, geist.zustellverlust) == (1, {"fehler": 1}, 0)
    assert (notizen.zugestellt, notizen.bearbeitet, notizen.zustellverlust) == (1, {}, 1)
    assert geist.geroutet == 3 and geist.quote == round(1 / 3, 4) and not geist.beurteilt
    assert late[("geist", "character")].beurteilt and late[("geist", "character")].quote == 0.01
