"""Cache-aware routing side by side in one run: the harness on the cost-modelling stand-in
(`bench/standin.py --cache`) with one LLM replica (the bound on what a prefix cache keeps), with
several replicas routed by Serve's power of two choices, and with the same replicas routed by pair
(`serve/routing.py`), one after the other, each on a fresh system; then one table per level of
pairs and the goals of cache-aware routing checked against it.

    python -m bench.routing                       # 4 replicas, 8 and 32 pairs, --history 12
    python -m bench.routing --replicas 4 --pairs 32 --sweep 8 -- --turns 3

Arguments after `--` go to every harness run. Writes `routing.json` (the three reports' `llm`
figures per level, and the goals) to --out (default bench/results/<time>-routing), each harness
run's own report beside it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench import harness

GOAL_CACHED = 0.9
"""Pair routing keeps at least this share of the one-replica cached share of prompt tokens."""
GOAL_TTFT = 0.6
"""The responder's time to first token p50 with pair routing, at most this × power of two choices."""
GOAL_LOAD = 1.25
"""No replica takes more than this × the mean of calls per replica."""

SETUPS = (("one replica", None, "pair"), ("pow2", "N", "pow2"), ("pair", "N", "pair"))
"""The three systems: their label, their replicas (`N`: --replicas) and routing."""


def harness_args(replicas: int, routing: str, pairs: int, sweep: str, out: Path, extra: list[str]) -> list[str]:
    """One harness run's command line."""
    args = [sys.executable, "-m", "bench.harness", "--pairs", str(pairs), "--standin-cache", "--no-engine-baseline",
            "--llm-replicas", str(replicas), "--out", str(out)]
    if replicas > 1:
        args += ["--routing", routing]
    if sweep:
        args += ["--sweep", sweep]
    return args + extra


def levels(report: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """A harness report's token figures per level of pairs (the measured level and the sweep)."""
    out = {p["pairs"]: p["pipeline"] for p in report.get("sweep", [])}
    out[report["main"]["scenario"]["pairs"]] = report["main"]["pipeline"]
    return {n: harness.llm_summary({"pipeline": p}) for n, p in out.items()}


def goals(one: dict[str, Any], pow2: dict[str, Any], pair: dict[str, Any]) -> dict[str, Any]:
    """The three goals at one level: each with its measured value, its bound and whether it holds."""
    def ratio(a, b):
        return round(a / b, 3) if a is not None and b else None

    cached = ratio(pair.get("cached_share"), one.get("cached_share"))
    ttft = ratio(pair.get("responder_ttft_p50_ms"), pow2.get("responder_ttft_p50_ms"))
    load = pair.get("replica_load_max_over_mean")
    return {"cached_share_over_one_replica": {"value": cached, "bound": f">= {GOAL_CACHED}",
                                              "met": cached is not None and cached >= GOAL_CACHED},
            "responder_ttft_over_pow2": {"value": ttft, "bound": f"<= {GOAL_TTFT}", "met": ttft is not None and ttft <= GOAL_TTFT},
            "replica_load_max_over_mean": {"value": load, "bound": f"<= {GOAL_LOAD}",
                                           "met": load is not None and load <= GOAL_LOAD}}


def table(n: int, rows: dict[str, dict[str, Any]]) -> str:
    """One level's figures, a line per system."""
    head = (f"\n== {n} pairs\n{'system':<12} {'cached':>7} {'resp. TTFT p50':>15} {'p95':>7} {'max/mean':>9} "
            f"{'affinity':>9} {'turn p50':>9} {'p95':>7} {'turns/s':>8}")
    lines = [head]
    for label, f in rows.items():
        lines.append(f"{label:<12} {f.get('cached_share')!s:>7} {f.get('responder_ttft_p50_ms')!s:>12} ms "
                     f"{f.get('responder_ttft_p95_ms')!s:>7} {f.get('replica_load_max_over_mean')!s:>9} "
                     f"{f.get('pair_affinity')!s:>9} {f.get('turn_p50_ms')!s:>9} {f.get('turn_p95_ms')!s:>7} "
                     f"{f.get('turns_per_s')!s:>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=32)
    ap.add_argument("--sweep", default="8")
    ap.add_argument("--history", type=int, default=12)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    out = args.out or Path("bench/results") / (datetime.now().strftime("%Y%m%d-%H%M%S") + "-routing")
    out.mkdir(parents=True, exist_ok=True)
    extra = ["--history", str(args.history), "--turns", str(args.turns), *extra]
    by_setup: dict[str, dict[int, dict[str, Any]]] = {}
    for label, replicas, routing in SETUPS:
        n = 1 if replicas is None else args.replicas
        run_out = out / label.replace(" ", "-")
        cmd = harness_args(n, routing, args.pairs, args.sweep, run_out, extra)
        print(f"\n### {label}: {' '.join(cmd[1:])}", flush=True)
        subprocess.run(cmd, check=True)
        by_setup[label] = levels(json.loads((run_out / "report.json").read_text()))
    result: dict[str, Any] = {"replicas": args.replicas, "levels": {}, "measured_at": datetime.now(timezone.utc).isoformat(),
                              "harness_args": extra}
    for n in sorted(by_setup["pair"]):
        rows = {label: by_setup[label].get(n, {}) for label, _, _ in SETUPS}
        result["levels"][n] = {"figures": rows, "goals": goals(rows["one replica"], rows["pow2"], rows["pair"])}
        print(table(n, rows))
        for name, g in result["levels"][n]["goals"].items():
            print(f"  {name}: {g['value']} ({g['bound']}) {'met' if g['met'] else 'NOT met'}")
    (out / "routing.json").write_text(json.dumps(result, indent=2))
    print(f"\nrouting.json in {out}")


if __name__ == "__main__":
    main()
