"""Characters over HTTP against the real system: the resource routes with their keys and errors,
no improvised strangers (404, no pair actor), and a Character Card imported from a PNG that
holds a conversation: its greeting opens it, its persona stands in the responder's prompt, its
lorebook entry is found by a question about it, and the export gives the card back."""
import base64
import io
import json
import uuid

import pytest
from PIL import Image, PngImagePlugin
from ray import serve

from actors.activation import pair_actor
from memory import session
from tests.conftest import auth, redis_call

pytestmark = pytest.mark.e2e


def _cid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_character_resource_routes(client, keys):
    op, user = auth(keys["operator"]), auth(keys["alice"])
    listed = client.get("/v1/characters", headers=user)
    assert listed.status_code == 200 and "nova" in [c["character_id"] for c in listed.json()["characters"]]
    cid = _cid("ole")
    body = {"character_id": cid, "name": "Ole", "identitaet": "Ein alter Fischer.", "begruessung": "Moin."}
    assert client.post("/v1/characters", json=body, headers=user).status_code == 403  # a user key only reads
    r = client.post("/v1/characters", json=body, headers=op)
    assert r.status_code == 201, r.text
    assert r.json()["identitaet"] == "Ein alter Fischer." and r.json()["sprechweise"] == ""
    dup = client.post("/v1/characters", json=body, headers=op)
    assert dup.status_code == 409 and f"PATCH /v1/characters/{cid}" in dup.json()["error"]["message"]
    for bad, fragment in [({**body, "character_id": "-x"}, "character_id"), ({"character_id": _cid("x")}, "name"),
                          ({**body, "character_id": _cid("x"), "name": "O\x00le"}, "control characters"),
                          ({**body, "character_id": _cid("x"), "sprechweise": "x" * 2001}, "sprechweise"),
                          ({**body, "character_id": _cid("x"), "alter": 3}, "alter")]:
        r = client.post("/v1/characters", json=bad, headers=op)
        assert r.status_code == 422 and fragment in r.json()["error"]["message"], (bad, r.text)
    assert client.get(f"/v1/characters/{cid}", headers=user).json()["name"] == "Ole"
    r = client.patch(f"/v1/characters/{cid}", json={"sprechweise": "knapp"}, headers=op)
    assert r.status_code == 200 and r.json()["sprechweise"] == "knapp" and r.json()["begruessung"] == "Moin."
    assert client.patch(f"/v1/characters/{cid}", json={}, headers=op).status_code == 422
    assert client.patch(f"/v1/characters/{cid}", json={"name": "X"}, headers=user).status_code == 403
    assert client.patch(f"/v1/characters/{_cid('none')}", json={"name": "X"}, headers=op).status_code == 404
    assert client.delete(f"/v1/characters/{cid}", headers=user).status_code == 403
    assert client.delete(f"/v1/characters/{cid}", headers=op).status_code == 204
    gone = client.get(f"/v1/characters/{cid}", headers=user)
    assert gone.status_code == 404 and "GET /v1/characters" in gone.json()["error"]["message"]
    assert client.delete(f"/v1/characters/{cid}", headers=op).status_code == 404


def test_unknown_character_gets_404_and_no_pair_actor(client, keys, settings, system):
    cid = _cid("stranger")
    user, op = auth(keys["alice"]), auth(keys["operator"])
    calls = [
        client.post(f"/v1/pairs/alice/{cid}/turns", json={"text": "Hallo"}, headers=user),
        client.post(f"/v1/pairs/alice/{cid}/turns", params={"stream": "true"}, json={"text": "Hallo"}, headers=user),
        client.get(f"/v1/pairs/alice/{cid}/turns", headers=user),
        client.get(f"/v1/pairs/alice/{cid}/status", headers=user),
        client.get(f"/v1/pairs/alice/{cid}/greeting", headers=user),
        client.post(f"/v1/pairs/alice/{cid}/events", json={"kind": "impulse", "eigener_gedanke": "Hm."}, headers=op),
        client.post("/v1/chat/completions", json={"model": cid, "messages": [{"role": "user", "content": "Hallo"}]},
                    headers=user),
    ]
    for r in calls:
        assert r.status_code == 404, (r.request.url, r.text)
        assert r.json()["error"]["type"] == "unknown_character" and "GET /v1/characters" in r.json()["error"]["message"]
    with pytest.raises(ValueError):
        pair_actor(settings, "alice", cid)


def _png_card(name: str) -> bytes:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": name, "description": "{{char}} ist Leuchtturmwaerterin auf Hallig Nordlicht.",
        "personality": "ruhig, trocken", "scenario": "{{user}} strandet bei Sturm an ihrer Tuer.",
        "first_mes": "Komm rein, {{user}}, bevor dich der Wind mitnimmt.",
        "mes_example": "<START>\n{{user}}: Wie alt ist der Turm?\n{{char}}: Aelter als meine Geduld.",
        "creator_notes": "", "system_prompt": "", "post_history_instructions": "", "alternate_greetings": [],
        "tags": ["see", "sturm"], "creator": "tests", "character_version": "1", "extensions": {},
        "character_book": {"extensions": {}, "entries": [
            {"keys": ["Fenja"], "content": "Fenja ist Miras Schwester und faehrt die Post-Faehre zur Hallig.",
             "extensions": {}, "enabled": True, "insertion_order": 0, "name": "Fenja"}]}}}
    meta = PngImagePlugin.PngInfo()
    meta.add_text("chara", base64.b64encode(json.dumps(card).encode()).decode())
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (30, 60, 90)).save(buf, "PNG", pnginfo=meta)
    return buf.getvalue()


