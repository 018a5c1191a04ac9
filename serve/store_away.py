"""A store that is away is not a server error: a request that failed because Postgres or Redis
could not be reached (by the exception's class and its causes, through Ray's wrappers: the same
test as the outbox's, `memory.outbox.is_outage`) is answered 503 `store_unavailable` with a
Retry-After, logged by name (`speicher_weg`), instead of 500. Nothing the request asked for was
done twice: a turn's own writes commit together or not at all, and its turn_id asks again."""
from __future__ import annotations

import logging

from memory.outbox import is_outage
from serve.asgi_error import send_error

log = logging.getLogger("novaberg.ingress")
RETRY_AFTER_S = 5


class StoreAway:
    """Pure ASGI middleware around the routes; a response already started is left as it is."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watched(msg):
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, receive, watched)
        except Exception as e:
            if started or not is_outage(e):
                raise
            log.warning("%s %s: a store is away (%s: %s); answered 503 (fallback speicher_weg)", scope.get("method"),
                        scope.get("path"), type(e).__name__, str(e)[:200])
            await _unavailable(send)


async def _unavailable(send) -> None:
    await send_error(send, 503, "store_unavailable", "a store (Postgres or Redis) cannot be reached right now; "
                     f"nothing was lost, try again in {RETRY_AFTER_S} s (the same turn_id asks for the same turn)",
                     retry_after_s=RETRY_AFTER_S)
