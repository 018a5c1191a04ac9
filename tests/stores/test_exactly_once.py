"""A turn that runs again — its actor died mid-turn and the ingress retried it under the same
turn id — writes nothing twice: the agents' note, appointment, directive and instruction and
the timeline anchor each carry the turn and their step as idempotency key, on the real stores."""
import asyncio
import uuid

from memory import beziehung, notizen, timeline
from pipeline.nodes import erinnerungsanker
from pipeline.chains import PLANNER_LOOP
from pipeline.runner import ChainRunner
from core.state import PairRecord, RouteRecord, Stimulus, TurnState
from tests.conftest import with_pool
from tests.scripted_llm import PoolStore, ScriptedLLM, deps_for
from pipeline.runner import run_node
from datetime import datetime, timezone
from core.wire import Episode, Verdichtung

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
    plan = PLAENE[turn_id[-1]]
    # after each agent result the planner decides again: the rest of its plan, then nothing more
    rest = '{"auftraege": [' + plan.split("}}, ", 1)[1]
    llm = ScriptedLLM({"planner": [plan, rest, '{"auftraege": []}'], "erinnerungsanker": [ANKER]})
    deps = deps_for(llm, store=PoolStore(p), redis=r, turn=(user, "nova", turn_id))
    state = _state(user, turn_id)
    await ChainRunner(chain=(PLANNER_LOOP,)).run(state, deps)
    anker = (await run_node(erinnerungsanker.NODE, state, deps))["anker"]
    return [res.ergebnis.get("id") for res in state.plan.agent_results], anker.geschrieben[0].id


def _counts(p, user):
    async def go():
        notes = await notizen.find_by_keyword(p, user, "Einkauf")
        found = await timeline.find_by_keyword(p, user, "nova", "Zahnarzt", "Europe/Berlin")
        async with p.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM timeline WHERE user_id=%s AND typ='erinnerungs_anker'", (user,))
            anker = (await cur.fetchone())[0]
        return (len(notes), len(found), len(await beziehung.directives(p, user, "nova")),
                len(await beziehung.instructions(p, user, "nova")), anker)
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
            # the same character instruction again is no second one (it would take a second of the three places)
            assert await _counts(p, user) == (2, 2, 2, 1, 4)
        finally:
            await r.aclose()

    asyncio.run(with_pool(pool, go))


def test_a_redelivered_background_job_imprints_its_memories_once(pool):
    """praegung: the same background job twice — the second delivery finds the turn's nodes (their
    source is the turn), asks no model and writes neither nodes nor synapses; two deliveries racing
    past that check are settled when the nodes are written."""
    from memory import lzg
    from pipeline.nodes import praegung
    from core.state import DraftRecord, HintergrundRecord, MemoryRecord, PerzeptionRecord
    from tests.conftest import new_pair, unit

    antwort = ('{"erinnerungen": [{"inhalt": "Person B hat einen Hund namens Bello"}, {"inhalt": "Bello war krank"}],'
               ' "profil_mensch": "Person B sorgt sich um Bello."}')

    class _Embedder:
        async def embed(self, trace, text):
            return unit(1).tolist()

    async def deliver(p, user, resonanz):
        llm = ScriptedLLM({"praegung": [antwort]})
        deps = deps_for(llm, store=PoolStore(p), embedder=_Embedder(), turn=(user, "nova", "t1"))
        state = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id="t1",
                                            user_prompt="Bello ist krank"),
                          pair=PairRecord(character_name="Nova"), draft=DraftRecord(reply="Oh nein.", model="m"),
                          perzeption=PerzeptionRecord(), hintergrund=HintergrundRecord(kern="Bello krank"),
                          memory=MemoryRecord(lzg_resonanz={"ids": resonanz, "erinnerungen": []}))
        await run_node(praegung.NODE, state, deps)
        return [(r.entscheidung, r.outcome) for r in deps.trace.decisions()], llm

    async def counts(p, user):
        async with p.connection() as conn:
            cur = await conn.execute("SELECT count(*), count(*) FILTER (WHERE quelle='t1') FROM lzg_knoten"
                                     " WHERE user_id=%s", (user,))
            knoten, vom_turn = await cur.fetchone()
            cur = await conn.execute("SELECT count(*) FROM lzg_synapsen s JOIN lzg_knoten k ON k.id = s.von_id"
                                     " WHERE k.user_id=%s", (user,))
            synapsen = (await cur.fetchone())[0]
        return knoten, vom_turn, synapsen, (await beziehung.profile(p, user, "nova")).mensch_kern

    async def go(p):
        user = new_pair("praeg-once")[0]
        resonanz = await lzg.add_nodes(p, user, "nova", [{"inhalt": "Bello", "embedding": unit(1)},
                                                         {"inhalt": "Hund", "embedding": unit(2)}])
        first, _ = await deliver(p, user, resonanz)
        after_first = await counts(p, user)
        again, llm = await deliver(p, user, resonanz)
        # a delivery that raced past the check: the source's lock admits the nodes once
        race = await lzg.episode_schreiben(p, user, "nova", Episode(
            quelle="t1", zeitpunkt=datetime.now(timezone.utc),
            verdichtungen=[Verdichtung(inhalt="doppelt", embedding=unit(3).tolist())]))
        return first, after_first, again, llm, race, await counts(p, user), \
            await lzg.knoten_der_quelle(p, user, "nova", "t1")

    first, after_first, again, llm, race, after, ids = asyncio.run(with_pool(pool, go))
    assert ("praegung.ergebnis", "modell") in first
    # the exchange (two utterances, linked both ways) and two memories of the turn, each linked both
    # ways to the exchange and to the two resonating anchors
    assert after_first == (2 + 2 + 2, 4, 2 + 2 * 2 * 2 + 2 * 2 * 2, "Person B sorgt sich um Bello.")
    assert again == [("praegung.ergebnis", "schon_erledigt")] and llm.calls == []
    assert (race.neu, race.ids) == (False, ids) and len(ids) == 4
    assert after == after_first


