"""What a call between two Ray processes costs on this machine by how long the callee was busy
elsewhere: the floor under every hop of a turn (ingress → pair actor, pair actor → a deployment).

    python -m bench.ruhe [--rounds 8]

An async actor (as the pair actors and Serve's replicas are: Ray runs them on uvloop) and a
threaded one answer after 0, 200 and 1,700 ms (one model call, one turn); an async caller awaits
each and the call's time beyond the wait is printed, p50, side by side with the immediate answer,
with the async actor's own `asyncio.sleep` lateness. Nothing of the product runs: the figures are
Ray's and the machine's."""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time

WARTEN_S = (0.0, 0.2, 1.7)


def main() -> None:
    import ray

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=8, help="calls per wait and kind of actor")
    args = ap.parse_args()
    ray.init(address="local", include_dashboard=False, num_cpus=2, _temp_dir=tempfile.mkdtemp(prefix="ruhe-"),
             object_store_memory=128 * 1024 * 1024, log_to_driver=False)

    @ray.remote(num_cpus=0)
    class Async:
        async def warte(self, s: float) -> float:
            t = time.perf_counter()
            await asyncio.sleep(s)
            return (time.perf_counter() - t - s) * 1000

    @ray.remote(num_cpus=0)
    class Threaded:
        def warte(self, s: float) -> float:
            time.sleep(s)
            return 0.0

    @ray.remote(num_cpus=0)
    class Caller:
        async def rufe(self, callee, s: float, n: int) -> list[tuple[float, float]]:
            out = []
            for _ in range(n):
                t = time.perf_counter()
                late = await callee.warte.remote(s)
                out.append(((time.perf_counter() - t - s) * 1000, late))
            return out

    caller, kinds = Caller.remote(), {"async": Async.remote(), "threaded": Threaded.remote()}
    report: dict[str, dict] = {}
    for name, callee in kinds.items():
        ray.get(caller.rufe.remote(callee, 0.0, 3))
        for s in WARTEN_S:
            got = ray.get(caller.rufe.remote(callee, s, args.rounds))
            report.setdefault(name, {})[f"{int(s * 1000)} ms"] = {
                "call_beyond_wait_ms_p50": round(statistics.median(g[0] for g in got), 2),
                "sleep_lateness_ms_p50": round(statistics.median(g[1] for g in got), 2)}
    for name, rows in report.items():
        base = rows["0 ms"]["call_beyond_wait_ms_p50"]
        for r in rows.values():
            r["over_immediate"] = round(r["call_beyond_wait_ms_p50"] / base, 2) if base else None
    print(json.dumps(report, indent=1))
    ray.shutdown()


if __name__ == "__main__":
    main()
