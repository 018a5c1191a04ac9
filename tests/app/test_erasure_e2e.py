"""Erasure through the API: `DELETE /v1/users/{user}` leaves nothing of the user in any table or
key family (counted by memory/erasure.py before and after) and nothing of anyone else is touched;
`DELETE /v1/characters/{id}` takes every pair with her along, so a character made again under the
same id starts with nobody's history."""
import uuid

import pytest

from actors.background import erledigt_key
from memory import erasure, pg
from tests.conftest import auth, pg_call, redis_call, wait_for

pytestmark = pytest.mark.e2e


def _count(settings, user_id=None, character_id=None) -> dict[str, int]:
    rows = pg_call(settings.database_url, erasure.count_rows, user_id, character_id)
    keys = redis_call(settings.redis_url, erasure.count_keys, user_id, character_id)
    return {**rows, **keys}


def _stored(settings, user_id) -> dict[str, int]:
    """What is stored of a user, without the registry of live and evicted pair actors (an idle
    actor leaves it by its own clock)."""
    return {k: n for k, n in _count(settings, user_id=user_id).items()
            if k not in ("redis:pairs:live", "redis:pairs:evicted")}


def _talk(client, settings, user, key, ch, text) -> str:
    r = client.post(f"/v1/pairs/{user}/{ch}/turns", json={"text": text}, headers=auth(key))
    assert r.status_code == 200, r.text
    turn_id = r.json()["turn_id"]
    # the turn's background work has run: nothing of it is still on its way to a store
    wait_for(lambda: redis_call(settings.redis_url, lambda rd: rd.exists(erledigt_key(user, ch, turn_id))), timeout=90)
    wait_for(lambda: pg_call(settings.database_url, pg.turn_record, user, ch, turn_id) is not None, timeout=60)
    # and its jobs have left the outbox (a job is taken off the stream just after its work is done)
    wait_for(lambda: _count(settings, user_id=user)["redis:outbox"] == 0, timeout=60)
    return turn_id


def test_erasing_a_user_leaves_nothing_of_them_and_all_of_the_others(client, keys, settings, character):
    ch = character("erase")
    erin = f"erin-{uuid.uuid4().hex[:6]}"
    erin_key = pg_call(settings.database_url, pg.create_api_key, erin)
    for text in ("Ich heisse Erin und segle gern.", "Mein Bruder heisst Jonas."):
        _talk(client, settings, erin, erin_key, ch, text)
    fred = f"fred-{uuid.uuid4().hex[:6]}"
    fred_key = pg_call(settings.database_url, pg.create_api_key, fred)
    _talk(client, settings, fred, fred_key, ch, "Ich bin Fred.")
    before = _count(settings, user_id=erin)
    assert before["pg:turns"] == 2 and before["redis:session"] == 1 and before["pg:api_keys"] == 1
    assert before["pg:pipeline_log"] > 0 and before["redis:turnres"] == 2
    fred_before = _stored(settings, fred)

    # the export: the user's own key reads everything stored about them, as one JSON document
    r = client.get(f"/v1/users/{erin}/export", headers=auth(erin_key))
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    export = r.json()
    assert {t["user_text"] for t in export["postgres"]["turns"]} == {"Ich heisse Erin und segle gern.",
                                                                     "Mein Bruder heisst Jonas."}
    assert len(export["postgres"]["pipeline_log"]) == before["pg:pipeline_log"]
    assert any("Jonas" in e for e in export["redis"][f"session:{erin}:{ch}:turns"])
    assert client.get(f"/v1/users/{erin}/export", headers=auth(fred_key)).status_code == 403

    assert client.delete(f"/v1/users/{erin}", headers=auth(fred_key)).status_code == 403  # not fred's to erase
    r = client.delete(f"/v1/users/{erin}", headers=auth(erin_key))
    assert r.status_code == 200, r.text
    gone = r.json()["by_store"]
    assert (gone["pg:turns"], gone["pg:pipeline_log"], gone["pg:api_keys"]) == (2, before["pg:pipeline_log"], 1)
    assert {k: n for k, n in _count(settings, user_id=erin).items() if n} == {}
    assert _stored(settings, fred) == fred_before
    # the key went with the user; an operator sees an empty history
    assert client.get(f"/v1/pairs/{erin}/{ch}/turns", headers=auth(erin_key)).status_code == 401
    turns = client.get(f"/v1/pairs/{erin}/{ch}/turns", headers=auth(keys["operator"])).json()["turns"]
    assert turns == []


def test_a_character_made_again_under_the_same_id_inherits_nobodys_history(client, keys, settings, character):
    ch = character("mira")
    _talk(client, settings, "bob", keys["bob"], ch, "Mein Geheimnis: ich habe Angst vor Hunden.")
    other = character("other")
    _talk(client, settings, "bob", keys["bob"], other, "Hallo.")
    assert _count(settings, character_id=ch)["pg:turns"] == 1
    op = auth(keys["operator"])
    assert client.delete(f"/v1/characters/{ch}", headers=op).status_code == 204
    assert {k: n for k, n in _count(settings, character_id=ch).items() if n} == {}
    assert _count(settings, character_id=other)["pg:turns"] == 1  # bob's pair with another character stays
    r = client.post("/v1/characters", json={"character_id": ch, "name": "Mira"}, headers=op)
    assert r.status_code == 201, r.text
    history = client.get(f"/v1/pairs/bob/{ch}/turns", headers=auth(keys["bob"])).json()["turns"]
    assert history == []
    r = client.post(f"/v1/pairs/bob/{ch}/turns", json={"text": "Kennst du mich?"}, headers=auth(keys["bob"]))
    assert r.status_code == 200, r.text
    texts = [t["inhalt"] for t in client.get(f"/v1/pairs/bob/{ch}/turns", headers=auth(keys["bob"])).json()["turns"]]
    assert not any("Hunden" in t for t in texts)
