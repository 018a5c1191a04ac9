"""Seed 001 §4: the goals' vectors travel in the turn state (`ziel_vektoren`) and their reader,
the curiosity boost of a knowledge gap, decides where the gap stands in the pixie's queue."""
import asyncio

from core.beziehung import PaarZiel
from memory.clients import StoreOps
from pipeline.nodes import enricher, salience
from pipeline.runner import run_node
from core.state import AktiviertesZiel, DelegationSchreiben, MemoryRecord, PairRecord, Stimulus, TurnState
from pipeline.wissensluecken import NEUGIER_VORRANG, neugier_boosts
from tests.scripted_llm import ScriptedLLM, deps_for

MARATHON = [1.0, 0.0, 0.0]
GARTEN = [0.0, 1.0, 0.0]


class _Embedder:
    def __init__(self, vectors):
        self.vectors, self.asked = vectors, []

    async def embed(self, trace, text):
        self.asked.append(text)
        return self.vectors[text]

    def prefetch(self, trace, text):
        pass


class _Ziele(StoreOps):
    """The pair's goals as the store returns them; reinforcements are recorded."""

    def __init__(self, goals):
        super().__init__(self._run)
        self.goals, self.ops = goals, []

    async def _run(self, op, args, kwargs):
        self.ops.append(op)
        if op == "ziele.load_goals":
            return self.goals
        if op == "ziele.verstaerken":
            return [g.id for g in args[0] if g.horizont == "mittel"]
        raise AssertionError(f"unexpected store call {op}")


def _goal(id_, inhalt, vec, motivation=0.9):
    return PaarZiel(id=id_, inhalt=inhalt, horizont="mittel", motivation=motivation, motivation_basis=motivation,
                    behalten=1.0, embedding=vec, anker="2026-01-01T00:00:00+00:00",
                    verstaerkt_am="2026-01-01T00:00:00+00:00")


def _stimulus(text):
    return Stimulus(user_id="u", character_id="nova", turn_id="t1", user_prompt=text)


def test_the_enricher_puts_the_activated_goals_vectors_into_the_state():
    text = "Ich trainiere fuer den Marathon"
    store = _Ziele([_goal(1, "Marathon laufen", MARATHON), _goal(2, "Garten anlegen", GARTEN)])
    deps = deps_for(ScriptedLLM(), store=store, embedder=_Embedder({text: [0.9, 0.1, 0.0]}))
    deps.trace.chain = "human"

    async def go():
        async def leer():
            return []
        deps.trace.start_once(enricher.SESSION, leer)
        state = TurnState(stimulus=_stimulus(text))
        await run_node(enricher.NODE, state, deps)
        return state

    m = asyncio.run(go()).memory
    # only the activated goal travels, with its vector; the list itself stays without vectors
    assert [z.id for z in m.aktivierte_ziele] == [1]
    assert m.ziel_vektoren == {1: MARATHON}
    assert "embedding" not in m.aktivierte_ziele[0].model_dump()
    # the state survives the background job's JSON (int keys come back as ints)
    assert MemoryRecord.model_validate_json(m.model_dump_json()).ziel_vektoren == {1: MARATHON}


def test_the_boost_is_the_strongest_goal_pull_on_each_candidate():
    aktivierte = [AktiviertesZiel(id=1, inhalt="Marathon", horizont="mittel", motivation=0.9, aktivierungs_staerke=0.6),
                  AktiviertesZiel(id=2, inhalt="Garten", horizont="kurz", motivation=0.5, aktivierungs_staerke=0.4)]
    boosts = neugier_boosts({"lauf": [0.8, 0.6, 0.0], "garten": GARTEN, "fremd": [0.0, 0.0, 1.0],
                             "gegen": [-1.0, 0.0, 0.0]},
                            {1: MARATHON, 2: GARTEN}, aktivierte)
    assert boosts["lauf"] == {"boost": 0.48, "ziel": 1}      # 0.8 × 0.6 beats 0.6 × 0.4
    assert boosts["garten"] == {"boost": 0.4, "ziel": 2}
    assert boosts["fremd"] == {"boost": 0.0, "ziel": None}   # orthogonal to every goal
    assert boosts["gegen"] == {"boost": 0.0, "ziel": None}   # pointing away pulls nothing
    # a goal without a vector in the state pulls nothing
    assert neugier_boosts({"lauf": MARATHON}, {}, aktivierte) == {"lauf": {"boost": 0.0, "ziel": None}}


