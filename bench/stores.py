"""Embedded stores for one benchmark run: Postgres with pgvector (migrated for the embedder's
dimension) and Redis in a fresh folder under /tmp, a pool and a client on them, all closed again."""
from __future__ import annotations

import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator


@asynccontextmanager
async def embedded_stores(prefix: str, dim: int) -> AsyncIterator[tuple]:
    """(the Postgres pool, the Redis client) on stores of their own, stopped on leaving."""
    from redis.asyncio import Redis

    from memory import pg
    from memory.embedded import EmbeddedStores
    from memory.migrate import apply_migrations

    stores = EmbeddedStores(home=Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))).start()
    apply_migrations(stores.database_url, dim)
    pool = pg.open_pool(stores.database_url, 1, 4)
    await pool.open(wait=True)
    r = Redis.from_url(stores.redis_url)
    try:
        yield pool, r
    finally:
        await pool.close()
        await r.aclose()
        stores.stop()
