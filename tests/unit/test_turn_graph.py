"""The harness's turn figures from known inputs, and the stand-in engine through the real openai
backend: a fixed latency, schema-valid answers."""
import asyncio
import json
import time

import pytest

from bench import harness, standin, turn_graph


def _rec(caller, started, ms, pair="a", *contents):
    return {"request": {"pair": pair, "caller": caller, "messages": [{"role": "user", "content": c} for c in contents]},
            "usage": {}, "started": started, "ms": ms}


def test_each_turn_is_measured_against_its_own_critical_path():
    # a smalltalk turn (router → responder) and an agent turn whose planner adds two calls beside
    # gv_node: the mean of both would put the smalltalk turn against a path longer than its own
    rows = [{"client_ms": 450.0, "llm_pair": "a", "began": 10.0}, {"client_ms": 850.0, "llm_pair": "a", "began": 20.0}]
    recs = [_rec("router", 10.0, 200), _rec("responder", 10.2, 200),
            _rec("router", 20.0, 200), _rec("planner", 20.2, 200), _rec("planner", 20.4, 200),
            _rec("responder", 20.6, 200),
            _rec("praegung", 10.41, 200),  # the background's call: no chain node, no path
            _rec("router", 10.1, 200, "b")]  # another pair's call in the same time
    assert turn_graph.calls_of_turn(recs, "a", 10.0, 10.45) == {"router": 1, "responder": 1, "praegung": 1}
    got = turn_graph.turn_paths(rows, recs, 200.0, None)
    assert got["turn_over_critical_path"] == round((450 / 400 + 850 / 800) / 2, 3)
    assert got["own_ms_p50"] == 50.0 and got["own_share"] == round((50 / 450 + 50 / 850) / 2, 4)
    mean = turn_graph.critical_path_ms(turn_graph.calls_per_turn([r for r in recs if r["request"]["pair"] == "a"], 2),
                                       200.0)["critical_path_ms"]
    assert mean == 600.0  # against the mean path the smalltalk turn would have had no own time at all


def test_calls_in_flight_over_recorded_intervals():
    # [0,1] [0.5,1.5] [0.6,0.8] [3,4]: at most three at once; busy 2.5 s carrying 3.2 call-seconds
    recs = [_rec("a", 0.0, 1000), _rec("b", 0.5, 1000), _rec("c", 0.6, 200), _rec("d", 3.0, 1000)]
    got = turn_graph.in_flight(recs)
    assert got == {"max": 3, "mean_while_busy": round(3.2 / 2.5, 2)}
    assert turn_graph.in_flight([]) == {"max": 0, "mean_while_busy": None}


def test_the_critical_path_follows_the_chains_dependencies():
    one = {"sachlage": 1, "router": 1, "responder": 1}
    cp = turn_graph.critical_path_ms(one, 200)
    # sachlage runs beside the chain up to the router; router → … → responder are dependent
    assert cp == {"critical_path_ms": 400.0, "serial_ms": 600.0}
    both = turn_graph.critical_path_ms({"perzeption": 1, "gv_node": 1, "haltungsraum": 0, "planner": 2}, 100)
    assert both == {"critical_path_ms": 300.0, "serial_ms": 400.0}  # the planner's two calls beside gv_node
    calls = turn_graph.calls_per_turn([_rec("query_rewrite", 0, 1), _rec("router", 0, 1), _rec("router", 0, 1)], 2)
    assert calls == {"enricher": 0.5, "router": 1.0}


