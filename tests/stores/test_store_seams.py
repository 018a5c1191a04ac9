"""The Postgres pool is a seam (memory/pg.py `StorePool`, memory/seams.py): what fails in a
connection's block because Postgres is away arrives as `core.errors.StoreUnavailable` with
psycopg's error as its `__cause__`; an error of the statement's own passes as itself."""
import asyncio

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from core.errors import StoreUnavailable
from memory import outbox, pg


def test_a_connection_lost_in_a_block_arrives_as_store_unavailable(stores, migrated):
    async def go():
        pool = pg.open_pool(stores.database_url, 1, 2)
        await pool.open(wait=True)
        try:
            with pytest.raises(StoreUnavailable) as lost:
                async with pool.connection() as conn:
                    # the server ends this very session, as a restart of Postgres would
                    await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            with pytest.raises(psycopg.errors.UndefinedTable) as own:
                async with pool.connection() as conn:
                    await conn.execute("SELECT 1 FROM keine_solche_tabelle")
            return lost.value, own.value
        finally:
            await pool.close()

    lost, own = asyncio.run(go())
    assert isinstance(lost.__cause__, psycopg.OperationalError) and outbox.is_outage(lost)
    assert not isinstance(own, StoreUnavailable) and not outbox.is_outage(own)


def test_a_pool_that_reaches_no_server_arrives_as_store_unavailable():
    async def go():
        pool = pg.open_pool("postgresql://novaberg@127.0.0.1:9/keine?connect_timeout=1", 0, 1)
        await pool.open(wait=False)
        try:
            with pytest.raises(StoreUnavailable) as away:
                async with pool.connection(timeout=0.5):
                    pass
            return away.value
        finally:
            await pool.close()

    away = asyncio.run(go())
    assert isinstance(away.__cause__, PoolTimeout) and outbox.is_outage(away)
