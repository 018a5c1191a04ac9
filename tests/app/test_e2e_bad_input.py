"""Bad input gets a clear 4xx and stores nothing."""
import pytest

from memory import pg, session
from tests.conftest import auth, pg_call, redis_call

pytestmark = pytest.mark.e2e

PAIR = "/v1/pairs/alice/badpair/turns"


def _stored(settings):
    return (redis_call(settings.redis_url, session.count_turns, "alice", "badpair"),
            pg_call(settings.database_url, pg.count_turn_records, "alice", "badpair"))


@pytest.mark.parametrize("body,fragment", [
    ({}, "text"),
    ({"text": ""}, "empty"),
    ({"text": "   \n"}, "empty"),
    ({"text": 123}, "text"),
    ({"text": "hi", "mood": "happy"}, "mood"),
    ({"text": "hi", "turn_id": "not an id!"}, "turn_id"),
])
def test_bad_bodies(client, keys, settings, body, fragment):
    before = _stored(settings)
    r = client.post(PAIR, json=body, headers=auth(keys["alice"]))
    assert r.status_code == 422, r.text
    assert fragment in r.json()["error"]["message"]
    assert _stored(settings) == before


def test_oversized_text(client, keys, settings):
    r = client.post(PAIR, json={"text": "x" * (settings.max_text_chars + 1)}, headers=auth(keys["alice"]))
    assert r.status_code == 422 and "longer than" in r.json()["error"]["message"]
    assert _stored(settings) == (0, 0)


def test_malformed_json(client, keys, settings):
    r = client.post(PAIR, content=b'{"text": "hi"', headers={**auth(keys["alice"]), "Content-Type": "application/json"})
    assert r.status_code == 422
    assert _stored(settings) == (0, 0)


@pytest.mark.parametrize("path", ["/v1/pairs/al%20ice/nova/turns", "/v1/pairs/alice/-nova/turns",
                                  "/v1/pairs/" + "a" * 65 + "/nova/turns"])
def test_invalid_ids(client, keys, path):
    r = client.post(path, json={"text": "hi"}, headers=auth(keys["operator"]))
    assert r.status_code == 422, r.text


def test_openai_route_bad_input(client, keys, settings):
    h = auth(keys["alice"])
    no_user_msg = {"model": "badpair", "messages": [{"role": "system", "content": "x"}]}
    r = client.post("/v1/chat/completions", json=no_user_msg, headers=h)
    assert r.status_code == 422 and "user message" in r.json()["error"]["message"]
    r = client.post("/v1/chat/completions", json={"model": "badpair", "messages": [], "foo": 1}, headers=h)
    assert r.status_code == 422
    assert _stored(settings) == (0, 0)


def test_openai_route_rejects_a_bad_turn_id_header(client, keys, settings):
    r = client.post("/v1/chat/completions", headers={**auth(keys["alice"]), "X-Turn-Id": "bad id/../x"},
                    json={"model": "badpair", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 422
    assert _stored(settings) == (0, 0)


@pytest.mark.parametrize("header", [b"Bearer \xa0", b"Bearer", b"Basic abc", b"\xa0", b"Bearer \xa0\xa0x"])
def test_a_malformed_authorization_is_refused_not_a_server_error(client, header):
    r = client.get("/v1/characters", headers={"Authorization": header})
    assert r.status_code == 401 and r.json()["error"]["type"] == "unauthorized", r.text


def test_an_upload_in_a_charset_that_is_no_text_encoding(client, keys):
    r = client.post("/v1/pairs/alice/nova/files", content=b"Uryyb", params={"name": "x.txt"},
                    headers={**auth(keys["alice"]), "Content-Type": "text/plain; charset=rot13"})
    assert r.status_code == 422 and "charset 'rot13' is not read; name one of utf-8" in r.json()["error"]["message"], \
        r.text


@pytest.mark.parametrize("card, fragment", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"name": "Zahl", "description": ' + b"7" * 5000 + b"}", "digits"),
])
def test_a_card_built_to_break_the_parser(client, keys, card, fragment):
    r = client.post("/v1/characters/import", content=card,
                    headers={**auth(keys["operator"]), "Content-Type": "application/json"})
    assert r.status_code == 422 and fragment in r.json()["error"]["message"], r.text