def test_graph_figures_and_where_the_prefix_broke():
    rows = [{"client_ms": 1100.0, "actor_ms": 1000.0, "reply_start_ms": 600.0, "llm_pair": "a", "began": 0.0},
            {"client_ms": 1300.0, "actor_ms": 1200.0, "reply_start_ms": 800.0, "llm_pair": "a", "began": 2.0}]
    recs = [_rec("router", 0, 200), _rec("responder", 0.2, 200), _rec("router", 2, 200), _rec("responder", 2.2, 200)]
    g = harness.graph_figures(rows, recs, 200.0, cpu_s=1.0)
    assert g["cpu_s_per_turn"] == 0.5 and g["reply_start_ms_p50"] in (700.0, 900.0)
    assert g["critical_path_ms"] == 400.0 and g["turn_over_critical_path"] == round(1200.0 / 400.0, 3)
    assert g["own_ms_p50"] == 800.0 and g["own_share"] == round((700 / 1100 + 900 / 1300) / 2, 4)
    # against the engine as it was met (each call's recorded time), not the nominal latency
    slow = [dict(r, ms=250.0) for r in recs]
    m = harness.graph_figures(rows, slow, 200.0, cpu_s=1.0)
    assert m["engine_call_ms_p50"] == 250.0 and m["critical_path_met_ms"] == 500.0
    assert m["own_met_ms_p50"] == 700.0 and m["own_share_met"] == round((600 / 1100 + 800 / 1300) / 2, 4)
    assert m["own_share"] == g["own_share"]
    reuse = harness.prefix_reuse([_rec("responder", 1, 1, "a", "[ROLLE]\nNova\n[SZENE]\nMontag"),
                                  _rec("responder", 2, 1, "a", "[ROLLE]\nNova\n[SZENE]\nDienstag")])
    assert reuse["responder"]["bricht_bei"] == "[SZENE]"


@pytest.fixture(scope="module")
def standin_url():
    from tests.conftest import _free_port

    port = _free_port()
    proc = standin.start(port, 150)
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()


def test_the_standin_answers_after_its_latency_with_what_the_schema_allows(standin_url):
    from core.settings import Settings
    from core.wire import ChatRequest
    from serve.llm_backends import OpenAICompatBackend

    schema = {"type": "object", "properties": {"management": {"type": "string", "enum": ["keins", "notizen"]},
                                               "needs_memory": {"type": "boolean"}}}

    async def go():
        backend = OpenAICompatBackend(Settings(openai_base_url=standin_url, llm_model="standin"))
        await backend.start()
        t0 = time.perf_counter()
        outs = await asyncio.gather(*(backend.chat(ChatRequest(messages=[{"role": "user", "content": "Hallo"}],
                                                               response_schema=schema, caller="router"))
                                      for _ in range(8)))
        plain = await backend.chat(ChatRequest(messages=[{"role": "user", "content": "Antworte mit ERGEBNIS: …"}]))
        return outs, plain, time.perf_counter() - t0

    outs, plain, wall = asyncio.run(go())
    assert all(json.loads(o.content) == {"management": "keins", "needs_memory": False} for o in outs)
    assert plain.content == "ERGEBNIS: OK"
    assert 0.3 <= wall < 3.0  # eight at once take one latency, not eight; the plain call another


def test_cpu_by_part_names_python_helpers_by_script_and_leaves_out_the_given_processes():
    import os
    import subprocess
    import sys

    import psutil

    helper = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        assert "python http.server" in turn_graph.cpu_by_part()  # a Python helper by its script, not as "python"
        assert "python http.server" not in turn_graph.cpu_by_part((helper.pid,))  # as the stand-in is left out
        me = turn_graph._label(psutil.Process(os.getpid()))
        assert me.startswith("python ") and me not in turn_graph.cpu_by_part()  # the measuring process never counts
    finally:
        helper.terminate()


def test_the_standin_words_free_text_anew_for_every_request_and_alike_for_the_same_one():
    schema = {"type": "object", "properties": {"selbst": {"type": "string"}, "datum": {"type": "string", "pattern": "x"},
                                               "art": {"type": "string", "enum": ["keins", "notizen"]}}}
    fmt = {"type": "json_schema", "json_schema": {"schema": schema}}
    a = {"messages": [{"role": "user", "content": "Turn 1"}], "response_format": fmt}
    b = {"messages": [{"role": "user", "content": "Turn 2"}], "response_format": fmt}
    fest = [json.loads(standin.answer(x)) for x in (a, b)]
    assert fest[0] == fest[1] == {"selbst": "x", "datum": "2026-01-01", "art": "keins"}
    neu_a, neu_a2, neu_b = (json.loads(standin.answer(x, "neu")) for x in (a, a, b))
    assert neu_a == neu_a2  # a retried call answers alike
    assert neu_a["selbst"] != neu_b["selbst"] and neu_a["selbst"].startswith("x")
    assert (neu_a["datum"], neu_a["art"]) == ("2026-01-01", "keins")  # patterns and enums as before
    plain = [standin.answer({"messages": [{"role": "user", "content": t}]}, "neu") for t in ("Hallo", "Tschuess")]
    assert plain[0] != plain[1] and all(p.startswith("Schoen, dass du da bist.") for p in plain)


