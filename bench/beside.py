"""The harness on an earlier commit and on this checkout, one after the other in one run, and the
ratios between them: this machine's figures move by a quarter or more between sessions, so a
before and an after are only compared when they were measured side by side.

    python -m bench.beside --base e72dc07 --base-patch 412f5a3 --base-args="--schedule reihe"
        # the scheduling issue's code in its written order, with the harness's warm pairs (412f5a3: the
        # base's harness measured every pair's first turn, its actor's creation included), against today
    python -m bench.beside --base HEAD~3 --rounds 2 -- --pairs 1 --turns 5 --sweep 8

The base commit runs from a git worktree (removed afterwards) with this checkout's environment;
its code comes first on the import path of the driver and of every Ray process it starts. With
several rounds the two alternate (base first, then this checkout first) and the means are
compared. Prints a table and writes `beside.json` with both sides' reports to --out (default
bench/results/<time>-beside).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HARNESS_ARGS = ["--pairs", "1", "--turns", "5", "--think-s", "0", "--sweep", "8,32", "--standin-ms", "200",
                "--no-engine-baseline"]
"""The pipeline's own cost against a 200 ms stand-in engine, with 1, 8 and 32 warm pairs."""

ZIEL_CPU = 0.5
"""CPU per turn: at most half the base's."""
ZIEL_DURCHSATZ = 2.0
"""Turns per second with the most pairs: at least twice the base's."""
ZIEL_EIGENANTEIL = 0.02
"""The pipeline's own share of a turn with one pair."""
ZIEL_KRITISCH = 1.15
"""A turn with one pair against its critical path."""
ZIEL_WIEDERVERWENDUNG = 0.75
"""Prefix reuse of every LLM node."""


def figures(report: dict[str, Any]) -> dict[str, float]:
    """The comparable figures of one harness report: per concurrency level turns/s, CPU-s per turn
    and latency p50; with the fewest pairs the turn against its critical path, the own share and
    when the reply starts; prefix reuse per node. A figure the report lacks is left out."""
    out: dict[str, float] = {}
    levels = sorted(report.get("sweep") or [], key=lambda lv: lv["pairs"])
    for lv in levels:
        p, n = lv["pipeline"], lv["pairs"]
        out[f"turns_per_s@{n}"] = p["turns_per_s"]
        out[f"latency_p50_ms@{n}"] = p["latency_ms"]["p50"]
        if "cpu_s_per_turn" in p.get("turn_graph", {}):
            out[f"cpu_s_per_turn@{n}"] = p["turn_graph"]["cpu_s_per_turn"]
    if levels:
        g = levels[0]["pipeline"].get("turn_graph", {})
        for k in ("own_share", "own_share_met", "own_ms_p50", "own_met_ms_p50", "turn_over_critical_path",
                  "reply_start_ms_p50"):
            if g.get(k) is not None:
                out[f"{k}@{levels[0]['pairs']}"] = g[k]
    for node, r in (report["main"]["pipeline"].get("prefix_reuse") or {}).items():
        out[f"prefix_reuse.{node}"] = r["mean"]
    return out


def compare(base: list[dict[str, float]], head: list[dict[str, float]]) -> dict[str, dict[str, float | None]]:
    """Per figure the mean over the rounds on each side and head / base."""
    out: dict[str, dict[str, float | None]] = {}
    for key in sorted({k for f in base + head for k in f}):
        b = [f[key] for f in base if key in f]
        h = [f[key] for f in head if key in f]
        bm = round(statistics.mean(b), 4) if b else None
        hm = round(statistics.mean(h), 4) if h else None
        out[key] = {"base": bm, "head": hm, "ratio": round(hm / bm, 3) if bm and hm is not None else None}
    return out


def goals(table: dict[str, dict[str, float | None]]) -> list[dict[str, Any]]:
    """The scheduling issue's goals, each checked on the figures measured side by side: CPU per turn
    halved and turns/s doubled at the most pairs against the base; the own share, the turn against
    its critical path and every node's prefix reuse on this checkout."""
    levels = sorted(int(k.split("@")[1]) for k in table if k.startswith("turns_per_s@"))
    checks: list[dict[str, Any]] = []

    def check(name: str, key: str, value: float | None, goal: float, at_most: bool) -> None:
        met = None if value is None else (value <= goal if at_most else value >= goal)
        checks.append({"goal": name, "figure": key, "value": value, "target": ("≤ " if at_most else "≥ ") + str(goal),
                       "met": met})

    for n in levels:
        if f"cpu_s_per_turn@{n}" in table:
            check(f"CPU per turn halved ({n} pairs)", f"cpu_s_per_turn@{n}", table[f"cpu_s_per_turn@{n}"]["ratio"],
                  ZIEL_CPU, True)
    if levels:
        top = levels[-1]
        check(f"turns/s doubled ({top} pairs)", f"turns_per_s@{top}", table[f"turns_per_s@{top}"]["ratio"],
              ZIEL_DURCHSATZ, False)
        low = levels[0]
        for key, goal in ((f"own_share@{low}", ZIEL_EIGENANTEIL), (f"turn_over_critical_path@{low}", ZIEL_KRITISCH)):
            check(key.split("@")[0].replace("_", " "), key, (table.get(key) or {}).get("head"), goal, True)
    for key in (k for k in table if k.startswith("prefix_reuse.")):
        check(f"prefix reuse {key.split('.', 1)[1]}", key, table[key]["head"], ZIEL_WIEDERVERWENDUNG, False)
    return checks


