"""The human's name and a replayed message's date reach Nova's long-term memory: a client that sends
the name (the native `name`, the OpenAI door's `name` of the user message, as SillyTavern's
"completion object" names behaviour sends it) has his words remembered under it instead of
`Person B`; an operator replaying a conversation from elsewhere dates its messages (`zeitpunkt`),
and the memories and the history carry that date. Only an operator key dates a message, and never
into the future."""
import uuid

import pytest
from openai import OpenAI

from memory import pg
from tests.conftest import auth, pg_call, wait_for
from tests.app.test_turn_ops_e2e import _fertig

pytestmark = pytest.mark.e2e


def _gespraech(client, key, user, ch) -> list[str]:
    r = client.get(f"/v1/pairs/{user}/{ch}/memories", headers=auth(key))
    assert r.status_code == 200, r.text
    return [i["inhalt"] for i in r.json()["memories"] if i["art"] == "gespraech"]


def _person(settings) -> tuple[str, str]:
    user = f"caro{uuid.uuid4().hex[:6]}"
    return user, pg_call(settings.database_url, pg.create_api_key, user)


def test_a_named_and_dated_message_is_remembered_under_the_name_and_date(client, settings, keys, character):
    ch = character("name")
    user, key = _person(settings)
    text = "Ich war gestern beim Konzert am See."
    r = client.post(f"/v1/pairs/{user}/{ch}/turns", headers=auth(keys["operator"]),
                    json={"text": text, "turn_id": "nm1", "name": " Caroline ", "zeitpunkt": "2023-05-08T12:00:00Z"})
    assert r.status_code == 200, r.text
    _fertig(settings, user, ch, "nm1")
    texts = wait_for(lambda: _gespraech(client, key, user, ch), timeout=60)
    assert f"[08 May 2023] Caroline: {text}" in texts, texts
    assert not any("Person B" in t for t in texts), texts
    history = client.get(f"/v1/pairs/{user}/{ch}/turns", headers=auth(key)).json()["turns"]
    assert history[0]["inhalt"] == text and history[0]["time"].startswith("2023-05-08T12:00:00"), history[0]
    assert history[1]["rolle"] == "assistant" and history[1]["time"].startswith("2023-05-08T12:00:00"), history[1]
    # the turn's record in Postgres keeps both, so a history rebuilt from it gives them back
    body = r.json()
    assert body["name"] == "Caroline" and body["zeitpunkt"].startswith("2023-05-08T12:00:00"), body
    record = pg_call(settings.database_url, pg.recent_turn_records, user, ch, 5)[-1].result
    assert (record.name, record.zeitpunkt) == (body["name"], body["zeitpunkt"]), record
    # the replay goes on in order
    r = client.post(f"/v1/pairs/{user}/{ch}/turns", headers=auth(keys["operator"]),
                    json={"text": "Die Band war grossartig.", "turn_id": "nm1b", "name": "Caroline",
                          "zeitpunkt": "2023-05-08T12:01:00Z"})
    assert r.status_code == 200, r.text
    _fertig(settings, user, ch, "nm1b")

    # without a name: Person B, today
    r = client.post(f"/v1/pairs/{user}/{ch}/turns", headers=auth(key), json={"text": "Und heute regnet es.",
                                                                             "turn_id": "nm2"})
    assert r.status_code == 200, r.text
    _fertig(settings, user, ch, "nm2")
    texts = _gespraech(client, key, user, ch)
    assert any(t.endswith("] Person B: Und heute regnet es.") and "2023" not in t for t in texts), texts

    # a replayed message goes after the pair's last one, not between
    r = client.post(f"/v1/pairs/{user}/{ch}/turns", headers=auth(keys["operator"]),
                    json={"text": "Noch etwas von damals.", "zeitpunkt": "2023-05-09T12:00:00Z"})
    assert r.status_code == 422 and "before the pair's last message" in r.text, r.text


def test_a_regenerated_or_edited_message_keeps_its_name(client, settings, character):
    ch = character("name")
    user, key = _person(settings)
    r = client.post(f"/v1/pairs/{user}/{ch}/turns", headers=auth(key),
                    json={"text": "Ich male gern Sonnenuntergaenge.", "turn_id": "rg1", "name": "Caroline"})
    assert r.status_code == 200, r.text
    _fertig(settings, user, ch, "rg1")
    r = client.post(f"/v1/pairs/{user}/{ch}/turns/regenerate", headers=auth(key), json={"turn_id": "rg2"})
    assert r.status_code == 200, r.text
    _fertig(settings, user, ch, "rg2")
    texts = _gespraech(client, key, user, ch)
    assert [t for t in texts if "Sonnenuntergaenge" in t] == [
        t for t in texts if t.endswith("] Caroline: Ich male gern Sonnenuntergaenge.")] and texts, texts
    r = client.post(f"/v1/pairs/{user}/{ch}/turns/edit", headers=auth(key),
                    json={"turn_id": "rg3", "text": "Ich male gern Berge."})
    assert r.status_code == 200, r.text
    _fertig(settings, user, ch, "rg3")
    texts = _gespraech(client, key, user, ch)
    assert any(t.endswith("] Caroline: Ich male gern Berge.") for t in texts), texts
    assert not any("Sonnenuntergaenge" in t for t in texts), texts


def test_only_an_operator_dates_a_message_and_never_ahead(client, settings, keys, character):
    ch = character("name")
    user, key = _person(settings)
    body = {"text": "Hallo.", "zeitpunkt": "2023-05-08T12:00:00Z"}
    r = client.post(f"/v1/pairs/{user}/{ch}/turns", headers=auth(key), json=body)
    assert r.status_code == 403 and "zeitpunkt" in r.text, r.text
    for bad in ("2999-01-01T00:00:00Z", "2023-05-08T12:00:00", "0001-01-01T00:00:00+01:00"):
        r = client.post(f"/v1/pairs/{user}/{ch}/turns", headers=auth(keys["operator"]), json={**body, "zeitpunkt": bad})
        assert r.status_code == 422 and "zeitpunkt" in r.text, (bad, r.text)
    for bad in ("Caro: line", "A\nB", "x" * 65, "[Caro]", "Person B"):
        r = client.post(f"/v1/pairs/{user}/{ch}/turns", headers=auth(key), json={"text": "Hallo.", "name": bad})
        assert r.status_code == 422 and "name" in r.text, (bad, r.text)
    # nothing of the refused requests was stored
    assert client.get(f"/v1/pairs/{user}/{ch}/turns", headers=auth(key)).json()["turns"] == []


def test_the_openai_door_takes_the_name_of_the_user_message(system, client, settings, character):
    ch = character("name")
    user, key = _person(settings)
    oa = OpenAI(base_url=f"{system.url}/v1", api_key=key, max_retries=0, timeout=120)
    out = oa.chat.completions.create(model=ch, messages=[{"role": "user", "name": "Caroline",
                                                          "content": "Mein Kater heisst Oskar."}],
                                     extra_headers={"X-Turn-Id": "nmoa1"})
    assert out.choices[0].message.content
    _fertig(settings, user, ch, "nmoa1")
    texts = _gespraech(client, key, user, ch)
    assert any(t.endswith("] Caroline: Mein Kater heisst Oskar.") for t in texts), texts
