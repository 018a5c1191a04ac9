"""The project's Redis client: one way to connect, riding out a short Redis restart. A call that
meets a refused connection, a timeout or a Redis still loading its AOF tries again with backoff
(0.05 s doubling to 0.5 s) for about `Settings.redis_reconnect_s`; only then does it fail as an
outage (the ingress answers 503, an outbox job waits). The commit scripts are safe to send again
(a committed turn answers "already committed"); a counter may count once more when a reply was
lost in the very moment Redis went away."""
from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

BASE_S, CAP_S = 0.05, 0.5


def versuche(reconnect_s: float) -> int:
    """Retries whose backoff (0.05, 0.1, 0.2, 0.4, then 0.5 each) adds up to at least `reconnect_s`."""
    waited, n = 0.0, 0
    while waited < reconnect_s:
        waited += min(CAP_S, BASE_S * 2 ** n)
        n += 1
    return n


def verbinden(url: str, reconnect_s: float) -> Redis:
    return Redis.from_url(url, retry=Retry(ExponentialBackoff(cap=CAP_S, base=BASE_S), versuche(reconnect_s)))