def render(table: dict[str, dict[str, float | None]], checks: list[dict[str, Any]], base_rev: str, head_rev: str) -> str:
    lines = [f"{'figure':<34} {'base ' + base_rev[:9]:>16} {'head ' + head_rev[:9]:>16} {'head/base':>10}"]
    for key, row in table.items():
        lines.append(f"{key:<34} {_fmt(row['base']):>16} {_fmt(row['head']):>16} {_fmt(row['ratio']):>10}")
    lines.append("")
    for c in checks:
        mark = {True: "met", False: "NOT met", None: "not measured"}[c["met"]]
        lines.append(f"{c['goal']:<34} {_fmt(c['value']):>10} (goal {c['target']}): {mark}")
    return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:g}"


def _rev(ref: str, cwd: Path) -> str:
    return subprocess.run(["git", "rev-parse", ref], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def run_harness(code: Path, args: list[str], out: Path, log: Path) -> dict[str, Any]:
    """One harness run with `code` first on the import path (the driver's and, through the
    environment Ray's processes inherit, every worker's)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])]))
    with log.open("w") as fh:
        done = subprocess.run([sys.executable, "-m", "bench.harness", *args, "--out", str(out)], cwd=code, env=env,
                              stdout=fh, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"the harness on {code} failed ({done.returncode}); its output: {log}")
    return json.loads((out / "report.json").read_text())


def patch_bench(root: Path, tree: Path, rev: str) -> None:
    """Apply what `rev` changed under bench/ onto the base's worktree (three-way, so the base's own
    later lines around it do not stop it); a change that does not apply stops the run."""
    diff = subprocess.run(["git", "diff", f"{rev}^", rev, "--", "bench/"], cwd=root, check=True, capture_output=True)
    if not diff.stdout.strip():
        raise SystemExit(f"{rev} changed nothing under bench/")
    done = subprocess.run(["git", "apply", "--3way"], cwd=tree, input=diff.stdout, capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"{rev}'s benchmark change does not apply onto the base: {done.stderr.decode().strip()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--base-args", default="", help="harness arguments for the base only, e.g. '--schedule written'")
    ap.add_argument("--head-args", default="", help="harness arguments for this checkout only")
    ap.add_argument("--base-patch", action="append", default=[], metavar="REV",
                    help="apply the change REV made under bench/ onto the base: a later fix of the benchmark itself "
                         "(412f5a3: warm pairs), so both sides measure the same way; the product code stays the base's")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", type=Path)
    ap.add_argument("harness", nargs="*", help=f"harness arguments for both (after --); default: {' '.join(HARNESS_ARGS)}")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    common = args.harness or HARNESS_ARGS
    base_rev, head_rev = _rev(args.base, root), _rev("HEAD", root)
    out = args.out or root / "bench" / "results" / (datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + "-beside")
    out.mkdir(parents=True, exist_ok=True)
    reports: dict[str, list[dict[str, Any]]] = {"base": [], "head": []}
    with tempfile.TemporaryDirectory(prefix="novaberg-base-") as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), base_rev], cwd=root, check=True,
                       capture_output=True)
        try:
            for rev in args.base_patch:
                patch_bench(root, tree, rev)
            for r in range(args.rounds):
                order = ("base", "head") if r % 2 == 0 else ("head", "base")
                for side in order:
                    code, extra = (tree, args.base_args) if side == "base" else (root, args.head_args)
                    print(f"round {r + 1}/{args.rounds}: {side} ({(base_rev if side == 'base' else head_rev)[:9]})",
                          flush=True)
                    reports[side].append(run_harness(code, [*common, *shlex.split(extra)], out / f"{side}-{r + 1}",
                                                     out / f"{side}-{r + 1}.log"))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=root, capture_output=True)
    table = compare([figures(x) for x in reports["base"]], [figures(x) for x in reports["head"]])
    checks = goals(table)
    print(render(table, checks, base_rev, head_rev))
    (out / "beside.json").write_text(json.dumps({
        "base": base_rev, "base_patches": args.base_patch, "head": head_rev, "harness": common,
        "base_args": args.base_args, "head_args": args.head_args,
        "rounds": args.rounds, "measured_at": datetime.now(timezone.utc).isoformat(), "table": table, "goals": checks,
        "reports": reports}, indent=1))
    print(f"\nreports and beside.json in {out}")


if __name__ == "__main__":
    main()
