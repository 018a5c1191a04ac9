"""The pixie: a detached background agent that reflects between conversations on the tasks the
salience node delegated, and writes what it found into Nova's library (`autonomous_wissen`,
type `wissen`, with a topic vector). One round at a time across the whole cluster, serialised
by the Redis lock `pixie:running`."""
from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from typing import Any

import ray
from pydantic import BaseModel, ConfigDict

from cluster.settings import Settings

log = logging.getLogger("novaberg.pixie")
LOCK = "pixie:running"
LOCK_TTL_S = 600
PIXIE_NAME = "pixie"


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    titel: str
    wissen: str


async def pixie_round(services, max_tasks: int = 3) -> dict[str, Any]:
    """One round: under the lock, take up to `max_tasks` delegated tasks and write library entries."""
    from actors.background import DELEGATIONS
    from pipeline.llm_json import ask_json
    from pipeline.services import Deps
    from pipeline.trace import TurnTrace

    r = services.redis
    token = uuid.uuid4().hex
    if not await r.set(LOCK, token, nx=True, ex=LOCK_TTL_S):
        log.info("pixie: another round holds %s; this one does not start", LOCK)
        return {"status": "gesperrt", "geschrieben": 0}
    written = 0
    try:
        keys = sorted([k.decode() if isinstance(k, bytes) else k async for k in r.scan_iter(f"{DELEGATIONS}:*")])
        for key in keys:
            if written >= max_tasks:
                break
            raw = await r.lpop(key)
            if raw is None:
                continue
            task = json.loads(raw)
            _, user_id, character_id = key.split(":", 2)
            trace = TurnTrace(user_id, character_id, f"pixie-{uuid.uuid4().hex[:8]}")
            deps = Deps(services, trace)
            vec = await services.embedder.embed(trace, task["aufgabe"])
            cfg = services.memory_cfg
            memories = await services.store.call("lzg.anker_retrieval", user_id, character_id, vec, 5,
                                                 cfg.lzg_anchor_min_similarity)
            answer, outcome = await ask_json(deps, "pixie", _Antwort, {
                "character_name": "Nova", "aufgabe": task["aufgabe"],
                "erinnerungen": "\n".join(f"- {m['inhalt']}" for m in memories) or "(nichts)"})
            if answer is None or not answer.wissen.strip():
                log.warning("pixie: fallback aufgabe_zurueck: no usable answer (%s) for %r; task returned",
                            outcome, task["aufgabe"])
                await r.rpush(key, raw)
                continue
            topic = await services.embedder.embed(trace, answer.titel)
            await services.store.call("library.add", user_id, character_id, "wissen", answer.titel[:200],
                                      answer.wissen[:2000], topic, 5.0)
            written += 1
            log.info("pixie: wrote %r to the library of %s:%s", answer.titel, user_id, character_id)
    finally:
        if (await r.get(LOCK)) in (token, token.encode()):
            await r.delete(LOCK)
    return {"status": "gelaufen", "geschrieben": written}


class Pixie:
    """The detached actor: runs a round every `interval_s` on its own thread and loop."""

    def __init__(self, settings: dict, interval_s: float):
        self.settings = Settings(**settings)
        self.interval_s = interval_s
        self.rounds: list[dict] = []
        threading.Thread(target=lambda: asyncio.run(self._loop()), name="pixie", daemon=True).start()

    async def _loop(self) -> None:
        from pipeline.services import Services

        services = Services.connect(self.settings)
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.rounds.append(await pixie_round(services))
            except Exception:
                log.exception("pixie: round failed; next round in %.0fs", self.interval_s)

    def stats(self) -> dict:
        return {"rounds": len(self.rounds), "last": self.rounds[-1] if self.rounds else None}


PixieRemote = ray.remote(num_cpus=0, max_restarts=-1)(Pixie)


def start_pixie(settings: Settings):
    return PixieRemote.options(name=PIXIE_NAME, namespace=settings.namespace, get_if_exists=True,
                               lifetime="detached").remote(settings.model_dump(mode="json"), settings.pixie_interval_s)


def stop_pixie(settings: Settings) -> None:
    try:
        ray.kill(ray.get_actor(PIXIE_NAME, namespace=settings.namespace), no_restart=True)
    except ValueError:
        pass
