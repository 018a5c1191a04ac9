"""The benchmark harness: its figures from known inputs, and one small run against the system
with the engine replay in the same run."""
import asyncio

import pytest

from bench import harness


def _rec(pair, caller, started, *contents, completion=5, prompt=50):
    return {"request": {"pair": pair, "caller": caller, "messages": [{"role": "user", "content": c} for c in contents]},
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}, "started": started, "ms": 10}


def test_prefix_reuse_per_node_and_pair():
    records = [_rec("a", "responder", 1, "S" * 60, "x" * 40), _rec("a", "responder", 3, "S" * 60, "y" * 40),
               _rec("b", "responder", 2, "T" * 100), _rec("a", "router", 4, "R"), _rec("b", "responder", 5, "T" * 100)]
    reuse = harness.prefix_reuse(records)
    text = harness.prompt_text([{"role": "user", "content": "S" * 60}, {"role": "user", "content": "y" * 40}])
    shared = len("<user>" + "S" * 60 + "<user>")
    # pair a: 66/.. of the second prompt equals the first; pair b: the whole prompt again → mean of both
    assert reuse["responder"]["prompts"] == 2
    assert reuse["responder"]["mean"] == pytest.approx(round((shared / len(text) + 1.0) / 2, 4), abs=1e-4)
    assert "router" not in reuse  # a single prompt has no predecessor


def test_percentiles_summary_and_ratio():
    assert harness.pct([], 50) is None and harness.pct([3, 1, 2], 50) == 2 and harness.pct(list(range(101)), 99) == 99
    rows = [{"category": "smalltalk", "client_ms": 1000.0, "actor_ms": 900.0, "llm_ms": 700.0, "embed_ms": 20.0,
             "nodes_ms": {"responder": 500.0}, "llm_calls": 3, "prompt_tokens": 300, "completion_tokens": 30},
            {"category": "web", "client_ms": 3000.0, "actor_ms": 2900.0, "llm_ms": 2500.0, "embed_ms": 20.0,
             "nodes_ms": {"responder": 700.0, "thinker": 1500.0}, "llm_calls": 6, "prompt_tokens": 900, "completion_tokens": 90}]
    records = [_rec("a", "responder", i, "p") for i in range(9)]
    f = harness.summarise(rows, 10.0, records, {"busy_s": 1.0}, {"busy_s": 4.0})
    assert f["turns"] == 2 and f["turns_per_s"] == 0.2 and f["latency_ms"]["p50"] == 1000.0 and f["latency_ms"]["p99"] == 3000.0
    assert f["llm_calls_per_turn"] == 4.5 and f["tokens_per_turn"] == {"prompt": 600.0, "completion": 60.0}
    assert f["llm_busy_share"] == 0.3 and f["llm_requests_per_s"] == 0.9 and f["llm_completion_tokens_per_s"] == 4.5
    assert f["orchestration_overhead_share"] == pytest.approx((3800 - 3240) / 3800, abs=1e-4)
    assert f["nodes_ms"]["thinker"] == {"p50": 1500.0, "p95": 1500.0}
    r = harness.compare(f, {"requests_per_s": 1.8, "prompt_tokens_per_s": 90.0, "completion_tokens_per_s": 9.0,
                            "wall_s": 5.0})
    assert r == {"requests_per_s": 0.5, "prompt_tokens_per_s": 0.5, "completion_tokens_per_s": 0.5,
                 "wall_s_engine_over_pipeline": 0.5}


def test_scenarios_are_reproducible_and_follow_the_mix():
    sc = harness.Scenario(pairs=3, turns=40, mix={"agent": 1.0})
    assert sc.messages(1) == sc.messages(1) and sc.messages(1) != sc.messages(2)
    assert {c for c, _ in sc.messages(0)} == {"agent"}
    assert all(t in harness.MESSAGES["agent"] for _, t in sc.messages(0))


@pytest.mark.e2e
def test_a_small_run_with_the_engine_replay(system, keys, tmp_path):
    from ray import serve

    llm = serve.get_deployment_handle("LLM", app_name="novaberg")
    sc = harness.Scenario(pairs=1, turns=2, think_s=0.0, mix={"smalltalk": 1.0})
    report, rows = asyncio.run(harness.run_all(lambda n: harness.HttpDriver(system.url, keys["operator"], n), llm, sc,
                                               sweep=[], show_progress=False))
    main = report["main"]
    p = main["pipeline"]
    assert p["turns"] == 2 and p["errors"] == 0 and len(rows) == 2
    assert p["llm_requests"] >= sum(r["llm_calls"] for r in rows) > 0  # the background chain's calls come on top
    assert p["prefix_reuse"] and all(0.0 <= v["mean"] <= 1.0 for v in p["prefix_reuse"].values())
    assert main["engine"]["requests"] == p["llm_requests"] and main["engine"]["completion_tokens_per_s"] > 0
    e, r = main["engine"], main["pipeline_over_engine"]
    # the ratios are the pipeline's figures over the replay's, measured in this one run
    assert r["completion_tokens_per_s"] == pytest.approx(
        p["llm_completion_tokens_per_s"] / e["completion_tokens_per_s"], rel=1e-3)
    assert r["requests_per_s"] == pytest.approx(p["llm_requests_per_s"] / e["requests_per_s"], rel=1e-3)
    g = p["turn_graph"]
    assert g["llm_in_flight"]["max"] >= 1 and g["cpu_s_per_turn"] > 0
    assert 0 < g["reply_start_ms_p50"] < p["latency_ms"]["p99"]  # the reply starts inside the turn
    assert sum(g["llm_calls_per_turn_by_node"].values()) * p["turns"] == pytest.approx(p["llm_requests"], abs=0.1)
    report.update(system={"llm_backend": "llamacpp", "llm_model": "m"}, gpu=harness.gpu_info())
    files = harness.plots(report, rows, tmp_path)
    for f in files:
        assert (tmp_path / f).read_bytes()[:4] == b"\x89PNG"