class _Abgerissen(ConnectionError):
    """The worker died right after a write had committed."""


def test_a_background_job_cut_off_after_any_write_leaves_after_its_redelivery_what_one_delivery_leaves(pool):
    """praegung, cut off right after the profile's growth or right after the exchange's nodes were
    committed, then delivered again: the nodes, every synapse (to the exchange and to the resonating
    anchors), the anchors' restarted curves and the profile are what one clean delivery leaves."""
    from memory import lzg
    from pipeline.nodes import praegung
    from core.state import DraftRecord, HintergrundRecord, MemoryRecord, PerzeptionRecord
    from tests.conftest import new_pair, unit

    antwort = ('{"erinnerungen": [{"inhalt": "Person B hat einen Hund namens Bello"}, {"inhalt": "Bello war krank"}],'
               ' "profil_mensch": "Person B sorgt sich um Bello."}')

    class _Embedder:
        async def embed(self, trace, text):
            return unit(1).tolist()

    class _Reisst(PoolStore):
        def __init__(self, p, nach: str | None):
            super().__init__(p)
            self.nach = nach

        async def _run(self, op, args, kwargs):
            out = await super()._run(op, args, kwargs)
            if op == self.nach:
                raise _Abgerissen(op)
            return out

    async def deliver(p, user, resonanz, nach=None):
        deps = deps_for(ScriptedLLM({"praegung": [antwort]}), store=_Reisst(p, nach), embedder=_Embedder(),
                        turn=(user, "nova", "t1"))
        state = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id="t1", user_prompt="Bello ist krank"),
                          pair=PairRecord(character_name="Nova"), draft=DraftRecord(reply="Oh nein.", model="m"),
                          perzeption=PerzeptionRecord(), hintergrund=HintergrundRecord(kern="Bello krank"),
                          memory=MemoryRecord(lzg_resonanz={"ids": resonanz, "erinnerungen": []}))
        try:
            await run_node(praegung.NODE, state, deps)
        except _Abgerissen:
            return "abgerissen"
        return "ganz"

    async def left(p, user, resonanz):
        async with p.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM lzg_knoten WHERE user_id=%s AND quelle='t1'", (user,))
            knoten = (await cur.fetchone())[0]
            cur = await conn.execute("SELECT s.art, count(*) FROM lzg_synapsen s JOIN lzg_knoten k ON k.id = s.von_id"
                                     " WHERE k.user_id=%s GROUP BY s.art ORDER BY s.art", (user,))
            synapsen = await cur.fetchall()
            cur = await conn.execute("SELECT bool_and(zuletzt > now() - interval '1 hour') FROM lzg_knoten WHERE id = ANY(%s)",
                                     (resonanz,))
            beruehrt = (await cur.fetchone())[0]
        return knoten, synapsen, beruehrt, (await beziehung.profile(p, user, "nova")).mensch_kern

    async def pair(p, name):
        user = new_pair(name)[0]
        resonanz = await lzg.add_nodes(p, user, "nova", [{"inhalt": "Bello", "embedding": unit(1)},
                                                         {"inhalt": "Hund", "embedding": unit(2)}])
        async with p.connection() as conn:  # anchors last activated long ago
            await conn.execute("UPDATE lzg_knoten SET zuletzt = now() - interval '30 days' WHERE id = ANY(%s)", (resonanz,))
        return user, resonanz

    async def go(p):
        user, resonanz = await pair(p, "cut-none")
        ganz = [await deliver(p, user, resonanz)], await left(p, user, resonanz)
        out = {}
        for nach in ("beziehung.profil_wachsen", "lzg.episode_schreiben"):
            user, resonanz = await pair(p, "cut")
            laeufe = [await deliver(p, user, resonanz, nach), await deliver(p, user, resonanz)]
            out[nach] = laeufe, await left(p, user, resonanz)
        return ganz, out

    ganz, abgerissen = asyncio.run(with_pool(pool, go))
    # one delivery: the exchange and two memories; each memory linked both ways to the two utterances
    # and to the two anchors, the utterances to each other; the anchors' curves restarted
    assert ganz == (["ganz"], (4, [("herkunft", 8), ("nachbar", 2), ("praegung", 8)], True,
                               "Person B sorgt sich um Bello."))
    for nach, (laeufe, hinterlassen) in abgerissen.items():
        assert laeufe == ["abgerissen", "ganz"], nach
        assert hinterlassen == ganz[1], nach
