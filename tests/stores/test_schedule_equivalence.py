"""Scheduling by data gives exactly the turn the written order gives: the human and character
chains run twice over the scripted engine on the real stores — once with each schedule, each on
its own pair — and the turn state, the pipeline log and the stored rows are the same; with the
data schedule, nodes the graph puts side by side did overlap."""
import asyncio
import json
import time
import uuid

from redis.asyncio import Redis

from memory import notizen
from pipeline.chains import CHARACTER_CHAIN, HUMAN_CHAIN
from pipeline.runner import ChainRunner
from core.state import Stimulus, TurnState
from tests.conftest import unit, with_pool
from tests.scripted_engine import instance
from tests.scripted_llm import PoolStore, ScriptedLLM, deps_for

TEXTE = ("Notiz Einkauf: Milch, Brot und Kaese. Am 28.11. bin ich nach Leipzig gezogen.",
         "Weisst du noch, wohin ich gezogen bin?")
SCRIPT = {
    "router": ['{"intent": "auftrag", "management": "notizen", "needs_memory": true, "momentum": "mid"}'],
    "planner": ['{"auftraege": [{"agent": "notizen", "aktion": "anlegen", '
                '"parameter": {"name": "Einkauf", "inhalt": "Milch, Brot und Kaese"}}]}', '{"auftraege": []}'],
    "erinnerungsanker": ['{"datiert": true, "datum": "2026-11-28", "titel": "Umzug nach Leipzig"}'],
    "responder": ["Notiert: Milch, Brot und Kaese. Und Leipzig klingt nach einem grossen Schritt."],
    "thinker": ["ERGEBNIS: OK"],
    "tribunal": ['{"urteil": "ok", "gruende": []}'],
}
VOLATILE = {"at", "time", "created_at", "updated_at", "received_at", "stand", "duration_ms", "start_ms", "end_ms", "timings", "seq",
            "ms", "llm_ms", "embed_ms"}


class VerzoegertesLLM(ScriptedLLM):
    """Answers from the script (a structured node without one gets the smallest answer its schema
    allows) after a delay that differs per node, so that nodes side by side finish out of order."""

    def __init__(self):
        super().__init__({k: list(v) for k, v in SCRIPT.items()})
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls_at: list[tuple[str, float, float]] = []

    async def chat(self, trace, node, messages, *, response_schema=None, **kw):
        if node not in self.script and response_schema:
            self.script[node] = [json.dumps(instance(response_schema))]
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        t0 = time.perf_counter()
        try:
            await asyncio.sleep(0.002 * (sum(map(ord, node)) % 7))
            return await super().chat(trace, node, messages, response_schema=response_schema, **kw)
        finally:
            self.in_flight -= 1
            self.calls_at.append((node, t0, time.perf_counter()))


class _Embedder:
    async def embed(self, trace, text):
        return unit(sum(map(ord, text)) % 50).tolist()


def _normal(value, user):
    """A comparable form: the pair's user id neutral, times and database ids left out."""
    if isinstance(value, dict):
        return {k: _normal(v, user) for k, v in sorted(value.items())
                if k not in VOLATILE and not (k == "id" or k.endswith("_id") and isinstance(v, int))}
    if isinstance(value, list):
        return [_normal(v, user) for v in value]
    if isinstance(value, str):
        return value.replace(user, "USER")
    return value


async def _turns(p, r, schedule: str):
    user = f"sched-{schedule}-{uuid.uuid4().hex[:6]}"
    human = ChainRunner(HUMAN_CHAIN, name="human", schedule=schedule)
    character = ChainRunner(CHARACTER_CHAIN, name="character", schedule=schedule)
    states, logs, llm = [], [], VerzoegertesLLM()
    for i, text in enumerate(TEXTE):
        deps = deps_for(llm, store=PoolStore(p), redis=r, embedder=_Embedder(), turn=(user, "nova", f"t{i}"))
        state = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id=f"t{i}", user_prompt=text))
        await human.run(state, deps)
        await character.run(state, deps)
        states.append(_normal(state.model_dump(mode="json", exclude={"stimulus"}), user))
        logs.append(sorted(json.dumps(_normal(row.model_dump(), user), sort_keys=True) for row in deps.trace.rows))
        spans = [(row.node, row.inputs["start_ms"], row.inputs["end_ms"]) for row in deps.trace.node_runs() if row.inputs]
    async with p.connection() as conn:
        cur = await conn.execute("SELECT typ, titel, turn_id FROM timeline WHERE user_id=%s ORDER BY id", (user,))
        termine = [list(row) for row in await cur.fetchall()]
    stored = (_normal([n.model_dump() for n in await notizen.find_by_keyword(p, user, "Einkauf")], user), termine)
    return states, logs, stored, spans, llm


def test_the_data_schedule_gives_the_turn_the_written_order_gives(stores, pool):
    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            return await _turns(p, r, "written"), await _turns(p, r, "data")
        finally:
            await r.aclose()

    (s_states, s_logs, s_stored, s_spans, s_llm), (d_states, d_logs, d_stored, d_spans, d_llm) = \
        asyncio.run(with_pool(pool, go))
    s_flight, d_flight = s_llm.most_in_flight, d_llm.most_in_flight
    assert s_states[0]["plan"]["agent_results"][0]["status"] == "abgeschlossen"  # the turn did real work
    assert s_stored[0] and s_stored[1]  # the note and the anchor are stored
    assert d_states == s_states
    assert d_logs == s_logs
    assert d_stored == s_stored
    # in the written order no two LLM calls were ever in flight; by data some were, and nodes overlapped
    assert s_flight == 1 and d_flight >= 2
    span = {n: (a, b) for n, a, b in d_spans}
    assert span["sachlage"][0] < span["db_zugriff"][1]  # sachlage reads only the stimulus: it starts at once
    assert span["gv_node"][0] < span["planner"][1] and span["haltungsraum"][0] < span["planner"][1]
    serial = sorted((a, b) for _, a, b in s_spans)
    assert all(end <= nxt + 0.01 for (_, end), (nxt, _) in zip(serial, serial[1:]))  # rounded to 0.01 ms
    # early starts, by data only, once a turn: her reply is perceived beside the tribunal's judgement,
    # the router classifies beside the erinnerungsanker (whose timeline it reads only afterwards)
    for early, other in (("perzeption_assistant", "tribunal"), ("router", "erinnerungsanker")):
        for llm, beside in ((d_llm, True), (s_llm, False)):
            calls = {n: [(a, b) for m, a, b in llm.calls_at if m == n] for n in (early, other)}
            assert len(calls[early]) == len(TEXTE) == len(calls[other]), (early, calls)
            assert all((e[0] < o[1]) == beside for e, o in zip(calls[early], calls[other])), (early, beside)
