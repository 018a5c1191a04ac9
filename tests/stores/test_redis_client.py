"""The project's Redis client rides out a short Redis restart (memory/redis_client.py): a call made
while the server is away waits for it within `redis_reconnect_s` and succeeds; beyond, it fails as
an outage."""
import asyncio
import os
import signal
import time
from pathlib import Path

from memory.redis_client import BASE_S, CAP_S, verbinden, versuche


def test_the_backoff_covers_the_window():
    for s in (0.0, 1.0, 8.0, 30.0):
        n = versuche(s)
        waited = sum(min(CAP_S, BASE_S * 2 ** i) for i in range(n))
        assert waited >= s and (n == 0 or waited - min(CAP_S, BASE_S * 2 ** (n - 1)) < s)


def test_a_call_during_a_redis_restart_waits_for_it(stores):
    async def go():
        r = verbinden(stores.redis_url, 8.0)
        try:
            await r.set("neustart:probe", "vorher")
            pid = int((Path(stores.home) / "redis" / "redis.pid").read_text().strip())
            os.kill(pid, signal.SIGKILL)
            while Path(f"/proc/{pid}").exists() and "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text():
                await asyncio.sleep(0.02)
            later = asyncio.get_running_loop().call_later(1.5, lambda: stores.start(postgres=False, redis=True))
            t0 = time.monotonic()
            await r.set("neustart:probe", "nachher")  # Redis is away now; it comes back in 1.5 s
            waited = time.monotonic() - t0
            later.cancel()
            return waited, await r.get("neustart:probe")
        finally:
            await r.aclose()

    waited, value = asyncio.run(go())
    assert value == b"nachher" and waited >= 1.0


def test_beyond_the_window_a_call_fails_as_an_outage(stores):
    import pytest
    from redis.exceptions import ConnectionError

    from core.errors import StoreUnavailable
    from memory.outbox import is_outage

    async def go():
        r = verbinden(stores.redis_url, 0.0)
        try:
            await r.ping()
            pid = int((Path(stores.home) / "redis" / "redis.pid").read_text().strip())
            os.kill(pid, signal.SIGKILL)
            while Path(f"/proc/{pid}").exists() and "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text():
                await asyncio.sleep(0.02)
            # the client is a seam: Redis's error arrives as the project's family, from the original
            with pytest.raises(StoreUnavailable) as e:
                await r.set("neustart:probe", "weg")
            return e.value
        finally:
            stores.start(postgres=False, redis=True)
            await r.aclose()

    error = asyncio.run(go())
    assert isinstance(error.__cause__, ConnectionError) and is_outage(error)
