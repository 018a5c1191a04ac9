"""The short-term memory's (KZG's) share of a turn as the pair grows, from turn 10 to turn 2,000:
one entry written, the pair actor's index brought up to date, one search — bounded to the window
(`Settings.kzg_max_entries`) with the index reading only new vectors, side by side in one run with
the unbounded store whose index re-reads every vector after each write (the baseline).

    python -m bench.kzg_window [--turns 2000] [--keep 500] [--at 10,100,500,1000,2000]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

DIM = 384


async def run(turns: int, keep: int, at: list[int]) -> dict[str, dict[int, float]]:
    import numpy as np
    from redis.asyncio import Redis

    from memory import kzg
    from memory.embedded import EmbeddedStores
    from memory.kzg import KZGIndex

    rng = np.random.default_rng(7)
    home = Path(tempfile.mkdtemp(prefix="nb-kzgw-"))
    stores = EmbeddedStores(home=home).start(postgres=False)
    r = Redis.from_url(stores.redis_url)
    out: dict[str, dict[int, float]] = {"window": {}, "baseline": {}}
    try:
        for arm, window in (("window", keep), ("baseline", 10**9)):
            idx, times = KZGIndex(f"bench-{arm}", "nova"), []
            for turn in range(1, turns + 1):
                v, q = rng.normal(size=DIM).astype(np.float32), rng.normal(size=DIM).astype(np.float32)
                if arm == "baseline":
                    idx._rows, idx._times = {}, {}  # the index before the window: every vector read again
                t0 = time.perf_counter()
                await kzg.add_entry(r, f"bench-{arm}", "nova", f"eintrag {turn}", v, keep=window)
                await idx.search(r, q, threshold=0.72, top_k=10)
                times.append(time.perf_counter() - t0)
                if turn in at:  # the mean of the ten turns up to this one
                    out[arm][turn] = 1000 * sum(times[-10:]) / len(times[-10:])
    finally:
        await r.aclose()
        stores.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--keep", type=int, default=500)
    ap.add_argument("--at", default="10,100,500,1000,2000")
    a = ap.parse_args()
    at = [int(x) for x in a.at.split(",")]
    res = asyncio.run(run(a.turns, a.keep, at))
    print(f"KZG per turn (write + index update + search), ms, mean of the 10 turns up to turn N; window {a.keep}")
    print("| turn | window (incremental index) | baseline (unbounded, full re-read) |")
    print("|---|---|---|")
    for n in at:
        print(f"| {n} | {res['window'][n]:.2f} | {res['baseline'][n]:.2f} |")
    w, b = res["window"], res["baseline"]
    print(f"turn {at[-1]} / turn {at[0]}: window {w[at[-1]] / w[at[0]]:.2f}x, baseline {b[at[-1]] / b[at[0]]:.2f}x")


if __name__ == "__main__":
    main()
