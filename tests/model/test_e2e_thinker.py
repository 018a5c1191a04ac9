"""The Thinker on the real tiny model: a turn with checkable facts runs the reasoning path, the
decision entry, the turn's result and the pair's history agree on what the Thinker decided, and
a Thinker that could not decide brings its own retry as a second message — nobody sends it by
hand. (The retry on a scripted engine, outcome by outcome: tests/stores/test_thinker_node.py and
tests/app/test_e2e_events.py.)"""

import pytest

from memory import pg
from pipeline.nodes import thinker
from tests.conftest import auth, pg_call, wait_for

pytestmark = pytest.mark.e2e


def _switches(settings, user, ch, turn_id) -> dict[str, dict]:
    rows = wait_for(lambda: pg_call(settings.database_url, pg.pipeline_rows, user, ch, turn_id))
    return {x["entscheidung"]: x for x in rows if x["art"] == "switch"}


def _history(client, keys, ch) -> list[tuple[str, str]]:
    turns = client.get(f"/v1/pairs/alice/{ch}/turns", headers=auth(keys["alice"])).json()["turns"]
    return [(t["rolle"], t["turn_id"]) for t in turns]


def test_a_turn_with_facts_runs_the_thinker_and_its_outcome_has_its_effect(client, keys, settings, character):
    ch = character("thinker")
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Am Montag um 14 Uhr habe ich einen Zahnarzttermin."},
                    headers=auth(keys["alice"]))
    assert r.status_code == 200, r.text
    first = r.json()
    switches = _switches(settings, "alice", ch, first["turn_id"])
    check = switches["thinker.schnellcheck"]
    assert check["outcome"] == "reasoning" and {"am", "montag", "um", "uhr"} <= set(check["inputs"]["indikatoren_reiz"])
    result = switches["thinker.ergebnis"]
    outcome, inputs = result["outcome"], result["inputs"]
    assert 1 <= inputs["iterationen"] <= thinker.MAX_ITERATIONEN and inputs["nachfass"] <= thinker.NACHFASS_MAX
    # the result the person gets says what the decision entry says
    assert first["pruefung"] == {"status": outcome, "iterationen": inputs["iterationen"], "werkzeuge": inputs["werkzeuge"]}
    assert first["reply"].strip()
    if outcome != "self_trigger":
        assert first["nachricht_folgt"] is False
        assert _history(client, keys, ch) == [("user", first["turn_id"]), ("assistant", first["turn_id"])]
        return

    # it could not decide: both follow-ups used, a second message announced and sent by the pair itself
    assert inputs["nachfass"] == thinker.NACHFASS_MAX and first["nachricht_folgt"] is True
    retry_id = f"{first['turn_id']}-retry"
    wait_for(lambda: ("assistant", retry_id) in _history(client, keys, ch), timeout=240)
    assert _history(client, keys, ch) == [("user", first["turn_id"]), ("assistant", first["turn_id"]),
                                          ("assistant", retry_id)]
    retry = _switches(settings, "alice", ch, retry_id)
    assert retry["thinker.schnellcheck"]["inputs"]["unsicher_retry"] is True
    assert retry.get("thinker.ergebnis", {}).get("outcome") != "self_trigger"  # a retry never triggers again
