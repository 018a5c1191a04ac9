"""bench.beside: the figures it takes from two sides' harness reports, the ratios, and the
scheduling issue's goals checked on them."""
import pytest

from bench import beside


def _level(pairs, turns_per_s, cpu, p50, **graph):
    return {"pairs": pairs, "pipeline": {"turns_per_s": turns_per_s, "latency_ms": {"p50": p50},
                                         "turn_graph": {"cpu_s_per_turn": cpu, **graph}}}


def _report(levels, reuse):
    return {"main": {"pipeline": {"prefix_reuse": {n: {"mean": v, "prompts": 4} for n, v in reuse.items()}}},
            "sweep": levels}


BASE = _report([_level(32, 1.8, 1.3, 16000.0), _level(1, 0.4, 1.9, 2560.0, own_share=0.39,
                                                          turn_over_critical_path=1.64, reply_start_ms_p50=1900.0),
                _level(8, 1.84, 0.92, 4100.0)], {"responder": 0.34, "tribunal": 0.68})
HEAD = _report([_level(1, 0.53, 0.65, 1748.0, own_share=0.016, own_share_met=0.004, turn_over_critical_path=1.016,
                       reply_start_ms_p50=1120.0),
                _level(8, 3.9, 0.24, 2000.0), _level(32, 8.28, 0.35, 3800.0)],
               {"responder": 0.49, "tribunal": 0.79, "zielbildung": 0.93})


def test_figures_per_level_with_the_fewest_pairs_for_the_turn_graph():
    f = beside.figures(BASE)
    assert f["turns_per_s@32"] == 1.8 and f["cpu_s_per_turn@8"] == 0.92 and f["latency_p50_ms@1"] == 2560.0
    assert f["own_share@1"] == 0.39 and f["turn_over_critical_path@1"] == 1.64
    assert "own_share_met@1" not in f  # the base's harness did not measure it: left out, not zero
    assert f["prefix_reuse.responder"] == 0.34


def test_means_over_rounds_and_head_over_base():
    other = beside.figures(BASE) | {"turns_per_s@32": 2.2}
    t = beside.compare([beside.figures(BASE), other], [beside.figures(HEAD)])
    assert t["turns_per_s@32"] == {"base": 2.0, "head": 8.28, "ratio": 4.14}
    assert t["cpu_s_per_turn@8"]["ratio"] == pytest.approx(0.24 / 0.92, abs=1e-3)
    assert t["own_share_met@1"] == {"base": None, "head": 0.004, "ratio": None}
    assert t["prefix_reuse.zielbildung"]["base"] is None


def test_the_goals_checked_side_by_side():
    checks = {c["figure"]: c for c in beside.goals(beside.compare([beside.figures(BASE)], [beside.figures(HEAD)]))}
    assert checks["cpu_s_per_turn@8"]["met"] is True  # 0.24 / 0.92 ≤ 0.5
    assert checks["cpu_s_per_turn@32"]["met"] is True
    assert checks["turns_per_s@32"]["met"] is True and "turns_per_s@8" not in checks  # doubled at the most pairs
    assert checks["own_share@1"]["met"] is True and checks["own_share@1"]["value"] == 0.016
    assert checks["turn_over_critical_path@1"]["met"] is True
    assert checks["prefix_reuse.responder"]["met"] is False and checks["prefix_reuse.tribunal"]["met"] is True
    # a head that only got faster by a third does not meet the throughput goal
    slow = beside.figures(HEAD) | {"turns_per_s@32": 2.4, "cpu_s_per_turn@32": 0.9}
    c2 = {c["figure"]: c for c in beside.goals(beside.compare([beside.figures(BASE)], [slow]))}
    assert c2["turns_per_s@32"]["met"] is False and c2["cpu_s_per_turn@32"]["met"] is False
    text = beside.render(beside.compare([beside.figures(BASE)], [slow]), list(c2.values()), "e72dc07aa", "abcdef123")
    assert "turns/s doubled (32 pairs)" in text and "NOT met" in text
