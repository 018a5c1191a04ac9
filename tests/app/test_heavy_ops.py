"""A user's heavy operations are admitted before they run (serve/schwere_ops.py): one export (or
erasure) of a user at a time — a second one while it runs gets 429 with Retry-After, another
user's export is not held up, and a finished export gives its place back — and the turn
operations (rewind, regenerate, edit, forgetting a memory) at most so many a minute per user."""
import uuid

import pytest

from memory import pg
from serve import schwere_ops
from tests.conftest import auth, pg_call, redis_call

pytestmark = pytest.mark.e2e


def _user(settings) -> tuple[str, str]:
    user = f"schwer-{uuid.uuid4().hex[:6]}"
    return user, pg_call(settings.database_url, pg.create_api_key, user)


def _refused(r) -> None:
    assert r.status_code == 429, r.text
    assert r.json()["error"]["type"] == "limit" and int(r.headers["Retry-After"]) >= 1


def test_a_second_export_of_the_same_user_is_refused_while_the_first_runs(client, settings):
    (tom, tom_key), (ida, ida_key) = _user(settings), _user(settings)
    # an export of tom's runs (on any ingress replica): it holds tom's place
    lease = redis_call(settings.redis_url, schwere_ops.zulassen, settings, tom, "export")
    _refused(client.get(f"/v1/users/{tom}/export", headers=auth(tom_key)))
    _refused(client.delete(f"/v1/users/{tom}", headers=auth(tom_key)))  # an erasure waits for it too
    r = client.get(f"/v1/users/{ida}/export", headers=auth(ida_key))  # another user's export runs
    assert r.status_code == 200 and r.json()["user_id"] == ida, r.text

    redis_call(settings.redis_url, schwere_ops.freigeben, tom, "export", lease)  # the first export ends
    for _ in range(2):  # one after the other: each export, once sent, gives its place back
        r = client.get(f"/v1/users/{tom}/export", headers=auth(tom_key))
        assert r.status_code == 200 and r.json()["user_id"] == tom, r.text


def test_turn_operations_are_bounded_per_minute_per_user(client, settings, character):
    ch = character("schwer")
    (tom, tom_key), (ida, ida_key) = _user(settings), _user(settings)

    async def a_minute_of_operations(r):
        for _ in range(settings.turn_ops_per_minute_per_user):
            await schwere_ops.freigeben(r, tom, "turn", await schwere_ops.zulassen(r, settings, tom, "turn"))

    said = []
    for text in ("Ich heisse Tom.", "Ich segle gern."):  # a conversation the OpenAI door can ask again for
        r = client.post(f"/v1/pairs/{tom}/{ch}/turns", json={"text": text}, headers=auth(tom_key))
        assert r.status_code == 200, r.text
        said += [{"role": "user", "content": text}, {"role": "assistant", "content": r.json()["reply"]}]
    redis_call(settings.redis_url, a_minute_of_operations)
    _refused(client.post(f"/v1/pairs/{tom}/{ch}/turns/rewind", json={"n": 1}, headers=auth(tom_key)))
    # the OpenAI door's regenerate (the same conversation again, SillyTavern's swipe) is a turn operation too
    _refused(client.post("/v1/chat/completions", json={"model": ch, "messages": said[:-1]}, headers=auth(tom_key)))
    _refused(client.post(f"/v1/pairs/{tom}/{ch}/turns/regenerate", headers=auth(tom_key)))
    _refused(client.delete(f"/v1/pairs/{tom}/{ch}/memories/notiz-1", headers=auth(tom_key)))
    assert int(client.post(f"/v1/pairs/{tom}/{ch}/turns/rewind", json={"n": 1},
                           headers=auth(tom_key)).headers["Retry-After"]) <= schwere_ops.FENSTER_S
    # another user's operation is admitted: it reaches the pair (which holds nothing to take back)
    r = client.post(f"/v1/pairs/{ida}/{ch}/turns/rewind", json={"n": 1}, headers=auth(ida_key))
    assert r.status_code == 409 and r.json()["error"]["type"] == "nothing_to_retract", r.text
    r = client.delete(f"/v1/pairs/{ida}/{ch}/memories/notiz-1", headers=auth(ida_key))
    assert r.status_code == 404, r.text
