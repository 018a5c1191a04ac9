"""A Character Card's lorebook and kept fields against the API bounds, over HTTP: too many keys in
an entry, a key too long, JSON nested too deeply are refused with 422 naming where, and nothing
is stored."""
import json
import uuid

import pytest

from tests.conftest import auth

pytestmark = pytest.mark.e2e


def _card(cid: str, entry: dict | None = None, extensions: dict | None = None) -> bytes:
    book = {"entries": [{"keys": ["ok"], "content": "fine"}] + ([entry] if entry else [])}
    return json.dumps({"spec": "chara_card_v2", "data": {
        "name": cid, "description": "x", "first_mes": "Moin.", "character_book": book,
        "extensions": extensions or {}}}).encode()


def _tief(n: int) -> dict:
    d: dict = {}
    x = d
    for _ in range(n):
        x["a"] = {}
        x = x["a"]
    return d


@pytest.mark.parametrize("entry, extensions, fragment", [
    ({"keys": [f"k{i}" for i in range(10_000)], "content": "x", "name": "Viele"}, None,
     "data.character_book.entries[1] ('Viele'): 10000 keys; at most 100 per entry"),
    ({"keys": ["b" * 100_000], "content": "x"}, None, "entries[1]: keys[0] is 100000 characters long; at most 500"),
    (None, {"tief": _tief(300)}, "data.extensions.tief.a.a"),
])
def test_a_card_beyond_the_bounds_is_refused_and_not_stored(client, keys, entry, extensions, fragment):
    op = auth(keys["operator"])
    cid = f"grenze-{uuid.uuid4().hex[:6]}"
    r = client.post(f"/v1/characters/import?character_id={cid}", content=_card(cid, entry, extensions),
                    headers={**op, "Content-Type": "application/json"})
    assert r.status_code == 422 and fragment in r.json()["error"]["message"], r.text
    assert client.get(f"/v1/characters/{cid}", headers=op).status_code == 404
    # the same card within the bounds is taken, and reads back
    r = client.post(f"/v1/characters/import?character_id={cid}", content=_card(cid, extensions={"tief": _tief(20)}),
                    headers={**op, "Content-Type": "application/json"})
    assert r.status_code == 201, r.text
    assert client.get(f"/v1/characters/{cid}", headers=op).status_code == 200
    client.delete(f"/v1/characters/{cid}", headers=op)
