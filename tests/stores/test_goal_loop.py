"""The goals loop (issue #10): a goal the human states is formed in the background chain, pulls the
search key of a later related turn (seed 001 §3.3a), is reinforced when stated again, is written
once per turn however often the job is delivered, and fades until it is forgotten."""
import asyncio
import json

import psycopg

from core.settings import Settings
from memory import kzg, ziele
from pipeline.nodes import enricher
from pipeline.chains import NODES
from pipeline.runner import ChainRunner
from pipeline.services import Deps, Services
from core.state import PairRecord, Stimulus, TurnState
from pipeline.trace import TurnTrace
from prompts import PromptLibrary
from tests.conftest import embed_with, new_pair, with_pool
from tests.scripted_llm import PoolStore, ScriptedLLM
from pipeline.runner import run_node

MARATHON = "Ich will nächstes Jahr einen Marathon laufen"
LAUFEN = "Heute war ich wieder laufen"


def _ziel(ziel, horizont="mittel", motivation=0.9, genannt=True):
    return json.dumps({"ziel_genannt": genannt, "ziel": ziel, "horizont": horizont, "motivation": motivation})


class _Embedder:
    """The real MiniLM, in-process."""

    def __init__(self, model):
        self.encode = embed_with(model)

    async def embed(self, trace, text):
        return self.encode([text])[0]


class _World:
    """A pool, Redis and the real embedder: runs turns of one pair through nodes."""

    def __init__(self, p, r, embedder):
        self.p, self.r, self.embedder = p, r, embedder

    def deps(self, user, turn_id, llm, chain):
        services = Services(settings=Settings(), llm=llm, embedder=self.embedder, store=PoolStore(self.p),
                            redis=self.r, prompts=PromptLibrary())
        trace = TurnTrace(user, "nova", turn_id)
        trace.chain = chain
        return Deps(services, trace)

    async def background(self, user, turn_id, text, answers, herkunft="user"):
        """One delivery of the turn's background job, through the runner with the node's contract."""
        llm = ScriptedLLM({"zielbildung": list(answers)})
        stim = (dict(user_prompt=text) if herkunft == "user" else dict(eigener_gedanke=text, herkunft=herkunft))
        state = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id=turn_id, **stim),
                          pair=PairRecord(character_name="Nova"))
        deps = self.deps(user, turn_id, llm, "background")
        await ChainRunner((NODES["zielbildung"],), name="background").run(state, deps)
        return state, deps, llm

    async def enrich(self, user, turn_id, text):
        state = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id=turn_id, user_prompt=text))
        deps = self.deps(user, turn_id, ScriptedLLM(), "character")
        return (await run_node(enricher.NODE, state, deps))["memory"], deps


def _on_world(stores, pool, minilm, fn):
    from redis.asyncio import Redis

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            return await fn(_World(p, r, _Embedder(minilm)))
        finally:
            await r.aclose()

    return asyncio.run(with_pool(pool, go))


def _decisions(deps, name="zielbildung.ziel"):
    return [r for r in deps.trace.decisions(name)]


