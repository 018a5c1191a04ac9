"""A rolling deploy: workers of two releases read one outbox (core/wire.py `TurnJob`'s versioning).
A job the release before wrote (plain dicts, no `v`, the message as `user_text`) is done by this
release's worker; a key a newer release adds is ignored, not refused; a job of a newer version
than the worker knows waits, pending and uncounted, for a worker that knows it; and the jobs this
release writes carry what the release before reads."""
import asyncio
import json
import uuid
from datetime import datetime, timezone

from redis.asyncio import Redis

from actors.worker import BackgroundWorker
from core.settings import Settings
from core.state import TurnState
from core.wire import JOB_VERSION, BackgroundJob, SelfTriggerJob, TurnJob, job_json, read_job
from memory import outbox, pg
from memory.outbox import GROUP, OutboxConsumer
from tests.commit_jobs import result_dict, turn_job
from tests.conftest import with_pool

MAX_STEPS = 3
"""The consumer's rounds in which a too new job is met."""


def _worker() -> BackgroundWorker:
    """A worker's job handling without its consumer thread."""
    w = BackgroundWorker.__new__(BackgroundWorker)
    w.index, w.settings, w._services = 9, Settings(), None
    return w


def _v1_turn_job(user: str, turn_id: str, text: str) -> dict:
    """A turn's job exactly as the release before `v` wrote it."""
    now = datetime.now(timezone.utc).isoformat()
    return {"kind": "turn", "turn": {
        "user_id": user, "character_id": "nova", "turn_id": turn_id, "user_text": text, "reply": "Schoen!",
        "user_embedding": None, "result": result_dict(user, "nova", turn_id, "Schoen!", created_at=now),
        "created_at": now, "nova_zustand": None},
        "log": [{"seq": 0, "node": "responder", "art": "switch", "entscheidung": "responder.ergebnis",
                 "outcome": "antwort", "inputs": {}, "at": now}]}


def test_a_job_of_the_release_before_and_one_with_a_key_unknown_here_are_done(stores, pool):
    user = f"v1-{uuid.uuid4().hex[:8]}"
    alt = _v1_turn_job(user, "t-alt", "Ich war am See.")
    neuer = _v1_turn_job(user, "t-neu", "Und heute?")
    neuer.update(v=JOB_VERSION, spaeter="a key of a later release")
    neuer["turn"]["auch_spaeter"] = 1

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            w = _worker()
            for job in (alt, neuer):
                await w.handle(r, p, json.loads(json.dumps(job)))
            return [await pg.turn_record(p, user, "nova", t) for t in ("t-alt", "t-neu")]
        finally:
            await r.aclose()

    first, second = asyncio.run(with_pool(pool, go))
    assert (first["user_text"], first["reply"]) == ("Ich war am See.", "Schoen!")
    assert second["user_text"] == "Und heute?"
    assert read_job(alt).v == 1 and read_job(neuer).v == JOB_VERSION


def test_old_background_and_self_trigger_jobs_read():
    """The background job without `teil` (the whole turn's) and the self-trigger as the release
    before queued them."""
    stimulus = {"user_id": "u", "character_id": "nova", "turn_id": "t1", "user_prompt": "Hallo",
                "received_at": "2026-12-01T10:00:00+00:00"}
    bg = read_job({"kind": "hintergrund", "turn_id": "t1", "state": {"stimulus": stimulus,
                                                                     "draft": {"reply": "Hi", "model": "m"}}})
    assert isinstance(bg, BackgroundJob) and (bg.v, bg.teil) == (1, "ganz") and bg.state.draft.reply == "Hi"
    anstoss = read_job({"kind": "selbst_anstoss", "turn": {"user_id": "u", "character_id": "nova", "turn_id": "t1"},
                        "anstoss": {"reiz_herkunft": "user", "turn_id": "t1", "thinker_unsicher_retry": True,
                                    "user_prompt": "Hallo"}})
    assert isinstance(anstoss, SelfTriggerJob) and anstoss.anstoss.user_prompt == "Hallo"


def test_the_release_before_reads_this_release_s_jobs():
    """What the release before reads of a job, by key, is in this release's jobs: the turn's
    `user_text` beside its session entry, the background's `teil`, its state as a TurnState."""
    job = json.loads(job_json(turn_job("u", "nova", "t1", "Hallo Nova", "Hallo!")))
    t = job["turn"]
    assert job["kind"] == "turn" and job["v"] == JOB_VERSION
    assert (t["user_text"], t["reply"], t["result"]["reply"]) == ("Hallo Nova", "Hallo!", "Hallo!")
    assert t["created_at"] and "user_embedding" in t and job["log"] == []
    bg = BackgroundJob(turn_id="t1", state=read_job({"kind": "hintergrund", "turn_id": "t1", "state": {"stimulus": {
        "user_id": "u", "character_id": "nova", "turn_id": "t1", "user_prompt": "Hallo"}}}).state)
    alt = json.loads(job_json(bg))
    assert alt.get("teil", "ganz") == "ganz" and TurnState.model_validate(alt["state"]).stimulus.user_prompt == "Hallo"
    assert isinstance(read_job(job), TurnJob)


def test_a_job_of_a_newer_version_waits_uncounted(stores, pool):
    user = f"v9-{uuid.uuid4().hex[:8]}"
    job = {**_v1_turn_job(user, "t-spaet", "Aus der Zukunft."), "v": JOB_VERSION + 1}

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        stream, dead = f"test:outbox:{uuid.uuid4().hex[:8]}", f"test:dead:{uuid.uuid4().hex[:8]}"
        try:
            await outbox.ensure_group(r, stream)
            entry = await outbox.enqueue(r, job, stream)
            w = _worker()
            consumer = OutboxConsumer(r, "w-alt", lambda j: w.handle(r, p, j), claim_idle_ms=60_000, block_ms=50,
                                      stream=stream, dead_stream=dead)
            done = [await consumer.step() for _ in range(MAX_STEPS)]
            return (done, (await r.xpending(stream, GROUP))["pending"], await r.hget(outbox.FAILURES, entry),
                    await r.xlen(dead), await pg.turn_record(p, user, "nova", "t-spaet"), consumer.pause_s)
        finally:
            await r.aclose()

    done, pending, failures, dead, record, pause = asyncio.run(with_pool(pool, go))
    assert done == [0] * MAX_STEPS and pending == 1  # not done, not acknowledged: it waits for a newer worker
    assert failures is None and dead == 0 and record is None  # not counted, not dead-lettered, nothing written
    assert pause == 0.0  # the jobs behind it go on

