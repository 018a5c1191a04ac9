"""A store that is away answers 503 `store_unavailable` with a Retry-After, never 500
(serve/store_away.py); any other failure stays a server error, and a response already under way
is left as it is."""
import asyncio
import json

import pytest
from psycopg import OperationalError
from psycopg_pool import PoolTimeout
from redis.exceptions import ConnectionError as RedisConnectionError

from serve.store_away import StoreAway


def _app(exc: Exception, started: bool = False):
    async def app(scope, receive, send):
        if started:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        raise exc
    return app


def _call(mw) -> list[dict]:
    sent = []

    async def send(msg):
        sent.append(msg)

    async def receive():
        return {"type": "http.request", "body": b""}

    asyncio.run(mw({"type": "http", "method": "POST", "path": "/v1/pairs/a/b/turns"}, receive, send))
    return sent


@pytest.mark.parametrize("exc", [PoolTimeout("couldn't get a connection after 30.00 sec"),
                                 OperationalError("server closed the connection unexpectedly"),
                                 RedisConnectionError("Error 111 connecting")])
def test_a_store_away_is_answered_503_with_retry_after(exc, caplog):
    sent = _call(StoreAway(_app(exc)))
    assert sent[0]["status"] == 503
    assert dict(sent[0]["headers"])[b"retry-after"] == b"5"
    assert json.loads(sent[1]["body"])["error"]["type"] == "store_unavailable"
    assert "fallback speicher_weg" in caplog.text


def test_a_cause_deep_inside_is_found():
    try:
        try:
            raise OperationalError("the database system is starting up")
        except OperationalError as inner:
            raise RuntimeError("node enricher failed") from inner
    except RuntimeError as e:
        wrapped = e
    assert _call(StoreAway(_app(wrapped)))[0]["status"] == 503


def test_any_other_failure_stays_a_server_error():
    with pytest.raises(ValueError):
        _call(StoreAway(_app(ValueError("a bug"))))


def test_a_response_under_way_is_not_answered_twice():
    with pytest.raises(PoolTimeout):
        _call(StoreAway(_app(PoolTimeout("late"), started=True)))
