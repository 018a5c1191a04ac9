"""One pair's whole turns as its conversation grows, from turn 10 to turn 2,000: a fresh system on
the stand-in engine (bench/standin.py, free text worded anew so memories, notes and profiles grow
as with a model, and every number at its largest, so every turn writes a short-term memory), one
pair talking turn after turn over HTTP with the background work running
beside it. Printed: the mean turn of the ten up to each checkpoint (the pair's very first turn,
which starts its actor, apart), against the first checkpoint (the baseline, in the same run), and
what the pair holds by then.

    python -m bench.long_pair [--turns 2000] [--at 10,100,500,1000,2000] [--standin-ms 20]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from bench import standin
from bench.harness import _free_port

MESSAGES = ("Heute war ich im Park, die Kastanien fallen schon.", "Was meinst du, soll ich den Job wechseln?",
            "Mein Bruder kommt am Samstag zu Besuch.", "Erinnerst du dich, was ich dir vom Park erzaehlt habe?",
            "Ich habe heute Abend Lust auf Pasta.")


async def _sizes(settings, user: str, character: str) -> dict[str, int]:
    from redis.asyncio import Redis

    from memory import kzg, lzg, pg

    pool = pg.open_pool(settings.database_url, 1, 1)
    r = Redis.from_url(settings.redis_url)
    try:
        await pool.open(wait=True)
        nodes = await lzg.count_by_quelle(pool, user, character)
        return {"turn_rows": len(await pg.turn_ids(pool, user, character)), "lzg_nodes": sum(nodes.values()),
                "kzg_entries": await r.hlen(kzg._k(user, character, "entries"))}
    finally:
        await pool.close()
        await r.aclose()


async def run(rt, key: str, turns: int, at: list[int]) -> list[dict]:
    user, character = f"lang-{uuid.uuid4().hex[:6]}", "nova"
    h, times, out = {"Authorization": f"Bearer {key}"}, [], []
    async with httpx.AsyncClient(base_url=rt.url, timeout=120) as c:
        for n in range(1, turns + 1):
            body = {"text": f"{MESSAGES[n % len(MESSAGES)]} ({n})", "turn_id": f"lang-{n:05d}"}
            t0 = time.perf_counter()
            while True:
                r = await c.post(f"/v1/pairs/{user}/{character}/turns", json=body, headers=h)
                if r.status_code == 200:
                    break
                if r.status_code != 429:
                    raise SystemExit(f"turn {n}: {r.status_code} {r.text[:300]}")
                await asyncio.sleep(0.2)  # the pair's previous background still holds its place
            times.append((time.perf_counter() - t0) * 1000)
            if n in at:
                last = times[max(1, n - 10):]  # the first turn, which starts the pair's actor, is its own figure
                out.append({"turn": n, "mean_ms": sum(last) / len(last), **await _sizes(rt.settings, user, character)})
                print(f"  turn {n}: mean of the last 10 {out[-1]['mean_ms']:.0f} ms", flush=True)
    out.insert(0, {"turn": 1, "first_ms": times[0]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--at", default="10,100,500,1000,2000")
    ap.add_argument("--standin-ms", type=float, default=20)
    a = ap.parse_args()
    at = [int(x) for x in a.at.split(",") if int(x) <= a.turns]
    os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray reads it when first imported (cluster/runtime.py)
    from cluster import runtime
    from core.settings import load_settings

    port = _free_port()
    engine = standin.start(port, a.standin_ms, "neu", "hoch")  # every turn salient enough for the KZG
    home = Path(tempfile.mkdtemp(prefix="nblang-", dir="/tmp"))
    rt = runtime.start(load_settings(home=home, http_port=_free_port(), llm_backend="openai", llm_model="standin",
                                     openai_base_url=f"http://127.0.0.1:{port}/v1"))
    try:
        rows = asyncio.run(run(rt, runtime.create_key(None, operator=True), a.turns, at))
    finally:
        runtime.stop(rt)
        engine.terminate()
        shutil.rmtree(home, ignore_errors=True)
    first = rows.pop(0)["first_ms"]
    base = rows[0]["mean_ms"]
    print(f"\none pair, whole turns over HTTP, stand-in engine {a.standin_ms:.0f} ms a call; mean of the 10 turns "
          f"up to turn N against turn {rows[0]['turn']} (the baseline; the pair's first turn, which starts its actor, "
          f"apart: {first:.0f} ms)")
    print("| turn | mean turn, ms | against turn %d | turn rows | LZG nodes | KZG entries |" % rows[0]["turn"])
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['turn']} | {row['mean_ms']:.0f} | {row['mean_ms'] / base:.2f}x | {row['turn_rows']} | "
              f"{row['lzg_nodes']} | {row['kzg_entries']} |")


if __name__ == "__main__":
    main()
