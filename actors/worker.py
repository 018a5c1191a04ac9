"""BackgroundWorker: detached actors that consume the outbox (a Redis stream, consumer group).

They outlive the pair actors and the ingress that enqueued the work; a job is acknowledged only
after its Postgres write committed, and what a dead worker left pending is re-claimed. A job of an
erased user (memory/erasure.py: its mark, or a write refused by it) is acknowledged without effect. The
consumer loop starts in the constructor, on its own thread, so a worker that Ray restarts after a
crash resumes without anyone calling it.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import ray

from core.settings import Settings
from core.wire import BackgroundJob, SelfTriggerJob, TurnJob

log = logging.getLogger("novaberg.worker")


def worker_name(i: int) -> str:
    return f"outbox-worker-{i}"


async def retention_pass(pool, r, settings: Settings, now: datetime | None = None,
                         dead_stream: str | None = None, evicted_key: str | None = None) -> dict[str, int]:
    """Delete what is past its retention (`pipeline_log_keep_days`, `turn_records_keep_days`,
    `dead_letters_keep_days`, `turn_undo_keep_days`; 0 keeps that kind for good; the record of
    evicted pair actors `pairs:evicted` after `evicted_pairs_keep_hours`) and log what went.
    Returns the counts."""
    from memory import outbox, pg
    from memory.erasure import EVICTED_PAIRS

    now = now or datetime.now(timezone.utc)

    def before(days: float) -> datetime | None:
        return now - timedelta(days=days) if days > 0 else None

    deleted = await pg.prune(pool, log_before=before(settings.pipeline_log_keep_days),
                             turns_before=before(settings.turn_records_keep_days),
                             undo_before=before(settings.turn_undo_keep_days))
    dead_before = before(settings.dead_letters_keep_days)
    deleted["dead_letters"] = (await outbox.trim_dead(r, int(dead_before.timestamp() * 1000),
                                                      dead_stream or outbox.DEAD_STREAM)
                               if dead_before is not None else 0)
    evicted_before = now - timedelta(hours=settings.evicted_pairs_keep_hours)
    deleted[EVICTED_PAIRS] = int(await r.zremrangebyscore(evicted_key or EVICTED_PAIRS, "-inf",
                                                          f"({evicted_before.timestamp()}"))
    if any(deleted.values()):
        log.info("retention: deleted %d pipeline_log rows (kept %s days), %d turn records (kept %s days), "
                 "%d dead letters (kept %s days), %d evicted-pair records (kept %s hours)", deleted["pipeline_log"],
                 settings.pipeline_log_keep_days or "all", deleted["turns"], settings.turn_records_keep_days or "all",
                 deleted["dead_letters"], settings.dead_letters_keep_days or "all", deleted[EVICTED_PAIRS],
                 settings.evicted_pairs_keep_hours)
    return deleted


class BackgroundWorker:
    def __init__(self, index: int, settings: Settings):
        self.index = index
        self.settings = settings
        self.processed = 0
        self.errors = 0
        self.impulses = 0
        self._services = None
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="outbox", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        from memory import outbox, pg
        from memory.redis_client import verbinden

        r = verbinden(self.settings.redis_url, self.settings.redis_reconnect_s)
        pool = pg.open_pool(self.settings.database_url, 1, 2)
        await pool.open(wait=True)
        # a worker Ray restarts while Redis is down (or restarting) waits for it: this thread is the
        # worker's only consumer loop, and nobody would start it again
        while True:
            try:
                await outbox.ensure_group(r)
                break
            except Exception:
                self.errors += 1
                log.exception("outbox worker %d: cannot reach the outbox; retrying in 1s", self.index)
                await asyncio.sleep(1.0)

        consumer = outbox.OutboxConsumer(r, worker_name(self.index), lambda job: self.handle(r, pool, job),
                                         claim_idle_ms=self.settings.outbox_claim_idle_ms,
                                         block_ms=self.settings.outbox_block_ms)
        self.ready.set()
        log.info("outbox worker %d consuming", self.index)
        last_impulse_check = 0.0
        last_retention = time.monotonic()
        while True:
            try:
                self.processed += await consumer.step()
                if self.index == 0 and time.monotonic() - last_impulse_check > 1.0:
                    from actors.background import deliver_due_impulses

                    last_impulse_check = time.monotonic()
                    self.impulses += await deliver_due_impulses(self.dienste(), self.settings)
                if self.index == 0 and time.monotonic() - last_retention > self.settings.retention_every_s:
                    last_retention = time.monotonic()
                    await retention_pass(pool, r, self.settings)
            except Exception:
                self.errors += 1
                log.exception("outbox worker %d: round failed; retrying in 1s", self.index)
                await asyncio.sleep(1.0)

    def dienste(self):
        """The services the background chain and the impulses use, connected once."""
        from pipeline.services import Services

        if self._services is None:
            self._services = Services.connect(self.settings)
        return self._services

    async def handle(self, r, pool, job: dict[str, Any]) -> None:
        """One outbox job, as the stream holds it (any version up to `JOB_VERSION`; a newer one raises
        `JobTooNew` and waits for a newer worker). A job of an erased user (its mark, or a write the
        mark refused on the way) ends here without error: the outbox acknowledges it, nothing
        retries it."""
        from core.wire import read_job
        from memory import erasure

        typed = read_job(job)
        try:
            await self._work(r, pool, typed, job)
        except Exception as e:
            if not erasure.ist_geloescht(e):
                raise
            log.warning("outbox worker %d: fallback geloescht: a %s job's write was refused, its user was "
                        "erased; the job is acknowledged", self.index, typed.kind)

    async def _work(self, r, pool, job: TurnJob | BackgroundJob | SelfTriggerJob, raw: dict[str, Any]) -> None:
        from memory import erasure, pg, ruecknahme

        if await ruecknahme.job_zurueckgenommen(r, raw):
            return
        user_id = job.ziel().user_id
        if await erasure.markiert(r, user_id):
            raise erasure.abgewiesen(user_id, f"the {job.kind} job")
        match job:
            case TurnJob():
                await pg.write_turn_job(pool, job)
            case SelfTriggerJob():
                from actors.background import deliver_self_trigger

                await deliver_self_trigger(r, self.settings, job)
            case BackgroundJob():
                from actors.background import run_background

                await run_background(self.dienste(), pool, job)

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        return self.ready.wait(timeout_s)

    def stats(self) -> dict[str, Any]:
        return {"index": self.index, "processed": self.processed, "errors": self.errors, "impulses": self.impulses,
                "running": self._thread.is_alive()}


BackgroundWorkerRemote = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(BackgroundWorker)


def start_workers(settings: Settings) -> list:
    """Create (or find) the detached workers and wait until each consumes."""
    handles = [
        BackgroundWorkerRemote.options(name=worker_name(i), namespace=settings.namespace, get_if_exists=True,
                                       lifetime="detached").remote(i, settings)
        for i in range(settings.outbox_workers)
    ]
    if not all(ray.get([h.wait_ready.remote() for h in handles])):
        raise RuntimeError("outbox workers did not become ready in time")
    return handles


def stop_workers(settings: Settings) -> None:
    """Detached actors outlive serve.shutdown: kill them by name."""
    for i in range(settings.outbox_workers):
        try:
            ray.kill(ray.get_actor(worker_name(i), namespace=settings.namespace), no_restart=True)
        except ValueError:
            pass