def test_png_card_holds_a_conversation(client, keys, settings):
    op, user = auth(keys["operator"]), auth(keys["alice"])
    cid = _cid("mira")
    png = _png_card("Mira")
    assert client.post("/v1/characters/import", content=png, headers={**user, "Content-Type": "image/png"}).status_code == 403
    r = client.post("/v1/characters/import", params={"character_id": cid}, content=png,
                    headers={**op, "Content-Type": "image/png"})
    assert r.status_code == 201, r.text
    imp = r.json()
    assert imp["format"] == "chara_card_v2" and imp["quelle"] == "png" and imp["wissen_eintraege"] == 1
    assert imp["character"]["name"] == "Mira" and "data.tags" in imp["nicht_uebernommen"]
    again = client.post("/v1/characters/import", params={"character_id": cid}, content=png,
                        headers={**op, "Content-Type": "image/png"})
    assert again.status_code == 409 and "replace=true" in again.json()["error"]["message"]

    # the greeting opens a new pair once, and is the first message of its history
    g = client.get(f"/v1/pairs/alice/{cid}/greeting", headers=user).json()
    assert g["begruessung"] == "Komm rein, du, bevor dich der Wind mitnimmt." and g["neu_im_verlauf"] is True
    assert client.get(f"/v1/pairs/alice/{cid}/greeting", headers=user).json()["neu_im_verlauf"] is False
    hist = redis_call(settings.redis_url, session.load_turns, "alice", cid, 10)
    assert [(t["herkunft"], t["sprecher"]) for t in hist] == [("begruessung", "Mira")]

    llm = serve.get_deployment_handle("LLM", app_name="novaberg")
    llm.record.remote(True).result()
    try:
        t = client.post(f"/v1/pairs/alice/{cid}/turns", json={"text": "Wie geht es eigentlich Fenja?"}, headers=user)
    finally:
        recorded = llm.record.remote(False).result()
    assert t.status_code == 200, t.text
    assert t.json()["character_name"] == "Mira"
    by_node: dict[str, list[str]] = {}
    for rec in recorded:
        req = rec["request"]
        by_node.setdefault(req.get("caller", "?"), []).append("\n".join(m["content"] for m in req["messages"]))
    responder = next(p for p in by_node["responder"] if "Leuchtturmwaerterin" in p)
    assert "Wie sie angelegt ist: Mira ist Leuchtturmwaerterin auf Hallig Nordlicht." in responder
    assert "Die Szene, in der die beiden sich begegnen: Person B strandet bei Sturm" in responder
    assert "Mira: Aelter als meine Geduld." in responder
    assert "Mira: Komm rein, du, bevor dich der Wind mitnimmt." in responder  # the greeting is in the history
    # the lorebook entry was found by the question about her and reached the content notes
    assert any("Fenja ist Miras Schwester" in p for p in by_node["verfasser"])
    # and the memory block the engine receives carries the seed's usage lines before its entries (004 §3a 3.4)
    assert all("[GEDAECHTNIS]\nInformationen aus dem Langzeitgedaechtnis und aktuellen Notizen.\n"
               "Nutze sie nur wenn die Nachricht von Person B darauf Bezug nimmt." in p for p in by_node["verfasser"])

    card = client.get(f"/v1/characters/{cid}/export", headers=user).json()
    assert card["spec"] == "chara_card_v2" and card["data"]["name"] == "Mira"
    assert card["data"]["tags"] == ["see", "sturm"]
    assert [e["keys"] for e in card["data"]["character_book"]["entries"]] == [["Fenja"]]


def test_card_import_errors(client, keys, settings):
    op = auth(keys["operator"])
    r = client.post("/v1/characters/import", content=b"{not json", headers={**op, "Content-Type": "application/json"})
    assert r.status_code == 422 and "not a PNG and not JSON" in r.json()["error"]["message"]
    r = client.post("/v1/characters/import", content=json.dumps({"spec": "chara_card_v2", "data": {"name": ""}}),
                    headers={**op, "Content-Type": "application/json"})
    assert r.status_code == 422 and "needs a name" in r.json()["error"]["message"]
    big = b"x" * (settings.character_card_max_bytes + 1)
    r = client.post("/v1/characters/import", content=big, headers={**op, "Content-Type": "application/json"})
    assert r.status_code == 413 and "at most" in r.json()["error"]["message"]
    assert client.post("/v1/characters/import", content=b"", headers=op).status_code == 422
