"""Erasure is final (memory/erasure.py): once a user is marked erased, every write for them is
refused where it commits — a turn's record and log, a long-term episode, a profile, a library
entry, a short-term entry, a delegation — and nothing of theirs is written; the outbox worker
acknowledges such a job instead of retrying it; a write transaction begun before the mark holds
the mark back until it commits (the erasure's deletes, which follow the mark, take what it
wrote); a new key for the user lifts the mark; the erasure waits for the jobs a worker holds."""
import asyncio
import json
import time
import uuid
from datetime import datetime, timezone

import pytest

from actors import pixie
from actors.background import delegieren
from actors.delegation import DELEGATIONS
from actors.worker import BackgroundWorker
from core.settings import Settings
from core.wire import Episode, Verdichtung
from memory import beziehung, bibliothek, erasure, kzg, lzg, notizen, outbox, pg, timeline, ziele
from tests.conftest import unit, with_pool
from core.wire import read_job
from tests.commit_jobs import result_dict


def _turn_job(user: str, ch: str) -> dict:
    now, t = datetime.now(timezone.utc).isoformat(), uuid.uuid4().hex
    return {"kind": "turn", "turn": {
        "user_id": user, "character_id": ch, "turn_id": t, "user_text": "Ich heisse Eva.",
        "reply": "Hallo Eva.", "user_embedding": None, "result": result_dict(user, ch, t, "Hallo Eva."), "created_at": now},
        "log": [{"seq": 0, "node": "responder", "art": "switch", "entscheidung": "responder.ergebnis",
                 "outcome": "antwort", "inputs": {}, "at": now}]}


def _worker(index: int = 7) -> BackgroundWorker:
    """A worker's job handling without its consumer thread."""
    w = BackgroundWorker.__new__(BackgroundWorker)
    w.index, w.settings, w._services = index, Settings(), None
    return w


def _run(stores, migrated, go):
    from redis.asyncio import Redis

    async def outer(p):
        r = Redis.from_url(stores.redis_url)
        try:
            await outbox.ensure_group(r)
            await go(p, r)
        finally:
            await r.aclose()

    asyncio.run(with_pool(migrated.database_url, outer))


async def _stored(p, r, user: str) -> dict[str, int]:
    out = {**await erasure.count_rows(p, user_id=user),
           **await erasure.count_keys(r, user_id=user, bekannt=await erasure.bekannte_paare(p, user))}
    return {k: n for k, n in out.items() if n}


async def _mark(p, r, user: str) -> None:
    await erasure.markieren_redis(r, user, 3600)
    await erasure.markieren(p, user, 3600)


def test_every_write_path_refuses_an_erased_user_and_writes_nothing(stores, migrated):
    async def go(p, r):
        user, ch = f"eva{uuid.uuid4().hex[:6]}", "nova"
        await _mark(p, r, user)
        with pytest.raises(erasure.NutzerGeloescht):
            await pg.write_turn_job(p, read_job(_turn_job(user, ch)))
        with pytest.raises(erasure.NutzerGeloescht):
            await lzg.episode_schreiben(p, user, ch, Episode(quelle="t1", zeitpunkt=datetime.now(timezone.utc),
                                        verdichtungen=[Verdichtung(inhalt="Eva segelt", embedding=unit(1).tolist())]))
        with pytest.raises(erasure.NutzerGeloescht):
            await beziehung.profil_wachsen(p, user, ch, "praegung:t1", {"mensch_kern": "Eva segelt."}, {"mensch_kern": 5})
        with pytest.raises(erasure.NutzerGeloescht):
            await beziehung.set_profile(p, user, ch, mensch_kern="Eva segelt.")
        with pytest.raises(erasure.NutzerGeloescht):
            await bibliothek.add(p, user, ch, "wissen", "Segeln", "Segeln ist schoen.", unit(2), schluessel="d:t1:0:wissen")
        with pytest.raises(erasure.NutzerGeloescht):
            await kzg.add_entry(r, user, ch, "Eva segelt.", unit(3), quelle="t1", entry_id="turn-t1")
        with pytest.raises(erasure.NutzerGeloescht):
            await delegieren(r, user, ch, "t1", "Segeln nachlesen")
        with pytest.raises(erasure.NutzerGeloescht):
            await ziele.bilden(p, ch, user, "Segeln lernen", "mittel", 0.8, unit(4), quelle_turn="t1")
        with pytest.raises(erasure.NutzerGeloescht):
            await timeline.add(p, user, ch, "Segeltoern", datetime.now(timezone.utc), "UTC", turn_id="t1",
                               schritt="timeline:0")
        with pytest.raises(erasure.NutzerGeloescht):
            await notizen.create(p, user, "Segeln", "Eva segelt.", turn_id="t1", schritt="notizen:0")
        assert await _stored(p, r, user) == {}
        # someone else writes as before
        other = f"otto{uuid.uuid4().hex[:6]}"
        await pg.write_turn_job(p, read_job(_turn_job(other, ch)))
        await kzg.add_entry(r, other, ch, "Otto segelt.", unit(3), entry_id="turn-t1")
        assert (await _stored(p, r, other))["pg:turns"] == 1 and await kzg.count(r, other, ch) == 1

    _run(stores, migrated, go)


