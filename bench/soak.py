"""Soak: mixed load for a long while on a fresh system with the stand-in engine (bench/standin.py),
watching what drifts. Pairs talk turn after turn (plain, streamed, and streamed with the client
hanging up after the first event), event streams open and hang up, files are uploaded, bad inputs
arrive beside them, and Redis is killed (SIGKILL) and started again on its data halfway through.
Every sample prints the memory of every process of the system (USS), the turns' p50/p95 in that
sample, the 5xx so far and the stores' sizes; at the end, with the outbox drained, it counts the
acknowledged turns missing from Postgres (lost) and the turns stored twice (duplicated).

    python -m bench.soak [--minutes 30] [--pairs 6] [--standin-ms 200] [--sample-s 30]

The figures the goals name: each process's memory between the sample at a sixth of the run
(minute 5 of 30) and the last, the p95 of the run's second sixth against its last sixth, 5xx, lost
and duplicated turns.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import standin
from bench.harness import _free_port, pct

BAD = [  # (method, path template, kwargs): inputs built to break; each must answer 4xx
    ("POST", "/v1/pairs/{u}/{c}/turns", {"content": b"{nicht json", "headers": {"content-type": "application/json"}}),
    ("POST", "/v1/pairs/{u}/{c}/turns", {"json": {"text": "x" * 20000}}),
    ("POST", "/v1/pairs/{u}/{c}/turns", {"json": {"text": "Hallo", "turn_id": "../../etc"}}),
    ("GET", "/v1/pairs/{u}/gibt-es-nicht-{r}/turns", {}),
    ("GET", "/v1/pairs/{u}/{c}/events?after=gestern", {}),
    ("POST", "/v1/pairs/{u}/{c}/files?name=a.txt", {"content": b"abc", "headers": {"content-type": "text/plain; charset=rot13"}}),
    ("POST", "/v1/characters/import", {"content": b"[" * 5000 + b"]" * 5000, "headers": {"content-type": "application/json"}}),
    ("POST", "/v1/chat/completions", {"json": {"model": "{c}", "messages": [{"role": "assistant", "content": "Hm"}]}}),
    ("GET", "/v1/pairs/{u}/{c}/turns", {"headers": {"authorization": b"Bearer \xa0"}}),
]


SMALL_MB = 20.0
"""Processes below this USS (a Postgres backend, a helper) are listed but left out of the largest
change: a megabyte there is a large share of nothing."""


@dataclass
class Tally:
    t0: float = field(default_factory=time.monotonic)
    latency: list[tuple[float, float]] = field(default_factory=list)
    """(seconds into the run, ms) of every acknowledged plain turn."""
    codes: Counter = field(default_factory=Counter)
    """(kind, status) -> count."""
    server_errors: list[tuple[float, str]] = field(default_factory=list)
    """(seconds into the run, what) of every 5xx."""
    restarted_at: float | None = None
    refused: list[str] = field(default_factory=list)
    """Turns answered 4xx other than 429: the load itself is wrong."""
    acked: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def count(self, kind: str, status: int, detail: str = "") -> None:
        self.codes[(kind, status)] += 1
        if status >= 500:
            self.server_errors.append((self.now(), f"{kind} {status} {detail[:200]}"))

    def errors(self, near_restart: bool, within_s: float = 60.0) -> list[str]:
        """The 5xx answered within `within_s` after the store restart, or the others."""
        def near(at):
            return self.restarted_at is not None and 0 <= at - self.restarted_at <= within_s
        return [what for at, what in self.server_errors if near(at) == near_restart]


async def _plain(c: httpx.AsyncClient, tally: Tally, u: str, ch: str, key: str) -> None:
    """One turn, its turn_id sent again on a broken connection, a 429 or a 5xx until it is answered."""
    turn_id, h = uuid.uuid4().hex, {"Authorization": f"Bearer {key}"}
    t0 = time.perf_counter()
    while not tally.stop.is_set():
        try:
            r = await c.post(f"/v1/pairs/{u}/{ch}/turns", headers=h,
                             json={"text": f"Erzaehl mir was Neues ({random.randrange(10**6)}).", "turn_id": turn_id})
        except httpx.HTTPError as e:
            tally.count("turn", 0, type(e).__name__)
            await asyncio.sleep(0.5)
            continue
        tally.count("turn", r.status_code, r.text)
        if r.status_code == 200:
            tally.acked[(u, ch)].append(turn_id)
            tally.latency.append((tally.now(), (time.perf_counter() - t0) * 1000))
            return
        if r.status_code < 500 and r.status_code != 429:
            tally.refused.append(f"turn {r.status_code} {r.text[:200]}")
            return
        await asyncio.sleep(0.5)


async def _streamed(c: httpx.AsyncClient, tally: Tally, u: str, ch: str, key: str, hang_up: bool) -> None:
    """A streamed turn, read to its end, or left after its first event (the turn runs on)."""
    h = {"Authorization": f"Bearer {key}"}
    try:
        async with c.stream("POST", f"/v1/pairs/{u}/{ch}/turns", params={"stream": "true"}, headers=h,
                            json={"text": "Wie war dein Tag?", "turn_id": uuid.uuid4().hex}) as r:
            tally.count("dropped" if hang_up else "stream", r.status_code)
            async for _line in r.aiter_lines():
                if hang_up:
                    break
    except httpx.HTTPError as e:
        tally.count("stream", 0, type(e).__name__)


async def talk(c: httpx.AsyncClient, tally: Tally, u: str, ch: str, key: str, think_s: float) -> None:
    i = 0
    while not tally.stop.is_set():
        i += 1
        if i % 7 == 0:
            await _streamed(c, tally, u, ch, key, hang_up=True)
        elif i % 5 == 0:
            await _streamed(c, tally, u, ch, key, hang_up=False)
        else:
            await _plain(c, tally, u, ch, key)
        await asyncio.sleep(random.uniform(0.5, 1.5) * think_s)


async def listen(c: httpx.AsyncClient, tally: Tally, pairs: list[tuple[str, str]], key: str) -> None:
    """Event streams opened on a pair and hung up after a few seconds, one after another."""
    while not tally.stop.is_set():
        u, ch = random.choice(pairs)
        try:
            async with c.stream("GET", f"/v1/pairs/{u}/{ch}/events", headers={"Authorization": f"Bearer {key}"}) as r:
                tally.count("events", r.status_code)
                with_deadline = time.monotonic() + random.uniform(2, 10)
                async for _line in r.aiter_lines():
                    if time.monotonic() > with_deadline:
                        break
        except httpx.HTTPError as e:
            tally.count("events", 0, type(e).__name__)
        await asyncio.sleep(1.0)


async def upload(c: httpx.AsyncClient, tally: Tally, pairs: list[tuple[str, str]], key: str, every_s: float) -> None:
    n = 0
    while not tally.stop.is_set():
        await asyncio.sleep(every_s)
        u, ch = random.choice(pairs)
        n += 1
        text = f"Notiz {n}: " + " ".join(f"Wort{random.randrange(10**6)}" for _ in range(300))
        try:
            r = await c.post(f"/v1/pairs/{u}/{ch}/files", params={"name": f"notiz-{n}.txt"}, content=text.encode(),
                             headers={"Authorization": f"Bearer {key}", "content-type": "text/plain"})
            tally.count("upload", r.status_code, r.text)
        except httpx.HTTPError as e:
            tally.count("upload", 0, type(e).__name__)


async def bad_inputs(c: httpx.AsyncClient, tally: Tally, pairs: list[tuple[str, str]], key: str) -> None:
    while not tally.stop.is_set():
        await asyncio.sleep(2.0)
        u, ch = random.choice(pairs)
        method, path, kw = random.choice(BAD)
        kw = dict(kw)
        headers = {"authorization": f"Bearer {key}", **kw.pop("headers", {})}
        if "json" in kw and "model" in kw["json"]:
            kw["json"] = {**kw["json"], "model": ch}
        try:
            r = await c.request(method, path.format(u=u, c=ch, r=random.randrange(10**6)), headers=headers, **kw)
            tally.count("bad", r.status_code, f"{method} {path}: {r.text}")
        except httpx.HTTPError as e:
            tally.count("bad", 0, type(e).__name__)


def _processes(stores, exclude: set[int]) -> dict[int, tuple[str, float]]:
    """pid -> (label, USS in MB) of the system's processes: Ray's (workers, raylet, GCS, ...),
    this process's descendants, and the stores' (Redis, the postmaster and its backends)."""
    import psutil

    found = list(psutil.Process().children(recursive=True))
    for pidfile in (Path(stores.home) / "redis" / "redis.pid", Path(stores.home) / "pgdata" / "postmaster.pid"):
        try:
            root = psutil.Process(int(pidfile.read_text().split()[0]))
            found += [root, *root.children(recursive=True)]
        except (OSError, ValueError, IndexError, psutil.Error):
            continue  # a store restarting right now
    out = {}
    for p in found:
        try:
            if p.pid in exclude:
                continue
            cmd = " ".join(p.cmdline())
            label = cmd.split(" ")[0] if cmd.startswith("ray::") else p.name()
            out[p.pid] = (label, p.memory_full_info().uss / 2**20)
        except psutil.Error:
            continue
    return out


async def _store_sizes(settings) -> dict[str, float]:
    from redis.asyncio import Redis

    from memory import pg

    r = Redis.from_url(settings.redis_url)
    pool = pg.open_pool(settings.database_url, 1, 1)
    try:
        await pool.open(wait=True, timeout=10)
        info = await r.info("memory")
        return {"redis_mb": info["used_memory"] / 2**20, "postgres_mb": await pg.database_bytes(pool) / 2**20}
    except Exception as e:  # noqa: BLE001 — a sample while a store restarts: say so, go on
        return {"unavailable": type(e).__name__}
    finally:
        await r.aclose()
        await pool.close()


async def sample(tally: Tally, rt, every_s: float, exclude: set[int], samples: list[dict]) -> None:
    last = 0.0
    while not tally.stop.is_set():
        try:
            await asyncio.wait_for(tally.stop.wait(), timeout=every_s)
        except asyncio.TimeoutError:
            pass
        now = tally.now()
        window = [ms for at, ms in tally.latency if last <= at < now]
        procs = await asyncio.to_thread(_processes, rt.stores, exclude)
        samples.append({"min": round(now / 60, 1), "turns": len(window), "p50_ms": pct(window, 50),
                        "p95_ms": pct(window, 95), "5xx": len(tally.server_errors),
                        "uss_mb": round(sum(m for _, m in procs.values())), "procs": procs,
                        **await _store_sizes(rt.settings)})
        s = samples[-1]
        print(f"  {s['min']:5.1f} min  turns {s['turns']:4d}  p50 {s['p50_ms'] or 0:7.0f}  p95 {s['p95_ms'] or 0:7.0f} ms"
              f"  5xx {s['5xx']}  USS {s['uss_mb']} MB in {len(procs)} processes"
              f"  redis {s.get('redis_mb', 0):.1f} MB  postgres {s.get('postgres_mb', 0):.1f} MB", flush=True)
        last = now


async def restart_redis(tally: Tally, stores, at_s: float) -> None:
    """SIGKILL the embedded Redis at `at_s`, then start it again on its data (AOF)."""
    try:
        await asyncio.wait_for(tally.stop.wait(), timeout=at_s)
        return
    except asyncio.TimeoutError:
        pass
    pid = int((Path(stores.home) / "redis" / "redis.pid").read_text().strip())
    tally.restarted_at = tally.now()
    os.kill(pid, signal.SIGKILL)
    while Path(f"/proc/{pid}").exists() and "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text():
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    await asyncio.to_thread(stores.start, postgres=False, redis=True)
    print(f"  {tally.now() / 60:5.1f} min  redis killed (pid {pid}) and started again", flush=True)


async def _drained(c: httpx.AsyncClient, key: str, timeout_s: float = 600) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            st = (await c.get("/v1/operator/status", headers={"Authorization": f"Bearer {key}"})).json()
            if not st["outbox"]["pending"] and not st["outbox"]["undelivered"]:
                return True
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        await asyncio.sleep(2)
    return False


async def _stored(settings, pairs) -> dict[tuple[str, str], Counter]:
    from memory import pg

    pool = pg.open_pool(settings.database_url, 1, 1)
    await pool.open(wait=True)
    try:
        return {p: Counter(await pg.turn_ids(pool, *p)) for p in pairs}
    finally:
        await pool.close()


def drift(samples: list[dict], tally: Tally, minutes: float) -> dict:
    """The goals' figures: memory per process between the sample at a sixth of the run and the
    last, p95 of the second sixth against the last sixth."""
    start = next((s for s in samples if s["min"] >= minutes / 6), samples[0])
    end = samples[-1]
    per = {}
    for pid, (label, mb) in end["procs"].items():
        if pid in start["procs"]:
            first = start["procs"][pid][1]
            per[f"{start['procs'][pid][0]} ({pid})"] = (round(first, 1), round(mb, 1), round(100 * (mb - first) / first, 1))
    span = minutes * 60

    def p95(lo, hi):
        return pct([ms for at, ms in tally.latency if lo * span <= at < hi * span], 95)

    early, late = p95(1 / 6, 2 / 6), p95(5 / 6, 1.0)
    return {"from_min": start["min"], "to_min": end["min"], "processes": per,
            "max_abs_change_pct": max((abs(v[2]) for v in per.values() if v[0] >= SMALL_MB), default=None),
            "p95_early_ms": early, "p95_late_ms": late,
            "p95_drift_pct": round(100 * (late - early) / early, 1) if early and late else None}


async def soak(rt, key: str, args, exclude: set[int]) -> dict:
    tally, samples = Tally(), []
    run = uuid.uuid4().hex[:6]
    pairs = [(f"soak{i}-{run}", "nova") for i in range(args.pairs)]
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(base_url=rt.url, timeout=120, limits=limits) as c:
        tasks = [asyncio.create_task(talk(c, tally, u, ch, key, args.think_s)) for u, ch in pairs]
        tasks += [asyncio.create_task(listen(c, tally, pairs, key)),
                  asyncio.create_task(upload(c, tally, pairs, key, args.upload_every_s)),
                  asyncio.create_task(bad_inputs(c, tally, pairs, key)),
                  asyncio.create_task(sample(tally, rt, args.sample_s, exclude, samples)),
                  asyncio.create_task(restart_redis(tally, rt.stores, args.minutes * 30))]
        await asyncio.sleep(args.minutes * 60)
        tally.stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        drained = await _drained(c, key)
    stored = await _stored(rt.settings, pairs)
    lost = sum(1 for p, ids in tally.acked.items() for t in ids if stored[p][t] == 0)
    duplicated = sum(1 for counts in stored.values() for n in counts.values() if n > 1)
    return {"minutes": args.minutes, "pairs": args.pairs, "standin_ms": args.standin_ms,
            "turns_acknowledged": sum(len(v) for v in tally.acked.values()), "lost": lost,
            "duplicated": duplicated, "outbox_drained": drained, "5xx": len(tally.errors(False)),
            "5xx_after_restart": len(tally.errors(True)), "server_errors": tally.errors(False)[:20],
            "server_errors_after_restart": tally.errors(True)[:5], "turns_refused": tally.refused[:5],
            "codes": {f"{k} {s}": n for (k, s), n in sorted(tally.codes.items())},
            **drift(samples, tally, args.minutes),
            "samples": [{k: v for k, v in s.items() if k != "procs"} for s in samples]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--think-s", type=float, default=1.0)
    ap.add_argument("--standin-ms", type=float, default=200)
    ap.add_argument("--sample-s", type=float, default=30)
    ap.add_argument("--upload-every-s", type=float, default=20)
    ap.add_argument("--out", type=Path, default=None, help="write the report as JSON here")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray reads it when first imported (cluster/runtime.py)
    from cluster import runtime
    from core.settings import load_settings

    port = _free_port()
    engine = standin.start(port, args.standin_ms, "neu")
    home = Path(tempfile.mkdtemp(prefix="nbsoak-", dir="/tmp"))
    rt = runtime.start(load_settings(home=home, http_port=_free_port(), llm_backend="openai", llm_model="standin",
                                     openai_base_url=f"http://127.0.0.1:{port}/v1"))
    try:
        key = runtime.create_key(None, operator=True)
        report = asyncio.run(soak(rt, key, args, exclude={engine.pid}))
    finally:
        runtime.stop(rt)
        engine.terminate()
        shutil.rmtree(home, ignore_errors=True)
    print_report(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


def print_report(rep: dict) -> None:
    print(f"\nsoak {rep['minutes']} min, {rep['pairs']} pairs, stand-in {rep['standin_ms']:.0f} ms: "
          f"{rep['turns_acknowledged']} turns acknowledged, lost {rep['lost']}, duplicated {rep['duplicated']}, "
          f"5xx {rep['5xx']} (and {rep['5xx_after_restart']} in the minute after Redis was killed), "
          f"outbox drained {rep['outbox_drained']}")
    print(f"memory per process, minute {rep['from_min']} -> {rep['to_min']}: largest change "
          f"{rep['max_abs_change_pct']} % among processes of {SMALL_MB:.0f} MB or more (goal within 10 %)")
    for name, (a, b, d) in sorted(rep["processes"].items(), key=lambda kv: (kv[1][0] < SMALL_MB, -abs(kv[1][2])))[:16]:
        print(f"  {name:50s} {a:8.1f} -> {b:8.1f} MB  {d:+6.1f} %")
    print(f"p95 second sixth {rep['p95_early_ms']} ms, last sixth {rep['p95_late_ms']} ms: drift "
          f"{rep['p95_drift_pct']} % (goal at most 10 %)")
    print("answers: " + ", ".join(f"{k}: {n}" for k, n in rep["codes"].items()))
    for line in rep["turns_refused"]:
        print("  a turn refused: " + line)
    for line in rep["server_errors"]:
        print("  5xx: " + line)
    for line in rep["server_errors_after_restart"]:
        print("  5xx after the restart: " + line)


if __name__ == "__main__":
    main()