def test_a_stated_goal_is_formed_and_pulls_the_search_key_of_a_later_related_turn(stores, pool, minilm):
    async def go(w):
        user, other = new_pair("ziel-a")[0], new_pair("ziel-b")[0]
        for u in (user, other):  # both pairs have the same short-term memory: only the goal differs
            await kzg.add_entry(w.r, u, "nova", "Ich mag Pizza", await w.embedder.embed(None, "Ich mag Pizza"))
        state, deps, _ = await w.background(user, "t1", MARATHON, [_ziel("Nächstes Jahr einen Marathon laufen")])
        goals = await ziele.load_goals(w.p, "nova", user)
        mit, mit_deps = await w.enrich(user, "t2", LAUFEN)
        ohne, ohne_deps = await w.enrich(other, "t2", LAUFEN)
        return state, deps, goals, (mit, mit_deps), (ohne, ohne_deps)

    state, deps, goals, (mit, mit_deps), (ohne, ohne_deps) = _on_world(stores, pool, minilm, go)
    assert [g.inhalt for g in goals] == ["Nächstes Jahr einen Marathon laufen"]
    goal = goals[0]
    [entry] = _decisions(deps)
    assert entry.outcome == "gebildet" and entry.inputs["id"] == goal.id
    # the later related turn activates the goal and shifts the search key towards it
    assert [g.id for g in mit.aktivierte_ziele] == [goal.id] and mit.zielsog_roh > 0 and not ohne.aktivierte_ziele
    [shift_mit], [shift_ohne] = _decisions(mit_deps, "enricher.verschiebung"), _decisions(ohne_deps, "enricher.verschiebung")
    assert shift_mit.outcome == "verschoben" and shift_ohne.outcome == "keine_ziele"
    assert 0 < shift_mit.inputs["cosinus"] < 1  # the search key left the raw question, towards the goal
    [rw_mit], [rw_ohne] = _decisions(mit_deps, "enricher.rewrite"), _decisions(ohne_deps, "enricher.rewrite")
    assert rw_mit.inputs["suchtext"] == rw_ohne.inputs["suchtext"] == LAUFEN
    [z_mit], [z_ohne] = _decisions(mit_deps, "enricher.ziele"), _decisions(ohne_deps, "enricher.ziele")
    assert z_mit.inputs["gravitationsterm"] > z_ohne.inputs["gravitationsterm"] == 0
    # seed 001: the entry counts the goals per horizon, computed and above the threshold
    assert z_mit.inputs["aktivierte_ziele_count"] == 1
    assert z_mit.inputs["ueber_schwelle_je_horizont"] == {goal.horizont: 1}
    assert z_mit.inputs["aktiviert_je_horizont"][goal.horizont] >= 1
    assert z_ohne.inputs["aktivierte_ziele_count"] == 0 and z_ohne.inputs["ueber_schwelle_je_horizont"] == {}


def test_a_redelivered_job_forms_and_reinforces_nothing_twice(stores, pool, minilm):
    async def go(w):
        user = new_pair("ziel-c")[0]
        answer = _ziel("Nächstes Jahr einen Marathon laufen")
        _, first, llm1 = await w.background(user, "t1", MARATHON, [answer])
        _, again, llm2 = await w.background(user, "t1", MARATHON, [answer])
        repeat = _ziel("Nächstes Jahr Marathon laufen")
        _, rep, _ = await w.background(user, "t3", "Den Marathon nächstes Jahr will ich wirklich laufen", [repeat])
        after_rep = await ziele.load_goals(w.p, "nova", user)
        _, rep_again, llm3 = await w.background(user, "t3", "Den Marathon nächstes Jahr will ich wirklich laufen",
                                                [repeat])
        after_again = await ziele.load_goals(w.p, "nova", user)
        # two deliveries racing past the check: the turn's key still admits one goal
        race = [await ziele.bilden(w.p, "nova", user, "Spanisch lernen", "lang", 0.5, None, quelle_turn="t9")
                for _ in range(2)]
        return first, again, llm2, rep, rep_again, llm3, after_rep, after_again, race

    first, again, llm2, rep, rep_again, llm3, after_rep, after_again, race = _on_world(stores, pool, minilm, go)
    assert [d.outcome for d in _decisions(first)] == ["gebildet"]
    assert [d.outcome for d in _decisions(again)] == ["schon_erledigt"] and llm2.calls == []
    assert _decisions(again)[0].inputs == {"id": _decisions(first)[0].inputs["id"], "war": "gebildet"}
    assert [d.outcome for d in _decisions(rep)] == ["verstaerkt"]
    assert [d.outcome for d in _decisions(rep_again)] == ["schon_erledigt"] and llm3.calls == []
    assert _decisions(rep_again)[0].inputs["war"] == "verstaerkt"
    stable = {"id", "inhalt", "motivation_basis", "anker", "verstaerkt_am"}
    assert len(after_rep) == 1  # the second delivery touched nothing
    assert [g.model_dump(include=stable) for g in after_again] == [g.model_dump(include=stable) for g in after_rep]
    assert race[0].neu and not race[1].neu and race[0].id == race[1].id


