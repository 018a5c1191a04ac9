"""What a pair process holds in memory, by what it imports: the USS of Ray actors that each import
one set of modules, beside a bare Ray actor, in one run.

    python -m bench.pair_memory [--rounds 2] [--json PATH]

Each set runs in actors of its own (`--rounds` of them, the smallest USS counts: a process's first
pages are not all its own yet). The sets: nothing (a bare Ray actor), redis alone, `ray.serve`
alone, the pair process's own modules (`actors.pair` with redis) without `ray.serve`, and both —
what a pair process imports once it is connected (`Services.connect` imports `ray.serve`). Imports
only: a pair process also holds its handles, its Redis pool and its prompts (bench/activation.py
measures whole pair processes).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SETS: dict[str, tuple[str, ...]] = {
    "bare Ray actor": (),
    "redis alone": ("redis.asyncio",),
    "ray.serve alone": ("ray.serve",),
    "the pair's modules, no ray.serve": ("redis.asyncio", "actors.pair"),
    "the pair's modules and ray.serve (what a pair process imports)": ("redis.asyncio", "actors.pair", "ray.serve"),
}


def measure(rounds: int) -> dict[str, float]:
    """USS in MiB per import set, the smallest of `rounds` actors each."""
    import psutil
    import ray

    @ray.remote(num_cpus=0)
    class Probe:
        def load(self, modules: tuple[str, ...]) -> int:
            import gc
            import importlib

            for m in modules:
                importlib.import_module(m)
            gc.collect()
            return os.getpid()

    out = {}
    for name, modules in SETS.items():
        uss = []
        for _ in range(rounds):
            actor = Probe.remote()
            pid = ray.get(actor.load.remote(modules), timeout=120)
            time.sleep(1.0)  # let the import's transient allocations go
            uss.append(psutil.Process(pid).memory_full_info().uss / 2**20)
            ray.kill(actor)
        out[name] = round(min(uss), 1)
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        figures = measure(args.rounds)
    finally:
        ray.shutdown()
    bare = figures["bare Ray actor"]
    print("| actor imports | USS MiB | × bare |")
    print("|---|---|---|")
    for name, mib in figures.items():
        print(f"| {name} | {mib} | {mib / bare:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
