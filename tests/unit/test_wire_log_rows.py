"""The shapes that cross the runner ↔ node deployment seam and the outbox typed (core/wire.py): a
turn's pipeline_log rows (`NodeLogRow | SwitchLogRow` on `art`), the partial turn states a node
deployment gets and gives back (`TurnRecords`), and the result's timings (`TurnTimings`, whose
JSON keeps today's keys)."""
import json

import pytest
from pydantic import ValidationError

from core.result import TurnResult, TurnTimings
from core.state import PairRecord, Stimulus, TurnState
from core.wire import (NodeLogRow, NodeRunRequest, NodeRunResult, SwitchLogRow, TurnJob, TurnRecords, job_json,
                       read_job)
from pipeline.trace import TurnTrace

AT = "2026-12-06T10:00:00+00:00"


def _trace() -> TurnTrace:
    t = TurnTrace("u", "nova", "t1")
    t.decision("router", "router.management", "nein", {"flags": 0}, threshold=0.5)
    t.node_row("router", 12.3456, start_ms=1.0)
    return t


def test_the_trace_records_typed_rows_and_finds_its_decisions():
    t = _trace()
    switch, node = t.rows
    assert isinstance(switch, SwitchLogRow) and isinstance(node, NodeLogRow)
    assert (switch.seq, switch.entscheidung, switch.outcome, switch.threshold) == (0, "router.management", "nein", 0.5)
    assert (node.seq, node.art, node.duration_ms, node.inputs) == (1, "node", 12.346, {"start_ms": 1.0, "end_ms": 13.35})
    assert t.decisions() == [switch] and t.decisions("router.management") == [switch] and t.decisions("x") == []
    assert t.node_runs() == [node]


def test_a_turn_job_carries_its_rows_typed_through_the_outbox():
    t = _trace()
    job = TurnJob.model_validate({"turn": {
        "user_id": "u", "character_id": "nova", "turn_id": "t1", "user_text": "Hallo", "reply": "Hi",
        "result": {"turn_id": "t1", "user_id": "u", "character_id": "nova", "character_name": "Nova", "reply": "Hi",
                   "herkunft": "user", "model": "m", "usage": {}, "created_at": AT},
        "created_at": AT}, "log": t.rows})
    again = read_job(job_json(job))
    assert again.log == t.rows and [type(r) for r in again.log] == [SwitchLogRow, NodeLogRow]
    # the release before reads rows by key: each row keeps the keys it had as a dict
    raw = json.loads(job_json(job))["log"]
    assert set(raw[0]) == {"seq", "node", "art", "entscheidung", "outcome", "inputs", "threshold", "at"}
    assert set(raw[1]) == {"seq", "node", "art", "outcome", "duration_ms", "inputs", "at"}


def test_a_version_1_jobs_rows_read_and_a_key_unknown_here_is_ignored():
    v1 = {"kind": "turn", "turn": {
        "user_id": "u", "character_id": "nova", "turn_id": "t1", "user_text": "Hallo", "reply": "Hi",
        "result": {"turn_id": "t1", "user_id": "u", "character_id": "nova", "character_name": "Nova", "reply": "Hi",
                   "herkunft": "user", "model": "m", "usage": {}, "created_at": AT},
        "created_at": AT},
        "log": [{"seq": 0, "node": "responder", "art": "switch", "entscheidung": "responder.ergebnis",
                 "outcome": "antwort", "inputs": {}, "threshold": None, "at": AT},
                {"seq": 1, "node": "responder", "art": "node", "outcome": "ok", "duration_ms": 4.5,
                 "inputs": {"start_ms": 0.0, "end_ms": 4.5}, "at": AT, "spaeter": 1}]}
    job = read_job(v1)
    assert isinstance(job, TurnJob) and job.v == 1
    switch, node = job.log
    assert switch.entscheidung == "responder.ergebnis" and node.duration_ms == 4.5
    with pytest.raises(ValidationError):  # a row of no known kind is refused, not stored half
        read_job({**v1, "log": [{"seq": 0, "node": "x", "art": "sonst", "at": AT}]})


def test_turn_records_hold_the_turn_states_records_and_which_were_given():
    assert list(TurnRecords.model_fields) == list(TurnState.model_fields)
    s = Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt="hi")
    rec = TurnRecords(stimulus=s, pair=None)
    assert rec.set_records() == {"stimulus": s, "pair": None}  # a record written as None is kept as given
    with pytest.raises(ValidationError):
        TurnRecords(unbekannt={})
    with pytest.raises(ValidationError):  # a record is its type, not any dict
        TurnRecords(pair={"nicht": "ein PairRecord"})
    out = NodeRunResult(update=TurnRecords(pair=PairRecord(character_name="Nova")), rows=_trace().rows)
    assert isinstance(out.update.pair, PairRecord) and isinstance(out.rows[0], SwitchLogRow)
    assert NodeRunRequest(node="db_zugriff", records=rec).records.stimulus == s


def _result(**extra) -> TurnResult:
    return TurnResult.model_validate({"turn_id": "t1", "user_id": "u", "character_id": "nova",
                                      "character_name": "Nova", "reply": "Hi", "herkunft": "user", "model": "m",
                                      "usage": {}, "created_at": AT, **extra})


def test_the_timings_are_typed_and_their_json_keeps_its_keys():
    t = _trace()
    t.llm_done(10.0, 5, 2, "router")
    timings = t.timings()
    assert isinstance(timings, TurnTimings) and timings.nodes_llm_ms == {"router": 10.0} and timings.llm_calls == 1
    body = _result(timings=timings).body()
    assert list(body["timings"]) == ["total_ms", "llm_ms", "embed_ms", "llm_calls", "prompt_tokens",
                                     "completion_tokens", "nodes_ms", "nodes_start_ms", "nodes_llm_ms"]
    assert body["timings"]["nodes_ms"] == {"router": 12.35} and body["timings"]["prompt_tokens"] == 5
    # a stored result reads back with the keys it was stored with: none, empty, or one of a later release
    assert "timings" not in _result().body()
    assert _result(timings={}).body()["timings"] == {}
    later = _result(timings={"total_ms": 3.0, "queue_ms": 1.0}).body()["timings"]
    assert later == {"total_ms": 3.0, "queue_ms": 1.0}
    assert isinstance(_result(timings={"total_ms": 3.0}).timings.total_ms, float)
