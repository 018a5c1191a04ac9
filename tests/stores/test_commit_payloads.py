"""What a committed turn writes to Redis is typed by core/wire.py, key for key: its outbox jobs
(`OutboxJob`), its session entries (`SessionTurn`) and its stored result (`TurnResult`) — a real
turn over the scripted engine on the real stores, and a turn whose character chain failed (the
human's message kept on its own). Each payload validates, and written again from its model it is
the same JSON: no key is carried that the types do not declare. The human's message reaches the
turn's record as the session entry holds it (`mensch.inhalt`), and under `user_text` for the
workers of the release before the jobs' `v`."""
import asyncio
import json
import uuid

from redis.asyncio import Redis

from core.state import SessionTurn, Stimulus, TurnState
from core.wire import (JOB_VERSION, BackgroundJob, KeptTurn, TurnJob, TurnResult, job_json, read_job,
                       session_entry)
from memory import pg, session
from memory.outbox import OUTBOX_STREAM
from pipeline.chains import CHARACTER_CHAIN, HUMAN_CHAIN
from pipeline.nodes import dispatcher
from pipeline.runner import ChainRunner
from tests.conftest import unit, with_pool
from tests.scripted_engine import instance
from tests.scripted_llm import PoolStore, ScriptedLLM, deps_for

NACHRICHT = "Mein Hund Bello war heute beim Tierarzt."
KEPT = "Und morgen gehen wir in den Park."
SCRIPT = {
    "router": ['{"intent": "austausch", "management": "keins", "needs_memory": true, "momentum": "mid"}'],
    "responder": ["Oh, hoffentlich geht es Bello gut!"],
    "thinker": ["ERGEBNIS: OK"],
    "tribunal": ['{"urteil": "ok", "gruende": []}'],
}


class _LLM(ScriptedLLM):
    """The script; a structured node without one gets the smallest answer its schema allows."""

    async def chat(self, trace, node, messages, *, response_schema=None, **kw):
        if node not in self.script and response_schema:
            self.script[node] = [json.dumps(instance(response_schema))]
        return await super().chat(trace, node, messages, response_schema=response_schema, **kw)


class _Embedder:
    async def embed(self, trace, text):
        return unit(sum(map(ord, text)) % 50).tolist()


async def _jobs_of(r, user: str) -> list[dict]:
    out = []
    for _id, fields in await r.xrange(OUTBOX_STREAM):
        job = json.loads(fields[b"job"])
        if user in json.dumps(job):
            out.append(job)
    return out


async def _turns(p, r, user: str):
    llm = _LLM({k: list(v) for k, v in SCRIPT.items()})
    deps = deps_for(llm, store=PoolStore(p), redis=r, embedder=_Embedder(), turn=(user, "nova", "t1"))
    state = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id="t1", user_prompt=NACHRICHT))
    await ChainRunner(HUMAN_CHAIN, name="human").run(state, deps)
    await ChainRunner(CHARACTER_CHAIN, name="character").run(state, deps)
    # the second turn's character chain fails: its human part is committed on its own
    deps2 = deps_for(llm, store=PoolStore(p), redis=r, embedder=_Embedder(), turn=(user, "nova", "t2"))
    kept = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id="t2", user_prompt=KEPT))
    await ChainRunner(HUMAN_CHAIN, name="human").run(kept, deps2)
    assert await dispatcher.keep_human(kept, deps2, "responder")
    return state


def test_a_committed_turn_writes_only_typed_payloads(stores, pool):
    user = f"typed-{uuid.uuid4().hex[:8]}"

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            state = await _turns(p, r, user)
            return (state, await _jobs_of(r, user), await session.load_turns(r, user, "nova", 50),
                    await r.get(session.result_key(user, "nova", "t1")))
        finally:
            await r.aclose()

    state, jobs, entries, stored = asyncio.run(with_pool(pool, go))
    typed = [read_job(j) for j in jobs]
    assert [(type(j).__name__, getattr(j, "teil", None)) for j in typed] == [
        ("TurnJob", None), ("BackgroundJob", "ganz"), ("TurnJob", None), ("BackgroundJob", "mensch")]
    for raw, job in zip(jobs, typed):
        assert job.v == JOB_VERSION
        assert json.loads(job_json(job)) == raw  # every key declared: the model writes the same JSON
    whole, _, human, _ = typed
    assert isinstance(whole.turn.result, TurnResult) and isinstance(human.turn.result, KeptTurn)
    # the message: the session entry's words, in the record and (for the release before) as user_text
    assert (whole.turn.mensch.inhalt, human.turn.mensch.inhalt) == (NACHRICHT, KEPT)
    assert [j["turn"]["user_text"] for j in (jobs[0], jobs[2])] == [NACHRICHT, KEPT]
    assert whole.turn.result.reply == state.dispatch.result.reply == whole.turn.reply
    assert isinstance(typed[1], BackgroundJob) and typed[1].state.stimulus == state.stimulus

    # the session entries: both of the whole turn, the kept message of the second
    assert [(e["turn_id"], e["rolle"]) for e in entries] == [("t1", "user"), ("t1", "assistant"), ("t2", "user")]
    for e in entries:
        assert session_entry(SessionTurn.model_validate(e)) == e
    assert entries[0] == json.loads(job_json(whole))["turn"]["mensch"]  # the record carries the entry as stored
    assert entries[2]["inhalt"] == KEPT

    # the stored result: the turn's result, every key declared
    result = TurnResult.model_validate_json(stored)
    assert not result.model_extra and result.body() == json.loads(stored)
    assert result.body() == state.dispatch.result.body()


def test_the_typed_job_writes_the_turn_s_record(stores, pool):
    """The record in Postgres holds the message as the job's session entry carries it."""
    user = f"typed-pg-{uuid.uuid4().hex[:8]}"

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            await _turns(p, r, user)
            for raw in await _jobs_of(r, user):
                job = read_job(raw)
                if isinstance(job, TurnJob):
                    await pg.write_turn_job(p, job)
            return [await pg.turn_record(p, user, "nova", t) for t in ("t1", "t2")]
        finally:
            await r.aclose()

    whole, kept = asyncio.run(with_pool(pool, go))
    assert (whole["user_text"], kept["user_text"]) == (NACHRICHT, KEPT)
    assert whole["reply"] == SCRIPT["responder"][0] and kept["reply"] == ""
    assert kept["result"]["fehler_knoten"] == "responder" and kept["result"]["reply"] is None
