"""The Thinker on the real tiny model: a turn with checkable facts runs the reasoning path and the
decision entries say what happened; the retry of a turn arrives as a second message."""

import pytest

from memory import pg
from pipeline.nodes import thinker
from tests.conftest import auth, pg_call, wait_for

pytestmark = pytest.mark.e2e
OUTCOMES = {"ok", "korrektur", "korrektur_ohne_text", "max_iterationen", "self_trigger", "nachfass_erschoepft_im_retry",
            "aufruf_gescheitert"}


def _rows(settings, user, ch, turn_id):
    return wait_for(lambda: pg_call(settings.database_url, pg.pipeline_rows, user, ch, turn_id))


def test_a_turn_with_facts_runs_the_thinker_and_its_retry_is_a_second_message(client, keys, settings, character):
    ch = character("thinker")
    text = "Am Montag um 14 Uhr habe ich einen Zahnarzttermin."
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": text}, headers=auth(keys["alice"]))
    assert r.status_code == 200, r.text
    first = r.json()
    switches = {x["entscheidung"]: x for x in _rows(settings, "alice", ch, first["turn_id"]) if x["art"] == "switch"}
    check = switches["thinker.schnellcheck"]
    assert check["outcome"] == "reasoning" and {"am", "montag", "um", "uhr"} <= set(check["inputs"]["indikatoren_reiz"])
    result = switches["thinker.ergebnis"]
    assert result["outcome"] in OUTCOMES and 1 <= result["inputs"]["iterationen"] <= thinker.MAX_ITERATIONEN
    assert first["reply"].strip()

    # the retry the last resort would queue, sent as the operator's continue event
    r = client.post(f"/v1/pairs/alice/{ch}/events", headers=auth(keys["operator"]), json={
        "kind": "continue", "user_prompt": text, "turn_id": first["turn_id"], "reiz_herkunft": "user",
        "thinker_unsicher_retry": True})
    assert r.status_code == 200, r.text
    retry = r.json()
    assert retry["turn_id"] == f"{first['turn_id']}-retry" and retry["ursprung_turn_id"] == first["turn_id"]
    assert retry["herkunft"] == "self_trigger" and not retry["nachricht_folgt"]
    retry_switches = {x["entscheidung"]: x for x in _rows(settings, "alice", ch, retry["turn_id"]) if x["art"] == "switch"}
    assert retry_switches["thinker.schnellcheck"]["inputs"]["unsicher_retry"] is True
    assert retry_switches.get("thinker.ergebnis", {}).get("outcome") != "self_trigger"
    turns = client.get(f"/v1/pairs/alice/{ch}/turns", headers=auth(keys["alice"])).json()["turns"]
    # the human's message once, then two messages of Nova: the first reply and the retry
    assert [(t["rolle"], t["turn_id"]) for t in turns] == [
        ("user", first["turn_id"]), ("assistant", first["turn_id"]), ("assistant", retry["turn_id"])]
    assert turns[2]["inhalt"] == retry["reply"]
