"""Activations: what a person whose pair has no live actor waits for its first turn, against a warm
turn, with the reserve of warm spares (actors/activation.py) and without it, in one run.

    python -m bench.activation --standin-ms 200 --returning 6 --bursts 8,32 [--spares 32]

Per arm (a fresh system on the embedded defaults, every LLM call answered by the stand-in engine
after a fixed latency — bench/standin.py — so what is left is the pipeline and the activation):
- warm: pairs that have had a turn take further turns one after another (p50/p95);
- returning: pairs that had a turn and whose actor was evicted after the idle timeout come back one
  after another (first turn p50/p95, the reserve refilled in between, as after a coffee);
- burst N: N pairs never seen take their first turn all at once (first turn p50/p95, activations/s
  = N over the time until the last first turn answered, so an underestimate), then the same N pairs,
  warm now, a second turn at once: the same concurrency without the activation;
- memory: USS (and PSS) of the pair processes that served, and of a bare Ray actor, pairs per GiB.
The arms: `pair_spares=0` (every activation starts its process: the base) and `pair_spares=--spares`.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import httpx

from bench import standin
from bench.harness import _free_port, pct
from pipeline.node_config import capped

TEXT = "Hallo, da bin ich wieder."


async def _turn(c: httpx.AsyncClient, key: str, user: str) -> float:
    t0 = time.perf_counter()
    r = await c.post(f"/v1/pairs/{user}/nova/turns", json={"text": TEXT}, headers={"Authorization": f"Bearer {key}"})
    r.raise_for_status()
    return (time.perf_counter() - t0) * 1000


def _stat(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": pct(ms, 50), "p95_ms": pct(ms, 95)}


def _bound(redis, user: str) -> bool:
    from actors.registry import BESITZ, pair_name

    return redis.hexists(BESITZ, pair_name(user, "nova"))


def _wait(pred, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("waited too long")
        time.sleep(0.2)


def _reserve_full(redis, settings) -> None:
    from actors.registry import reserve_key

    if settings.pair_spares:
        _wait(lambda: redis.llen(reserve_key()) >= settings.pair_spares, 600)


def _memory(settings, users: list[str]) -> dict:
    """USS/PSS of the pair processes serving `users`, and of a bare Ray actor."""
    import psutil
    import ray

    from actors.activation import pair_actor

    uss, pss = [], []
    for u in users:
        try:
            pid = ray.get(pair_actor(settings, u, "nova").status.remote(), timeout=60)["pid"]
            info = psutil.Process(pid).memory_full_info()
        except Exception:
            continue
        uss.append(info.uss / 2**20)
        pss.append(getattr(info, "pss", 0) / 2**20)

    @ray.remote(num_cpus=0)
    class Bare:
        def pid(self):
            return os.getpid()

    bare = Bare.remote()
    b = psutil.Process(ray.get(bare.pid.remote())).memory_full_info()
    ray.kill(bare)
    m = sorted(uss)[len(uss) // 2] if uss else None
    return {"pair_uss_mib_median": round(m, 1) if m else None,
            "pair_pss_mib_median": round(sorted(pss)[len(pss) // 2], 1) if pss else None,
            "bare_actor_uss_mib": round(b.uss / 2**20, 1), "pair_over_bare": round(m / (b.uss / 2**20), 2) if m else None,
            "pairs_per_gib": round(1024 / m, 1) if m else None}


async def _arm(url: str, key: str, settings, returning: int, bursts: list[int], warm_turns: int) -> dict:
    from redis import Redis

    redis = Redis.from_url(settings.redis_url)
    tag = uuid.uuid4().hex[:4]
    out: dict = {"pair_spares": settings.pair_spares}
    try:
        async with httpx.AsyncClient(base_url=url, timeout=600) as c:
            _reserve_full(redis, settings)
            warm_users = [f"w{i}-{tag}" for i in range(2)]
            for u in warm_users:
                await _turn(c, key, u)
            warm = [await _turn(c, key, warm_users[i % 2]) for i in range(warm_turns)]
            out["warm"] = _stat(warm)
            back = [f"r{i}-{tag}" for i in range(returning)]
            for u in back:  # each had a conversation earlier ...
                await _turn(c, key, u)
            # ... and its actor was evicted after the idle timeout
            await asyncio.to_thread(_wait, lambda: not any(_bound(redis, u) for u in back),
                                    settings.pair_idle_timeout_s + 60)
            first = []
            for u in back:
                await asyncio.to_thread(_reserve_full, redis, settings)
                first.append(await _turn(c, key, u))
            out["returning"] = {**_stat(first), "over_warm_p50": round(pct(first, 50) / out["warm"]["p50_ms"], 2)}
            for n in bursts:
                await asyncio.to_thread(_reserve_full, redis, settings)
                users = [f"b{n}-{i}-{tag}" for i in range(n)]
                t0 = time.perf_counter()
                ms = list(await asyncio.gather(*(_turn(c, key, u) for u in users)))
                wall = time.perf_counter() - t0
                # the same pairs at once again, warm now: the same concurrency without the activation
                again = list(await asyncio.gather(*(_turn(c, key, u) for u in users)))
                out[f"burst_{n}"] = {**_stat(ms), "activations_per_s": round(n / wall, 1),
                                     "over_warm_p95": round(pct(ms, 95) / out["warm"]["p95_ms"], 2),
                                     "warm_burst": _stat(again),
                                     "over_warm_burst_p95": round(pct(ms, 95) / pct(again, 95), 2)}
            out["memory"] = _memory(settings, back + [f"b{bursts[-1]}-{i}-{tag}" for i in range(bursts[-1])]
                                    if bursts else back)
    finally:
        redis.close()
    return out


def run(args) -> dict:
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    from cluster import runtime
    from core.settings import load_settings

    port = _free_port()
    proc = standin.start(port, args.standin_ms)
    engine = {"llm_backend": "openai", "openai_base_url": f"http://127.0.0.1:{port}/v1", "llm_model": "standin"}
    report: dict = {"standin_ms": args.standin_ms, "cpus": os.cpu_count(),
                    "measured_at": datetime.now(timezone.utc).isoformat(), "arms": {}}
    try:
        for spares in (0, args.spares):
            home = Path(tempfile.mkdtemp(prefix="nbbench-", dir="/tmp"))
            settings = load_settings(home=home, http_port=_free_port(), node_max_tokens=capped(48),
                                     pair_idle_timeout_s=args.idle_s, pair_spares=spares, **engine)
            rt = runtime.start(settings)
            try:
                key = runtime.create_key(None, operator=True)
                report["arms"][f"spares_{spares}"] = asyncio.run(
                    _arm(rt.url, key, rt.settings, args.returning, args.bursts, args.warm_turns))
            finally:
                runtime.stop(rt)
                shutil.rmtree(home, ignore_errors=True)
    finally:
        proc.terminate()
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--standin-ms", type=float, default=200.0)
    ap.add_argument("--returning", type=int, default=6)
    ap.add_argument("--bursts", default="8,32", help="burst sizes of new pairs, e.g. 8,32,128")
    ap.add_argument("--spares", type=int, default=32, help="the reserve's size in the second arm")
    ap.add_argument("--warm-turns", type=int, default=12)
    ap.add_argument("--idle-s", type=float, default=8.0, help="pair_idle_timeout_s of both arms")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    args.bursts = [int(x) for x in args.bursts.split(",") if x.strip()]
    report = run(args)
    print(json.dumps(report, indent=2))
    for name, arm in report["arms"].items():
        line = (f"{name}: warm p50 {arm['warm']['p50_ms']} ms p95 {arm['warm']['p95_ms']} ms | returning first turn "
                f"p50 {arm['returning']['p50_ms']} ms ({arm['returning']['over_warm_p50']}× warm)")
        for n in args.bursts:
            b = arm[f"burst_{n}"]
            line += (f" | burst {n}: p50 {b['p50_ms']} p95 {b['p95_ms']} ms ({b['over_warm_p95']}× warm p95, "
                     f"{b['over_warm_burst_p95']}× a warm burst's p95 {b['warm_burst']['p95_ms']} ms), "
                     f"{b['activations_per_s']} activations/s")
        print(line + f" | memory {arm['memory']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
