"""First benchmark of the spine: N concurrent pairs × M turns over HTTP.

Prints turns/s, p50/p95 turn latency and the share of turn time spent outside LLM and embedding
calls (orchestration overhead), all measured in one run. Starts its own system on the embedded
defaults under a scratch home unless --url and --key point at a running one.

    python -m bench.spine --pairs 4 --turns 3
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path

import httpx

from bench.harness import pct
from bench.system import running
from pipeline.node_config import capped

MESSAGES = ["Hallo, wie geht es dir heute?", "Ich war heute im Park spazieren.",
            "Was denkst du ueber Regen?", "Erzaehl mir etwas ueber dich.", "Gute Nacht!"]


async def run_pairs(url: str, key: str, pairs: int, turns: int, think_s: float) -> dict:
    run_id = uuid.uuid4().hex[:6]
    rows: list[dict] = []

    async def one_pair(client: httpx.AsyncClient, i: int):
        for t in range(turns):
            t0 = time.perf_counter()
            r = await client.post(f"/v1/pairs/bench{i}-{run_id}/nova/turns",
                                  json={"text": MESSAGES[t % len(MESSAGES)]},
                                  headers={"Authorization": f"Bearer {key}"})
            ms = (time.perf_counter() - t0) * 1000
            r.raise_for_status()
            tm = r.json()["timings"]
            rows.append({"client_ms": ms, "llm_ms": tm["llm_ms"], "embed_ms": tm["embed_ms"],
                         "actor_ms": tm["total_ms"], "tokens": r.json()["usage"]["completion_tokens"],
                         "llm_calls": r.json()["usage"]["llm_calls"], "nodes_ms": tm.get("nodes_ms", {})})
            if think_s:
                await asyncio.sleep(think_s)

    limits = httpx.Limits(max_connections=pairs + 4)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(one_pair(client, i) for i in range(pairs)))
        wall = time.perf_counter() - t0
    lat = [r["client_ms"] for r in rows]
    total = sum(lat)
    model = sum(r["llm_ms"] + r["embed_ms"] for r in rows)
    return {
        "pairs": pairs, "turns_per_pair": turns, "turns": len(rows), "wall_s": round(wall, 2),
        "turns_per_s": round(len(rows) / wall, 3),
        "latency_p50_ms": round(pct(lat, 50), 1), "latency_p95_ms": round(pct(lat, 95), 1),
        "llm_share": round(sum(r["llm_ms"] for r in rows) / total, 4),
        "embed_share": round(sum(r["embed_ms"] for r in rows) / total, 4),
        "orchestration_overhead_share": round((total - model) / total, 4),
        "orchestration_overhead_ms_p50": round(statistics.median(
            r["client_ms"] - r["llm_ms"] - r["embed_ms"] for r in rows), 1),
        "completion_tokens_per_turn": round(statistics.mean(r["tokens"] for r in rows), 1),
        "llm_calls_per_turn": round(statistics.mean(r["llm_calls"] for r in rows), 2),
        "nodes": {n: {"p50_ms": round(pct(v, 50), 2), "p95_ms": round(pct(v, 95), 2)}
                  for n, v in sorted(_per_node(rows).items())},
    }


def _per_node(rows: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in rows:
        for node, ms in r["nodes_ms"].items():
            out.setdefault(node, []).append(ms)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--think-s", type=float, default=0.0)
    ap.add_argument("--url")
    ap.add_argument("--key", help="operator key of the running system")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--out", type=Path, help="write the report as JSON here")
    args = ap.parse_args()

    with running(args.url, args.key, http_port=8765, node_max_tokens=capped(args.max_tokens)) as (url, key):
        report = asyncio.run(run_pairs(url, key, args.pairs, args.turns, args.think_s))
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
