"""No key locks out another, and bad input is a 4xx, never a 500: an address's failed keys never
refuse a valid key from it (the ingress's own app, in this process with low limits, against the
tier's deployments); a dead letter's id beyond a stream id is 404; an events cursor with a newline
is 422; a look-alike of a speaker's label is no name; a pair's status shows its actor's process
and fencing token to operators alone."""
import threading
import time
import uuid

import httpx
import pytest

from core.names import APP_NAME
from tests.conftest import _free_port, auth

pytestmark = pytest.mark.e2e


@pytest.fixture()
def limited(system, settings):
    """The ingress's app served in this process with 3 failures per (address, key prefix) and 5
    per address, its routes answered by an `Ingress` on the tier's Store, LLM and Embedder."""
    import uvicorn
    from ray import serve

    import serve.ingress as module
    from serve.routes import common

    cls = next(c for c in module.Ingress.func_or_class.__mro__ if "principal" in vars(c))  # not Serve's wrapper
    s = settings.model_copy(update={"auth_failures_per_minute": 3, "auth_failures_per_address_per_minute": 5})
    limits, running = dict(module._LIMITS), common._running
    ing = cls.__new__(cls)
    cls.__init__(ing, s, *(serve.get_deployment_handle(d, app_name=APP_NAME) for d in ("Store", "LLM", "Embedder")))
    server = uvicorn.Server(uvicorn.Config(module.app, host="127.0.0.1", port=_free_port(), lifespan="off",
                                           log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        t.join(timeout=10)
        module._LIMITS.clear()
        module._LIMITS.update(limits)
        common.bind(running)


def test_an_addresss_failed_keys_never_lock_a_valid_key_out(limited, keys):
    with httpx.Client(base_url=limited, timeout=60) as c:
        guessed = [c.get("/v1/characters", headers=auth(f"nbk_{i:04d}guess")).status_code for i in range(12)]
        assert guessed == [401] * 5 + [429] * 7, guessed  # 5 failures an address, over all its keys
        assert c.get("/v1/characters").status_code == 429
        r = c.get("/v1/characters", headers=auth(keys["alice"]))  # the same address, a valid key
        assert r.status_code == 200, r.text
        again = c.get("/v1/characters", headers=auth("nbk_0000guess"))  # refused before: without a lookup
        assert again.status_code == 429 and int(again.headers["retry-after"]) >= 1
        assert c.get("/v1/characters", headers=auth(keys["operator"])).status_code == 200


def test_a_dead_letter_id_beyond_a_stream_id_is_404(client, keys):
    r = client.post("/v1/operator/outbox/dead/99999999999999999999-1/replay", headers=auth(keys["operator"]))
    assert r.status_code == 404, r.text


def test_an_events_cursor_with_a_newline_is_422(client, keys, character):
    ch = character("cursor")
    r = client.get(f"/v1/pairs/alice/{ch}/events?after=0%0A", headers=auth(keys["alice"]))
    assert r.status_code == 422 and "cursor" in r.json()["error"]["message"], r.text


def test_a_look_alike_of_a_speakers_label_is_no_name(client, keys, character):
    ch = character("name")
    for name in ("Person\u00a0A", "Person B\ufe55", "\u0420erson B"):
        r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Hallo", "name": name},
                        headers=auth(keys["alice"]))
        assert r.status_code == 422, (name, r.status_code, r.text)


def test_a_pairs_process_and_fencing_token_are_shown_to_operators_alone(client, keys, character):
    ch = character("status")
    user, op = auth(keys["alice"]), auth(keys["operator"])
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Hallo", "turn_id": uuid.uuid4().hex}, headers=user)
    assert r.status_code == 200, r.text
    mine = client.get(f"/v1/pairs/alice/{ch}/status", headers=user).json()
    assert mine["live"] is True and not {"pid", "token", "process"} & set(mine), mine
    theirs = client.get(f"/v1/pairs/alice/{ch}/status", headers=op).json()
    assert theirs["live"] is True and {"pid", "token", "process"} <= set(theirs), theirs