def test_a_conversation_underway_has_its_earlier_turns_before_the_measured_ones():
    sc = harness.Scenario(pairs=2, turns=3, history=4)
    earlier = sc.earlier(0)
    assert earlier[0] == harness.WARM_UP and len(earlier) == 5
    assert all(any(t in texts for texts in harness.MESSAGES.values()) for t in earlier[1:])
    assert earlier == sc.earlier(0) and earlier != sc.earlier(1)  # reproducible, each pair its own
    assert len(harness.Scenario(history=0).earlier(0)) == 1
    assert harness.Scenario(warm=False, history=4).earlier(0) == []


@pytest.mark.parametrize("argv, complaint", [
    (["--standin-worte", "neu"], "--standin-worte words the stand-in engine's answers: it needs --standin-ms"),
    (["--cold", "--history", "3"], "--history needs the unmeasured turns that --cold leaves out"),
    (["--mix", "smalltalk"], "category=weight"),
    (["--mix", "plaudern=1"], "unknown message categories ['plaudern']"),
])
def test_options_the_harness_would_ignore_or_misread_are_refused_by_name(argv, complaint, capsys):
    with pytest.raises(SystemExit) as e:
        harness.parse_args(argv)
    assert e.value.code == 2 and complaint in capsys.readouterr().err


def test_the_standin_words_its_answers_as_before_unless_told_and_only_a_standin_has_words():
    assert harness.parse_args(["--standin-ms", "200"]).standin_worte == "fest"
    assert harness.parse_args(["--standin-ms", "200", "--standin-worte", "neu"]).standin_worte == "neu"
    plain = harness.parse_args([])
    assert plain.standin_worte is None and plain.mix == {"smalltalk": 0.4, "memory": 0.25, "agent": 0.2, "web": 0.15}


def test_where_a_turns_own_time_goes():
    rows = [{"client_ms": 1010.0, "actor_ms": 1000.0, "llm_ms": 820.0, "llm_calls": 4,
             "nodes_ms": {"router": 206.0, "enricher": 230.0, "reducer": 0.1},
             "nodes_llm_ms": {"router": 205.0, "enricher": 205.0}},
            {"client_ms": 1030.0, "actor_ms": 1000.0, "llm_ms": 840.0, "llm_calls": 4,
             "nodes_ms": {"router": 208.0, "enricher": 220.0, "reducer": 0.3},
             "nodes_llm_ms": {"router": 205.0, "enricher": 205.0}}]
    got = turn_graph.where_own_time_goes(rows)
    assert got["node_own_ms_p50"] == {"router": 2.0, "enricher": 20.0, "reducer": 0.2}
    assert got["llm_call_at_pair_ms_p50"] == 207.5 and got["client_beyond_actor_ms_p50"] == 20.0
    # a turn without the split (an older pair actor's result): no per-node figure, not zeros
    assert "node_own_ms_p50" not in turn_graph.where_own_time_goes([{**r, "nodes_llm_ms": {}} for r in rows])


def test_the_trace_splits_a_nodes_time_from_its_model_calls():
    from pipeline.trace import TurnTrace

    t = TurnTrace("u", "nova", "t1")
    t.llm_done(205.0, 10, 2, "enricher")
    t.llm_done(204.0, 10, 2, "enricher")  # a node with two calls: both count
    t.llm_done(203.0, 10, 2)  # a caller outside the chain's nodes: in the total only
    got = t.timings()
    assert got.nodes_llm_ms == {"enricher": 409.0} and got.llm_ms == 612.0 and got.llm_calls == 3


def test_the_stand_in_answers_numbers_at_their_largest_when_asked():
    schema = {"type": "object", "properties": {"wichtigkeit": {"type": "number", "minimum": 0, "maximum": 0.9},
                                               "anzahl": {"type": "integer"}, "kern": {"type": "string"}}}
    body = {"messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    assert json.loads(standin.answer(body)) == {"wichtigkeit": 0, "anzahl": 0, "kern": "x"}
    hoch = json.loads(standin.answer(body, "fest", "hoch"))
    assert hoch == {"wichtigkeit": 0.9, "anzahl": 1, "kern": "x"}