def test_a_repeated_goal_is_reinforced_and_another_goal_formed_beside_it(stores, pool, minilm):
    async def go(w):
        user = new_pair("ziel-d")[0]
        await w.background(user, "t1", MARATHON, [_ziel("Nächstes Jahr einen Marathon laufen", motivation=0.6)])
        before = await ziele.load_goals(w.p, "nova", user)
        await asyncio.sleep(0.05)
        _, rep, _ = await w.background(user, "t2", "Der Marathon naechstes Jahr ist mir wirklich wichtig",
                                       [_ziel("Nächstes Jahr Marathon laufen", motivation=0.9)])
        after = await ziele.load_goals(w.p, "nova", user)
        _, other, _ = await w.background(user, "t3", "Ich will Spanisch lernen", [_ziel("Spanisch lernen", "lang")])
        return before, rep, after, other, await ziele.load_goals(w.p, "nova", user)

    before, rep, after, other, last = _on_world(stores, pool, minilm, go)
    [d] = _decisions(rep)
    assert d.outcome == "verstaerkt" and d.inputs["id"] == before[0].id
    assert d.inputs["aehnlichkeit"] >= d.threshold
    assert len(after) == 1 and after[0].id == before[0].id
    assert after[0].verstaerkt_am > before[0].verstaerkt_am and after[0].anker == before[0].anker
    assert after[0].motivation_basis > before[0].motivation_basis  # the stronger statement counts
    [o] = _decisions(other)
    assert o.outcome == "gebildet" and o.inputs["aehnlichkeit"] < o.threshold
    assert [g.inhalt for g in last] == ["Nächstes Jahr einen Marathon laufen", "Spanisch lernen"]
    assert [g.horizont for g in last] == ["mittel", "lang"]


def test_no_goal_named_and_an_own_thought_form_nothing(stores, pool, minilm):
    async def go(w):
        user = new_pair("ziel-e")[0]
        _, none, _ = await w.background(user, "t1", "Ich habe heute Pizza gegessen", [_ziel("", genannt=False)])
        _, broken, _ = await w.background(user, "t2", "Ich will reisen", ["keine Ahnung"])
        _, own, llm = await w.background(user, "t3", "Ob sie den Marathon wirklich laufen will?", [],
                                         herkunft="eigener_impuls")
        return none, broken, own, llm, await ziele.load_goals(w.p, "nova", user)

    none, broken, own, llm, goals = _on_world(stores, pool, minilm, go)
    assert [d.outcome for d in _decisions(none)] == ["kein_ziel"]
    assert [d.outcome for d in _decisions(broken)] == ["kein_ziel_kein_json"]
    assert [d.outcome for d in _decisions(own)] == ["kein_nutzerreiz"] and llm.calls == []
    assert goals == []


def test_goals_fade_without_reinforcement_and_are_forgotten_on_their_read(pool):
    def age(database_url, goal_id, days):
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE ziele SET verstaerkt_am = now() - %s * interval '1 day' WHERE id = %s",
                         (days, goal_id))

    async def go(p):
        user, ch = new_pair("ziel-f")
        mid = await ziele.add_goal(p, ch, user, "Marathon laufen", "mittel", 0.8, [1.0] + [0.0] * 383)
        old = await ziele.add_goal(p, ch, user, "Umzug planen", "mittel", 0.8, [0.0, 1.0] + [0.0] * 382)
        long_ = await ziele.add_goal(p, ch, user, "Haus bauen", "lang", 0.8, [0.0, 0.0, 1.0] + [0.0] * 381)
        fresh = {g.id: g for g in await ziele.load_goals(p, ch, user)}
        age(pool, mid, ziele.HALBWERTSZEIT_TAGE["mittel"])
        for g in (old, long_):
            age(pool, g, 200)
        aged = {g.id: g for g in await ziele.load_goals(p, ch, user)}
        activated = ziele.aktivieren(list(aged.values()), [1.0] + [0.0] * 383, 0.1).aktivierte
        await ziele.verstaerken(p, activated)  # an activated medium-term goal restarts its curve
        renewed = {g.id: g for g in await ziele.load_goals(p, ch, user)}
        return mid, old, long_, fresh, aged, renewed

    mid, old, long_, fresh, aged, renewed = asyncio.run(with_pool(pool, go))
    assert all(abs(g.motivation - g.motivation_basis) < 1e-4 for g in fresh.values())
    assert set(aged) == {mid, long_}  # the old medium-term goal was forgotten; the long one fades slower
    assert abs(aged[mid].motivation - aged[mid].motivation_basis / 2) < 1e-3
    assert aged[mid].motivation_basis / 2 < aged[long_].motivation < aged[long_].motivation_basis
    assert renewed[mid].motivation > aged[mid].motivation and renewed[mid].anker == aged[mid].anker
    assert set(renewed) == {mid, long_}
    with psycopg.connect(pool) as conn:  # forgotten, not deleted
        assert conn.execute("SELECT aktiv FROM ziele WHERE id = %s", (old,)).fetchone() == (False,)
