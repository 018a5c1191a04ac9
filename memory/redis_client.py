"""The project's Redis client: one way to connect, riding out a short Redis restart. A call that
meets a refused connection, a timeout or a Redis still loading its AOF tries again with backoff
(0.05 s doubling to 0.5 s) for about `Settings.redis_reconnect_s`; only then does it fail as an
outage (the ingress answers 503, an outbox job waits). The commit scripts are safe to send again
(a committed turn answers "already committed"); a counter may count once more when a reply was
lost in the very moment Redis went away.

The client is a seam (`memory.seams.store_calls`): a call that fails for good raises
`core.errors.StoreUnavailable` from the driver's error, on the client and on its pipelines."""
from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from memory.seams import store_calls

BASE_S, CAP_S = 0.05, 0.5


def versuche(reconnect_s: float) -> int:
    """Retries whose backoff (0.05, 0.1, 0.2, 0.4, then 0.5 each) adds up to at least `reconnect_s`."""
    waited, n = 0.0, 0
    while waited < reconnect_s:
        waited += min(CAP_S, BASE_S * 2 ** n)
        n += 1
    return n


class _StorePipeline(Pipeline):
    """A pipeline whose commands, sent at `execute` (or at once while it watches keys), raise the
    project's errors."""

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        with store_calls():
            return await super().execute(raise_on_error)

    async def immediate_execute_command(self, *args: Any, **options: Any) -> Any:
        with store_calls():
            return await super().immediate_execute_command(*args, **options)


class StoreRedis(Redis):
    """The asyncio client whose calls raise `StoreUnavailable` (from the driver's error) where
    Redis is away; every other error of Redis's (a script's, a WATCH's) passes as it is."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        with store_calls():
            return await super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return _StorePipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


def verbinden(url: str, reconnect_s: float) -> StoreRedis:
    return StoreRedis.from_url(url, retry=Retry(ExponentialBackoff(cap=CAP_S, base=BASE_S), versuche(reconnect_s)))
