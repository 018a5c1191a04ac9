"""The store deployment: Postgres work for every pair, over one connection pool per replica.

Pair actors hold no database connection (a connection per pair hit `max_connections` at ~95
pairs); they call this deployment. It applies the schema migrations before it answers, using the
embedder's dimension. A lorebook's keys are matched off its event loop, the regex keys within one
time budget a turn (`lorebook_regex_budget_s`, memory/charaktere.wissen_suchen).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from ray import serve

from core.bestand import Charakter
from core.names import STORE_DEPLOYMENT
from core.settings import Settings
from memory import pg
from memory.migrate import apply_migrations
from pipeline.services import transport

log = logging.getLogger("novaberg.store")


def _versendbar(e: BaseException) -> BaseException:
    """The error as it can travel back to the caller (as itself when it pickles)."""
    import pickle

    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")


@serve.deployment(name=STORE_DEPLOYMENT, max_ongoing_requests=512)
class StoreDeployment:
    def __init__(self, settings: Settings, embedder):
        from memory import charaktere

        self.settings = settings
        self.embedder = transport(embedder, self.settings)
        charaktere.regex_budget_setzen(self.settings.lorebook_regex_budget_s)  # a lorebook's regex time per turn
        self.pool = pg.open_pool(self.settings.database_url, self.settings.pg_pool_min, self.settings.pg_pool_max)
        self._ready = False
        self._lock = asyncio.Lock()

    async def ready(self) -> dict[str, Any]:
        async with self._lock:
            if not self._ready:
                dim = await self.embedder.dimension.remote()
                applied = await asyncio.to_thread(apply_migrations, self.settings.database_url, dim)
                await self.pool.open(wait=True)
                self._ready = True
                log.info("store ready (embedding dim %d, migrations applied now: %s)", dim, applied)
        return {"ready": True}

    async def check_health(self) -> None:
        await self.ready()

    async def load_pair(self, user_id: str, character_id: str) -> dict[str, Any]:
        await self.ready()
        return await pg.load_pair(self.pool, user_id, character_id)

    async def lookup_api_key(self, key: str) -> dict | None:
        await self.ready()
        return await pg.lookup_api_key(self.pool, key)

    async def create_api_key(self, user_id: str | None, operator: bool = False, label: str = "",
                             expires_days: int | None = None) -> str:
        await self.ready()
        return await pg.create_api_key(self.pool, user_id, operator=operator, label=label, expires_days=expires_days)

    async def create_character(self, character_id: str, fields: dict[str, Any], wissen: list[dict[str, Any]],
                               replace: bool = False) -> Charakter | None:
        """A new character with its background knowledge, each entry embedded by its topic
        (title and content). None: the id is taken (and `replace` is off)."""
        from memory import charaktere

        await self.ready()
        vectors = await asyncio.gather(*[self.embedder.embed.remote(f"{w['titel']}: {w['inhalt']}") for w in wissen])
        try:
            return await charaktere.create(self.pool, character_id, fields,
                                           [{**w, "embedding": v} for w, v in zip(wissen, vectors)], replace=replace)
        except charaktere.CharacterExists:
            return None

    async def turn_record(self, user_id: str, character_id: str, turn_id: str) -> dict | None:
        await self.ready()
        return await pg.turn_record(self.pool, user_id, character_id, turn_id)

    async def call(self, op: str, *args, **kwargs) -> Any:
        """Run one memory operation (memory/ops.py) on the pool."""
        from memory.ops import lookup

        await self.ready()
        return await lookup(op)(self.pool, *args, **kwargs)

    async def batch(self, calls: list[tuple[str, tuple, dict]]) -> list[tuple[BaseException | None, Any]]:
        """Several memory operations asked for at once (`StoreClient`), side by side on the pool:
        each one's (error, result), so one failing operation fails only its own caller."""
        out = await asyncio.gather(*(self.call(op, *a, **k) for op, a, k in calls), return_exceptions=True)
        return [(_versendbar(r), None) if isinstance(r, BaseException) else (None, r) for r in out]

    async def pipeline_rows(self, user_id: str, character_id: str, turn_id: str | None = None) -> list[dict]:
        await self.ready()
        return await pg.pipeline_rows(self.pool, user_id, character_id, turn_id)
