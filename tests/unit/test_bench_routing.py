"""bench/routing.py reads the three harness reports level by level and checks the goals of
cache-aware routing against them."""
from pathlib import Path

from bench import routing


def _report(pairs, sweep):
    def level(share, ttft, load):
        return {"latency_ms": {"p50": 1000, "p95": 1500}, "turns_per_s": 3.0,
                "llm": {"cached_share": share, "responder_ttft_p50_ms": ttft, "replica_load_max_over_mean": load}}
    return {"main": {"scenario": {"pairs": pairs}, "pipeline": level(*sweep[pairs])},
            "sweep": [{"pairs": n, "pipeline": level(*v)} for n, v in sweep.items()]}


def test_levels_are_read_per_number_of_pairs():
    got = routing.levels(_report(32, {8: (0.7, 60, 1.1), 32: (0.8, 50, 1.2)}))
    assert sorted(got) == [8, 32]
    assert got[32]["cached_share"] == 0.8 and got[8]["responder_ttft_p50_ms"] == 60
    assert got[32]["turn_p50_ms"] == 1000 and got[32]["turns_per_s"] == 3.0


def test_the_goals_hold_or_fail_by_their_bounds():
    one = {"cached_share": 0.8}
    pow2 = {"responder_ttft_p50_ms": 100}
    good = routing.goals(one, pow2, {"cached_share": 0.75, "responder_ttft_p50_ms": 55, "replica_load_max_over_mean": 1.2})
    assert all(g["met"] for g in good.values())
    assert good["responder_ttft_over_pow2"]["value"] == 0.55
    bad = routing.goals(one, pow2, {"cached_share": 0.7, "responder_ttft_p50_ms": 61, "replica_load_max_over_mean": 1.3})
    assert not any(g["met"] for g in bad.values())
    assert not routing.goals(one, {}, {"cached_share": None})["cached_share_over_one_replica"]["met"]


def test_each_setup_runs_the_harness_with_its_replicas_and_routing():
    one = routing.harness_args(1, "pair", 32, "8", Path("o"), ["--turns", "3"])
    assert "--routing" not in one and one[one.index("--llm-replicas") + 1] == "1"
    pow2 = routing.harness_args(4, "pow2", 32, "8", Path("o"), [])
    assert pow2[pow2.index("--routing") + 1] == "pow2" and "--standin-cache" in pow2
    assert pow2[pow2.index("--sweep") + 1] == "8" and one[-2:] == ["--turns", "3"]
