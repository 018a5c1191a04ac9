"""Erasure is final, through the API: a user erased right after their turns, while the turns'
background work still runs, has nothing stored once that work has drained — no row, no key, no
API key; and an ingress replica that cached the user's key before refuses it at once, not after
its key cache's time."""
import asyncio
import uuid

import pytest
from fastapi import HTTPException

from core.names import APP_NAME
from memory import erasure, outbox, pg
from tests.conftest import auth, pg_call, redis_call, wait_for

pytestmark = pytest.mark.e2e


def _stored(settings, user_id) -> dict[str, int]:
    rows = pg_call(settings.database_url, erasure.count_rows, user_id)
    keys = redis_call(settings.redis_url, lambda r: erasure.count_keys(r, user_id))
    return {k: n for k, n in {**rows, **keys}.items() if n and k not in ("redis:pairs:live", "redis:pairs:evicted")}


def _drained(settings) -> bool:
    b = redis_call(settings.redis_url, outbox.backlog)
    return b["pending"] == 0 and not b["undelivered"]


def _replica(settings):
    """A second ingress replica in this process, on the tier's deployments."""
    from ray import serve

    import serve.ingress as module
    from serve.routes import common

    cls = next(c for c in module.Ingress.func_or_class.__mro__ if "principal" in vars(c))  # not Serve's wrapper
    limits, running = dict(module._LIMITS), common._running
    ing = cls.__new__(cls)
    cls.__init__(ing, settings, *(serve.get_deployment_handle(d, app_name=APP_NAME)
                                  for d in ("Store", "LLM", "Embedder")))
    module._LIMITS.update(limits)
    common.bind(running)
    return ing


def test_an_erasure_during_background_work_leaves_nothing_and_every_replica_refuses_the_key(
        client, keys, settings, character):
    ch = character("final")
    user = f"ella-{uuid.uuid4().hex[:6]}"
    key = pg_call(settings.database_url, pg.create_api_key, user)
    other = _replica(settings)

    async def go():
        assert (await other.principal(f"Bearer {key}"))["user_id"] == user  # cached by the other replica
        assert (await other.principal(f"Bearer {key}"))["user_id"] == user
        for text in ("Ich heisse Ella und segle gern.", "Mein Hund heisst Bello."):
            r = await asyncio.to_thread(client.post, f"/v1/pairs/{user}/{ch}/turns", json={"text": text},
                                        headers=auth(key))
            assert r.status_code == 200, r.text
        # at once: the turns' background work is still queued or running
        r = await asyncio.to_thread(client.delete, f"/v1/users/{user}", headers=auth(key))
        assert r.status_code == 200, r.text
        await asyncio.sleep(settings.key_revocation_check_ms / 1000 + 0.05)
        with pytest.raises(HTTPException) as refused:
            await other.principal(f"Bearer {key}")
        assert refused.value.status_code == 401

    asyncio.run(go())
    wait_for(lambda: _drained(settings), timeout=120)
    assert _stored(settings, user) == {}
    export = client.get(f"/v1/users/{user}/export", headers=auth(keys["operator"]))
    assert export.status_code == 200, export.text
    body = export.json()
    # (the export's own admission, `ops:*`, is the only key while it runs)
    assert not any(body["postgres"].values()) and not [k for k in body["redis"] if not k.startswith("ops:")]
    assert client.get(f"/v1/pairs/{user}/{ch}/turns", headers=auth(key)).status_code == 401

    # a new key makes the user again: their turns are kept from then on
    r = client.post("/v1/operator/keys", json={"user_id": user}, headers=auth(keys["operator"]))
    assert r.status_code == 200, r.text
    again = r.json()["api_key"]
    r = client.post(f"/v1/pairs/{user}/{ch}/turns", json={"text": "Da bin ich wieder."}, headers=auth(again))
    assert r.status_code == 200, r.text
    wait_for(lambda: pg_call(settings.database_url, pg.turn_record, user, ch, r.json()["turn_id"]) is not None,
             timeout=60)