def test_the_worker_acknowledges_an_erased_users_job_instead_of_retrying_it(stores, migrated):
    async def go(p, r):
        user, ch = f"eva{uuid.uuid4().hex[:6]}", "nova"
        w = _worker()
        # the Postgres mark alone (Redis' mark gone, or written after the job began): the write refuses
        await erasure.markieren(p, user, 3600)
        assert await w.handle(r, p, _turn_job(user, ch)) is None
        # both marks: the job does nothing at all; through the outbox it is acknowledged, not counted a failure
        await erasure.markieren_redis(r, user, 3600)
        stream, dead = f"test:outbox:{uuid.uuid4().hex[:6]}", f"test:dead:{uuid.uuid4().hex[:6]}"
        await outbox.ensure_group(r, stream)
        entry = await outbox.enqueue(r, _turn_job(user, ch), stream)
        consumer = outbox.OutboxConsumer(r, "w-test", lambda job: w.handle(r, p, job), claim_idle_ms=60_000,
                                         block_ms=10, stream=stream, dead_stream=dead)
        assert await consumer.step() == 1
        assert (await r.xpending(stream, outbox.GROUP))["pending"] == 0 and await r.xlen(dead) == 0
        assert await r.hget(outbox.FAILURES, entry) is None
        assert await _stored(p, r, user) == {}
        await r.delete(stream, dead)

    _run(stores, migrated, go)


def test_a_write_begun_before_the_mark_holds_it_back_until_it_commits(stores, migrated):
    async def go(p, r):
        user = f"eva{uuid.uuid4().hex[:6]}"
        async with p.connection() as conn, conn.transaction():
            await erasure.pruefen(conn, user)  # not marked: the write goes on, holding the mark back
            mark = asyncio.ensure_future(erasure.markieren(p, user, 3600))
            await asyncio.sleep(0.5)
            assert not mark.done()  # the erasure's deletes come after the mark: they will take this write
        await asyncio.wait_for(mark, 10)
        async with p.connection() as conn, conn.transaction():
            with pytest.raises(erasure.NutzerGeloescht):
                await erasure.pruefen(conn, user)

    _run(stores, migrated, go)


def test_a_new_key_for_the_user_lifts_the_mark(stores, migrated):
    async def go(p, r):
        user, ch = f"eva{uuid.uuid4().hex[:6]}", "nova"
        await _mark(p, r, user)
        await pg.create_api_key(p, user)  # the user made again
        assert await erasure.aufheben(r, user) and not await erasure.markiert(r, user)
        await pg.write_turn_job(p, read_job(_turn_job(user, ch)))
        await kzg.add_entry(r, user, ch, "Eva segelt.", unit(3), entry_id="turn-t1")
        assert (await _stored(p, r, user))["pg:turns"] == 1
        await erasure.erase_keys(r, user_id=user, bekannt=await erasure.bekannte_paare(p, user))
        await erasure.erase_rows(p, user_id=user)

    _run(stores, migrated, go)


def test_the_erasure_waits_for_a_job_a_worker_holds_and_not_for_a_stale_one(stores, migrated):
    async def go(p, r):
        user, ch = f"eva{uuid.uuid4().hex[:6]}", "nova"
        entry = await outbox.enqueue(r, _turn_job(user, ch))
        got = await r.xreadgroup(outbox.GROUP, "w-held", {outbox.OUTBOX_STREAM: ">"}, count=1000)
        mine = [i for _, items in got for i, _ in items]
        assert entry in mine or entry.encode() in mine
        wait = asyncio.ensure_future(erasure.gehaltene_abwarten(r, user, 10, claim_idle_ms=60_000))
        await asyncio.sleep(0.5)
        assert not wait.done()  # held (freshly claimed): waited for
        await r.xack(outbox.OUTBOX_STREAM, outbox.GROUP, *mine)
        assert await asyncio.wait_for(wait, 5) == 0
        # a job pending longer than the claim time (its worker died, or it waits for its model): not waited for
        entry = await outbox.enqueue(r, _turn_job(user, ch))
        got = await r.xreadgroup(outbox.GROUP, "w-dead", {outbox.OUTBOX_STREAM: ">"}, count=1000)
        mine = [i for _, items in got for i, _ in items]
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        assert await erasure.gehaltene_abwarten(r, user, 10, claim_idle_ms=200) == 0
        assert time.monotonic() - t0 < 5
        await r.xack(outbox.OUTBOX_STREAM, outbox.GROUP, *mine)
        await r.xdel(outbox.OUTBOX_STREAM, *mine)

    _run(stores, migrated, go)


def test_the_pixie_drops_an_erased_users_task_and_writes_nothing(stores, migrated):
    from memory.config import MemoryConfig
    from memory.ops import PoolStore
    from pipeline.services import Services
    from prompts import PromptLibrary

    async def go(p, r):
        user, ch = f"eva{uuid.uuid4().hex[:6]}", "nova"
        queue = f"{DELEGATIONS}:{user}:{ch}"
        await r.rpush(queue, json.dumps({"aufgabe": "Was sind Magnetare?", "turn_id": "t-7"}))
        await r.delete(pixie.LOCK)
        await _mark(p, r, user)
        services = Services(settings=Settings(), llm=None, embedder=None, store=PoolStore(p), redis=r,
                            prompts=PromptLibrary(), web=None)
        services.cache["memory_cfg"] = MemoryConfig()
        raw = await r.lmove(queue, pixie._work_of(queue), "LEFT", "RIGHT")
        assert await pixie._bearbeiten(services, queue, raw) == "geloescht"
        assert await bibliothek.eintraege(p, user, ch) == []
        assert await r.exists(queue, pixie._work_of(queue)) == 0

    _run(stores, migrated, go)
