"""The openai backend's HTTP client against httpx, side by side in one run: CPU per request of
this process (the LLM replica's share of a call) against the stand-in engine (bench/standin.py,
no compute), at the same concurrency, in alternating rounds.

    python -m bench.http_client                      # 600 requests a round, 24 at once, 3 rounds
    python -m bench.http_client --requests 2000 --concurrency 64

Prints each round's milliseconds of CPU per request and the ratio httpx / backend.
"""
from __future__ import annotations

import argparse
import asyncio
import resource
import time
from typing import Awaitable, Callable

from bench import standin
from bench.harness import _free_port
from core.settings import Settings
from core.wire import ChatRequest
from serve.llm_backends import OpenAICompatBackend

REQUEST = ChatRequest(messages=[{"role": "system", "content": "Regeln " * 400},
                                {"role": "user", "content": "Hallo " * 100}], temperature=0.7, max_tokens=50)
"""A prompt of about the size of a responder's (3,000 characters)."""


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _measure(call: Callable[[], Awaitable], n: int, concurrency: int) -> tuple[float, float]:
    """(ms CPU per request, requests/s) over `n` calls, `concurrency` at once, after a warm-up."""
    gate = asyncio.Semaphore(concurrency)

    async def one():
        async with gate:
            await call()

    await asyncio.gather(*(one() for _ in range(concurrency * 2)))
    c0, t0 = _cpu_s(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    wall = time.perf_counter() - t0
    return (_cpu_s() - c0) / n * 1000, n / wall


async def _rounds(base_url: str, n: int, concurrency: int, rounds: int) -> list[dict[str, float]]:
    import httpx

    settings = Settings(llm_backend="openai", openai_base_url=base_url, llm_model="standin")
    out = []
    for _ in range(rounds):
        backend = OpenAICompatBackend(settings)
        await backend.start()
        ours = await _measure(lambda: backend.chat(REQUEST), n, concurrency)
        await backend.close()
        body = backend._body(REQUEST, False)
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            async def via_httpx():
                r = await client.post("/chat/completions", json=body)
                return r.json()

            theirs = await _measure(via_httpx, n, concurrency)
        out.append({"backend_cpu_ms": round(ours[0], 3), "httpx_cpu_ms": round(theirs[0], 3),
                    "ratio": round(theirs[0] / ours[0], 2), "backend_rps": round(ours[1], 1),
                    "httpx_rps": round(theirs[1], 1)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--concurrency", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=50.0, help="the stand-in's answer delay")
    args = ap.parse_args()
    port = _free_port()
    proc = standin.start(port, args.latency_ms)
    try:
        rows = asyncio.run(_rounds(f"http://127.0.0.1:{port}/v1", args.requests, args.concurrency, args.rounds))
    finally:
        proc.terminate()
    for i, r in enumerate(rows, 1):
        print(f"round {i}: CPU per request backend {r['backend_cpu_ms']} ms, httpx {r['httpx_cpu_ms']} ms, "
              f"httpx / backend {r['ratio']} (requests/s {r['backend_rps']} / {r['httpx_rps']})")
    ratios = sorted(r["ratio"] for r in rows)
    print(f"median httpx / backend CPU per request: {ratios[len(ratios) // 2]}")


if __name__ == "__main__":
    main()