def _salience(aufgabe, memory, vectors):
    llm = ScriptedLLM({"salience": [f'{{"kern": "k", "wichtigkeit": 0.1, "delegation": "{aufgabe}"}}']})
    emb = _Embedder(vectors)
    deps = deps_for(llm, embedder=emb)
    state = TurnState(stimulus=_stimulus("Ich will naechstes Jahr einen Marathon laufen"),
                      pair=PairRecord(character_name="Nova"), memory=memory)
    out = asyncio.run(run_node(salience.NODE, state, deps))["hintergrund"]
    d = {r.entscheidung: r for r in deps.trace.decisions()}
    [deleg] = [w for w in out.pending_writes if isinstance(w, DelegationSchreiben)]
    return deleg, d["salience.neugier"], emb


def test_salience_gives_the_named_gap_its_curiosity_from_the_state_s_goal_vectors():
    ziele = [AktiviertesZiel(id=1, inhalt="Marathon", horizont="mittel", motivation=0.9, aktivierungs_staerke=0.6)]
    memory = MemoryRecord(aktivierte_ziele=ziele, ziel_vektoren={1: MARATHON})
    nah, d_nah, _ = _salience("Trainingsplaene fuer Marathons", memory, {"Trainingsplaene fuer Marathons": MARATHON})
    assert nah.neugier == 0.6 >= NEUGIER_VORRANG and d_nah.outcome == "vorrang"
    assert d_nah.inputs["ziel"] == 1 and d_nah.threshold == NEUGIER_VORRANG
    fern, d_fern, _ = _salience("Rosensorten", memory, {"Rosensorten": GARTEN})
    assert fern.neugier == 0.0 and d_fern.outcome == "hinten_an"
    # without goal vectors in the state: no embedding, no boost, named
    ohne, d_ohne, emb = _salience("Rosensorten", MemoryRecord(), {})
    assert ohne.neugier == 0.0 and d_ohne.outcome == "keine_ziele" and emb.asked == []


class _Redis:
    """Just the queueing script of actors/background.delegieren, executed on a list."""

    def __init__(self):
        self.lists, self.marks = {}, set()

    async def eval(self, script, nkeys, queue, mark, *rest):
        assert "redis.call(ARGV[3]" in script
        task, ttl, command = rest[-3:]  # (the erasure mark's key before them, read by the script)
        if mark in self.marks:
            return 0
        self.marks.add(mark)
        q = self.lists.setdefault(queue, [])
        q.insert(0, task) if command == "LPUSH" else q.append(task)
        return 1


def test_a_gap_the_goals_pull_on_goes_to_the_front_of_the_pixie_s_queue():
    from actors import background
    from pipeline.trace import TurnTrace

    class _Services:
        redis = _Redis()

    s = _stimulus("x")
    for turn, neugier in (("t1", 0.0), ("t2", 0.1), ("t3", NEUGIER_VORRANG)):
        asyncio.run(background.schreiben(_Services, TurnTrace("u", "nova", turn),
                                         s.model_copy(update={"turn_id": turn}),
                                         [DelegationSchreiben(aufgabe=f"aufgabe {turn}", neugier=neugier)]))
    queue = _Services.redis.lists["delegationen:u:nova"]
    assert [q.split('"turn_id":"')[1][:2] for q in queue] == ["t3", "t1", "t2"]
