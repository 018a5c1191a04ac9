"""A turn that runs again — its actor died mid-turn and the ingress retried it under the same
turn id — writes nothing twice: the agents' note, appointment, directive and instruction and
the timeline anchor each carry the turn and their step as idempotency key, on the real stores."""
import asyncio
import uuid

from memory import charakter, notizen, timeline
from pipeline.nodes import erinnerungsanker
from pipeline.runner import PLANNER_LOOP, ChainRunner
from pipeline.state import PairRecord, RouteRecord, Stimulus, TurnState
from tests.conftest import with_pool
from tests.scripted_llm import PoolStore, ScriptedLLM, deps_for
from pipeline.runner import run_node

# at most three orders a turn (planner.MAX_AUFTRAEGE): two turns' plans cover the four agents that write
PLAENE = {
    "a": '{"auftraege": [{"agent": "notizen", "aktion": "anlegen", "parameter": {"name": "Einkauf", "inhalt": "Milch"}},'
         ' {"agent": "timeline", "aktion": "anlegen", "parameter": {"titel": "Zahnarzt", "wann": "2026-12-03T14:00"}}]}',
    "b": '{"auftraege": [{"agent": "direktiven", "aktion": "anlegen", "parameter": {"text": "Duze mich."}},'
         ' {"agent": "charakter", "aktion": "anweisung", "parameter": {"text": "Sei etwas frecher."}}]}',
}
ANKER = '{"datiert": true, "datum": "2026-11-28", "titel": "Umzug nach Leipzig"}'


def _state(user, turn_id):
    return TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id=turn_id,
                                       user_prompt="Notiz Einkauf, Zahnarzt am 3.12., duze mich, sei frecher"),
                     pair=PairRecord(character_name="Nova"), route=RouteRecord(management="notizen"))


async def _run_turn(p, r, user, turn_id):
    llm = ScriptedLLM({"planner": [PLAENE[turn_id[-1]]], "erinnerungsanker": [ANKER]})
    deps = deps_for(llm, store=PoolStore(p), redis=r, turn=(user, "nova", turn_id))
    state = _state(user, turn_id)
    await ChainRunner(chain=(PLANNER_LOOP,)).run(state, deps)
    anker = (await run_node(erinnerungsanker, state, deps))["anker"]
    return [res.ergebnis.get("id") for res in state.plan.agent_results], anker.geschrieben[0].id


def _counts(p, user):
    async def go():
        notes = await notizen.find_by_keyword(p, user, "Einkauf")
        found = await timeline.find_by_keyword(p, user, "nova", "Zahnarzt", "Europe/Berlin")
        async with p.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM timeline WHERE user_id=%s AND typ='erinnerungs_anker'", (user,))
            anker = (await cur.fetchone())[0]
        return (len(notes), len(found), len(await charakter.directives(p, user, "nova")),
                len(await charakter.instructions(p, user, "nova")), anker)
    return go()


def test_a_retried_turn_writes_each_side_effect_once(stores, pool):
    from redis.asyncio import Redis

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            user = f"once-{uuid.uuid4().hex[:6]}"
            for turn in ("t1-a", "t1-b"):
                first = await _run_turn(p, r, user, turn)
                again = await _run_turn(p, r, user, turn)  # the same turn once more
                assert again == first and None not in first[0]  # each sees what it wrote the first time
            assert await _counts(p, user) == (1, 1, 1, 1, 2)  # one anchor per turn
            for turn in ("t2-a", "t2-b"):  # other turns are other writes
                await _run_turn(p, r, user, turn)
            assert await _counts(p, user) == (2, 2, 2, 2, 4)
        finally:
            await r.aclose()

    asyncio.run(with_pool(pool, go))
