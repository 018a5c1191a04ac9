"""Made-up character ids against the running system: how many get a conversation partner that
nobody created (an improvised stranger), how many pair actors they leave behind, and what one
such request costs. With characters as resources every one of them should get 404 and no actor.

    python -m bench.strangers --ids 24

Starts its own system on the embedded defaults under a scratch home unless --url and --key point
at a running one (then actors are counted from the live-pair registry, which sees finished turns).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path

import httpx

from bench.harness import pct
from bench.system import running
from pipeline.node_config import capped


def _pair_actors(ids: list[str], redis_url: str | None) -> int | None:
    """Pair actors whose character is one of `ids`, from the registry (None: no store at hand)."""
    if not redis_url:
        return None
    from redis import Redis

    from actors.registry import BESITZ

    wanted, r = set(ids), Redis.from_url(redis_url)
    try:
        return sum(1 for k in r.hkeys(BESITZ) if k.decode().rsplit(":", 1)[-1] in wanted)
    finally:
        r.close()


async def run_strangers(url: str, key: str, n: int, user: str = "bench") -> dict:
    ids = [f"fremd{i}-{uuid.uuid4().hex[:6]}" for i in range(n)]
    headers = {"Authorization": f"Bearer {key}"}
    lat, codes, names = [], {}, set()
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        before = (await client.get("/v1/operator/status", headers=headers)).json()["live_pairs"]
        for cid in ids:  # one after another: the cost of one request, not of a queue
            t0 = time.perf_counter()
            r = await client.post(f"/v1/pairs/{user}/{cid}/turns", json={"text": "Hallo, wer bist du?"},
                                  headers=headers)
            lat.append((time.perf_counter() - t0) * 1000)
            codes[r.status_code] = codes.get(r.status_code, 0) + 1
            if r.status_code == 200:
                names.add(r.json()["character_name"])
        after = (await client.get("/v1/operator/status", headers=headers)).json()["live_pairs"]
    from bench.system import STARTED

    actors = _pair_actors(ids, STARTED[-1].redis_url if STARTED else None)
    return {"ids": n, "status_codes": {str(k): v for k, v in sorted(codes.items())},
            "improvised_characters": codes.get(200, 0), "improvised_names_sample": sorted(names)[:3],
            "pair_actors_left": actors if actors is not None else after - before,
            "pair_actors_counted_by": "the pair registry" if actors is not None else "live-pair registry",
            "latency_p50_ms": round(pct(lat, 50), 1), "latency_p95_ms": round(pct(lat, 95), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ids", type=int, default=24)
    ap.add_argument("--url")
    ap.add_argument("--key", help="operator key of the running system")
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--out", type=Path, help="write the report as JSON here")
    args = ap.parse_args()

    with running(args.url, args.key, http_port=8766, node_max_tokens=capped(args.max_tokens),
                 thinker_max_iterations=1) as (url, key):
        report = asyncio.run(run_strangers(url, key, args.ids))
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
