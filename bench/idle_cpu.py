"""What the system costs while nobody speaks: every process's CPU over a quiet window, by part, on
a fresh system whose reserve of warm spares is full.

    python -m bench.idle_cpu [--settle-s 25] [--window-s 30] [--json PATH]

On the harness's CPU per turn (`bench/harness.py`) this is the floor that does not shrink with fewer
turns: at one pair and about one turn a second, each millicore here is about a thousandth of a
CPU-second per turn.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench import system, turn_graph


NOT_OURS = (1,)


def measure(settle_s: float, window_s: float) -> dict[str, float]:
    """Millicores per part of the system over `window_s`, after `settle_s` of rest (the machine's
    init process, pid 1, is not the system's; the kernel's threads are counted)."""
    with system.running(None, None):
        time.sleep(settle_s)
        t0, p0 = turn_graph.cpu_seconds(NOT_OURS), turn_graph.cpu_by_part(NOT_OURS)
        time.sleep(window_s)
        t1, p1 = turn_graph.cpu_seconds(NOT_OURS), turn_graph.cpu_by_part(NOT_OURS)
    parts = {k: round((v - p0.get(k, 0.0)) / window_s * 1000, 1) for k, v in p1.items()}
    out = {k: v for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v > 0}
    return {"total": round((t1 - t0) / window_s * 1000, 1), **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settle-s", type=float, default=25.0, help="rest after the start before the window")
    ap.add_argument("--window-s", type=float, default=30.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    figures = measure(args.settle_s, args.window_s)
    print(f"idle system, millicores over {args.window_s:.0f} s")
    for part, mc in figures.items():
        print(f"{mc:8.1f}  {part}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
