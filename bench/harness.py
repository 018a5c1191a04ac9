"""The benchmark harness: simulated users against the whole system, and the LLM engine alone on
the same requests, in one run.

A scenario is N pairs × M turns with a think time between a pair's turns and a message mix
(smalltalk, questions that need memory, planner/agent requests, web questions). Turns go over HTTP
(`--driver http`, the default) or straight to the pair actors (`--driver actors`). While the
scenario runs, the LLM deployment records every request it serves; afterwards the same requests
are replayed straight against the engine (no actors, no nodes) at the same concurrency, and the
pipeline's LLM throughput is printed next to the raw engine's as a ratio — the figure that says
whether the pipeline keeps the engine busy.

    python -m bench.harness --pairs 8 --turns 5                 # CPU, embedded defaults
    python -m bench.harness --pairs 8 --turns 5 --sweep 1,4,8   # throughput against concurrency
    NOVABERG_LLM_BACKEND=vllm python -m bench.harness --pairs 64 --turns 5 --sweep 8,32,64   # GPU
    python -m bench.harness --pairs 1 --turns 6 --think-s 0 --sweep 8,32 --standin-ms 200 --no-engine-baseline
        # the pipeline's own cost: every LLM call answered after 200 ms by a stand-in (bench/standin.py);
        # adds the turn against its critical path, LLM calls in flight, when the reply starts, CPU per turn
        # (by part of the system; measure on an otherwise idle machine); --schedule written for the written order,
        # --transport ray for the internal deployments called as Ray actor calls instead of over gRPC

Every pair has one unmeasured turn first (its actor is made then), and the clock starts when the
reserve of warm spares those activations took from is full again; `--cold` measures the first turn too.
Activations — pairs that come back after eviction, bursts of new pairs, memory per pair process,
with and without the reserve of warm spares in one run — are measured by `bench/activation.py`.

Writes `report.json`, `latency.png` and `throughput.png` to --out (default bench/results/<time>).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench import standin, turn_graph
from core.wire import ChatRequest
from pipeline.node_config import capped

MESSAGES: dict[str, list[str]] = {
    "smalltalk": ["Hallo, wie geht es dir heute?", "Ich war heute im Park spazieren.", "Was denkst du ueber Regen?",
                  "Erzaehl mir etwas ueber dich.", "Gute Nacht, bis morgen!"],
    "memory": ["Weisst du noch, was ich dir ueber meinen Bruder erzaehlt habe?", "Was habe ich letzte Woche gemacht?",
               "Erinnerst du dich, wie mein Hund heisst?", "Wovon habe ich dir gestern erzaehlt?"],
    "agent": ["Notiz Einkauf: Milch, Brot und Kaese", "Trag einen Termin ein: Zahnarzt, morgen um 14 Uhr",
              "Notiz Urlaub: Koffer packen und Pass suchen", "Trag einen Termin ein: Friseur, uebermorgen um 10 Uhr"],
    "web": ["Wie weit ist der naechste Magnetar von der Erde entfernt?", "Wer hat 2024 den Nobelpreis fuer Physik bekommen?",
            "Wie hoch ist die Zugspitze?"],
}

WARM_UP = "Hallo, da bin ich."
"""The unmeasured first turn of every pair (`Scenario.warm`)."""


@dataclass
class Scenario:
    pairs: int = 8
    turns: int = 5
    think_s: float = 1.0
    mix: dict[str, float] = field(default_factory=lambda: {"smalltalk": 0.4, "memory": 0.25, "agent": 0.2, "web": 0.15})
    seed: int = 7
    latency_ms: float | None = None
    """The stand-in engine's fixed latency, when it answers (the critical path is measured in it)."""
    cpu_exclude: tuple[int, ...] = ()
    """Processes whose CPU is not the system's (the stand-in engine)."""
    warm: bool = True
    """Each pair has had one turn (its actor exists) before the measured turns start."""
    history: int = 0
    """Further unmeasured turns per pair before the clock: a conversation already underway (its
    history, the profiles the background grew, the window that moves), as a companion's pairs mostly are."""
    settled: Any = None
    """An async callable awaited after the unmeasured turns, before the clock starts: the system's
    own settling after the activations (`wait_reserve_full`)."""
    engine_stats: Any = None
    """The stand-in engine's record (`standin.stats` bound to its URL), when it answers: the
    calls of every LLM replica, their tokens and times (`token_figures`)."""
    llm_replicas: int | None = None
    """Replicas of the LLM deployment (a replica no call reached counts in the load's mean)."""

    def earlier(self, pair: int) -> list[str]:
        """The texts of a pair's unmeasured turns: the greeting, then `history` drawn from the mix."""
        back = Scenario(turns=self.history, mix=self.mix, seed=self.seed + 1)
        return [WARM_UP] + [text for _, text in back.messages(pair)] if self.warm else []

    def messages(self, pair: int) -> list[tuple[str, str]]:
        """The (category, text) sequence of one pair: drawn from the mix, reproducible."""
        rnd = random.Random(self.seed * 1000 + pair)
        cats, weights = zip(*self.mix.items())
        out = []
        for _ in range(self.turns):
            c = rnd.choices(cats, weights)[0]
            out.append((c, rnd.choice(MESSAGES[c])))
        return out


# ------------------------------------------------------------------------------------- figures
def pct(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (None without values)."""
    s = sorted(values)
    if not s:
        return None
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return round(s[k], 2)


def prompt_text(messages: list[dict[str, str]]) -> str:
    return "".join(f"<{m['role']}>{m['content']}" for m in messages)


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


BLOCK = re.compile(r"\[[A-ZÄÖÜ][^\]\n]{1,60}\]|<(?:system|user|assistant)>")


def prefix_reuse(records: list[dict]) -> dict[str, dict[str, Any]]:
    """Per node: the share of each prompt that equals the same node's previous prompt for the same
    pair (characters of the rendered messages), averaged over the prompts that have a predecessor,
    and the block (the last `[…]` header or message role before the first difference) where the
    reuse broke most often."""
    last: dict[tuple[str, str], str] = {}
    shares: dict[str, list[float]] = {}
    breaks: dict[str, Counter] = {}
    for rec in sorted(records, key=lambda r: r["started"]):
        req = rec["request"]
        key = (req.get("pair", "?"), req.get("caller", "?"))
        text = prompt_text(req["messages"])
        prev = last.get(key)
        if prev is not None and text:
            same = common_prefix(prev, text)
            shares.setdefault(key[1], []).append(same / len(text))
            if same < len(text):
                heads = BLOCK.findall(text[:same + 1])
                breaks.setdefault(key[1], Counter())[heads[-1] if heads else "(start)"] += 1
        last[key] = text
    return {node: {"mean": round(statistics.mean(v), 4), "prompts": len(v),
                   "bricht_bei": breaks.get(node, Counter()).most_common(1)[0][0] if breaks.get(node) else None}
            for node, v in sorted(shares.items())}


def summarise(rows: list[dict], wall_s: float, records: list[dict], llm_before: dict, llm_after: dict) -> dict[str, Any]:
    lat = [r["client_ms"] for r in rows]
    actor = sum(r["actor_ms"] for r in rows)
    inside = sum(r["llm_ms"] + r["embed_ms"] for r in rows)
    per_node: dict[str, list[float]] = {}
    for r in rows:
        for node, ms in r["nodes_ms"].items():
            per_node.setdefault(node, []).append(ms)
    by_cat: dict[str, list[float]] = {}
    for r in rows:
        by_cat.setdefault(r["category"], []).append(r["client_ms"])
    busy = (llm_after.get("busy_s", 0) - llm_before.get("busy_s", 0))
    completion = sum(r["usage"].get("completion_tokens", 0) for r in records)
    prompt = sum(r["usage"].get("prompt_tokens", 0) for r in records)
    cached = sum(r["usage"].get("cached_tokens", 0) for r in records)
    n = max(1, len(rows))
    return {
        "turns": len(rows), "errors": sum(1 for r in rows if r.get("error")), "wall_s": round(wall_s, 2),
        "turns_per_s": round(len(rows) / wall_s, 4) if wall_s else None,
        "latency_ms": {"p50": pct(lat, 50), "p95": pct(lat, 95), "p99": pct(lat, 99), "mean": round(statistics.mean(lat), 2) if lat else None},
        "latency_ms_by_category": {c: {"p50": pct(v, 50), "p95": pct(v, 95), "turns": len(v)} for c, v in sorted(by_cat.items())},
        "nodes_ms": {k: {"p50": pct(v, 50), "p95": pct(v, 95)} for k, v in sorted(per_node.items())},
        "llm_calls_per_turn": round(sum(r["llm_calls"] for r in rows) / n, 2),
        "tokens_per_turn": {"prompt": round(sum(r["prompt_tokens"] for r in rows) / n, 1),
                            "completion": round(sum(r["completion_tokens"] for r in rows) / n, 1)},
        "llm_busy_share": round(min(1.0, busy / wall_s), 4) if wall_s else None,
        "orchestration_overhead_share": round((actor - inside) / actor, 4) if actor else None,
        "llm_requests": len(records), "llm_requests_per_s": round(len(records) / wall_s, 4) if wall_s else None,
        "llm_completion_tokens_per_s": round(completion / wall_s, 3) if wall_s else None,
        "llm_prompt_tokens_per_s": round(prompt / wall_s, 3) if wall_s else None,
        "llm_cached_share_recorded": round(cached / prompt, 4) if prompt else None,
        "prefix_reuse": prefix_reuse(records),
    }


def token_figures(calls: list[dict], turns: int, replicas: int | None = None) -> dict[str, Any]:
    """The stand-in's calls of the measured turns: prompt, cached and completion tokens per turn
    and per node, the cached share, time to first token, calls per replica and, from the cost
    model (`standin --cache`), GPU-seconds per turn (an estimate). `replicas`: the LLM replicas
    there are (the load's mean is over them all, those no call reached too)."""
    n = max(1, turns)

    def sums(cs: list[dict]) -> dict[str, float]:
        return {k: sum(c.get(k) or 0 for c in cs) for k in ("prompt_tokens", "cached_tokens", "completion_tokens", "gpu_s")}

    def share(t: dict[str, float]) -> float | None:
        return round(t["cached_tokens"] / t["prompt_tokens"], 4) if t["prompt_tokens"] else None

    def per_turn(t: dict[str, float]) -> dict[str, float]:
        return {"prompt": round(t["prompt_tokens"] / n, 1), "cached": round(t["cached_tokens"] / n, 1),
                "completion": round(t["completion_tokens"] / n, 1)}

    modelled = any(c.get("gpu_s") is not None for c in calls)
    total, nodes = sums(calls), sorted({c["caller"] for c in calls})
    per_replica = Counter(c["replica"] for c in calls)
    responder = [c["ttft_ms"] for c in calls if c["caller"] == "responder"]
    by_pair: dict[str, Counter] = {}
    for c in calls:
        if c.get("pair"):
            by_pair.setdefault(c["pair"], Counter())[c["replica"]] += 1
    haupt = {p: r.most_common(1)[0][0] for p, r in by_pair.items()}
    by_node = {}
    for node in nodes:
        cs = [c for c in calls if c["caller"] == node]
        t = sums(cs)
        mit_paar = [c for c in cs if c.get("pair") in haupt]
        by_node[node] = {"calls_per_turn": round(len(cs) / n, 2), "tokens_per_turn": per_turn(t), "cached_share": share(t),
                         "ttft_p50_ms": pct([c["ttft_ms"] for c in cs], 50),
                         "gpu_s_per_turn": round(t["gpu_s"] / n, 4) if modelled else None,
                         # the share of its calls on the replica that served most of its pair's calls
                         "pair_affinity": round(sum(c["replica"] == haupt[c["pair"]] for c in mit_paar) / len(mit_paar), 4)
                         if mit_paar else None}
    mean = len(calls) / max(replicas or 0, len(per_replica), 1)
    return {"calls": len(calls), "cached_share": share(total), "tokens_per_turn": per_turn(total),
            "gpu_s_per_turn": round(total["gpu_s"] / n, 4) if modelled else None,
            "responder_ttft_p50_ms": pct(responder, 50), "responder_ttft_p95_ms": pct(responder, 95),
            "ttft_p50_ms": pct([c["ttft_ms"] for c in calls], 50),
            "replica_calls": dict(sorted(per_replica.items())),
            "replica_load_max_over_mean": round(max(per_replica.values()) / mean, 3) if mean else None,
            # the share of a pair's calls on the replica that served most of them, averaged over pairs
            "pair_affinity": round(statistics.mean(max(r.values()) / sum(r.values()) for r in by_pair.values()), 4)
            if by_pair else None,
            # a pair's calls by replica, most first, averaged over pairs: a bounded share's overflow lands
            # on one second replica, a fallback's spreads over the others
            "pair_replica_shares": [round(statistics.mean(x), 4) for x in zip(*(
                sorted((v / sum(r.values()) for v in r.values()), reverse=True) + [0.0] * (len(per_replica) - len(r))
                for r in by_pair.values()))] if by_pair else None,
            "by_node": by_node}


# ------------------------------------------------------------------------------------- drivers
class HttpDriver:
    def __init__(self, url: str, key: str, concurrency: int):
        import httpx

        self.client = httpx.AsyncClient(base_url=url, timeout=900, limits=httpx.Limits(max_connections=concurrency + 4))
        self.key = key

    async def turn(self, user: str, character: str, text: str) -> dict:
        r = await self.client.post(f"/v1/pairs/{user}/{character}/turns", json={"text": text},
                                   headers={"Authorization": f"Bearer {self.key}"})
        if r.status_code != 200:
            return {"error": f"HTTP {r.status_code}: {r.text[:200]}"}
        return r.json()

    async def close(self):
        await self.client.aclose()


class ActorDriver:
    """Straight to the pair actors (no HTTP, no ingress): in the driver process of the cluster."""

    def __init__(self, settings):
        self.settings = settings
        self._redis = None
        self._pairs: dict[tuple[str, str], Any] = {}

    async def turn(self, user: str, character: str, text: str) -> dict:
        from actors.activation import aktivieren
        from core.wire import PairTurnRequest, TurnFailure
        from memory.redis_client import verbinden

        import ray

        from actors.registry import PairSuperseded

        request = PairTurnRequest(text=text)
        for attempt in range(3):
            if (user, character) not in self._pairs:  # activated as the ingress does: through the registry
                self._redis = self._redis or verbinden(self.settings.redis_url, self.settings.redis_reconnect_s)
                self._pairs[(user, character)] = await aktivieren(self._redis, self.settings, user, character)
            try:
                out = await self._pairs[(user, character)].turn.remote(request)
                break
            except (ray.exceptions.RayActorError, PairSuperseded):  # evicted meanwhile: activated anew
                self._pairs.pop((user, character), None)
                if attempt == 2:
                    raise
        if isinstance(out, TurnFailure):
            return {"turn_id": out.turn_id, "error": out.model_dump(exclude={"turn_id"})}
        return out.body()

    async def close(self):
        if self._redis is not None:
            await self._redis.aclose()


async def run_scenario(driver, sc: Scenario, llm, progress=None, tag: str | None = None) -> dict[str, Any]:
    """The scenario's turns (pairs concurrently, each pair's turns in order), the LLM requests they
    caused, and the figures."""
    tag = tag or uuid.uuid4().hex[:6]
    rows: list[dict] = []

    async def one_pair(i: int):
        user = f"bench{i}-{tag}"
        for t, (cat, text) in enumerate(sc.messages(i)):
            if t and sc.think_s:
                await asyncio.sleep(sc.think_s)
            began, t0 = time.time(), time.perf_counter()
            out = await driver.turn(user, "nova", text)
            ms = (time.perf_counter() - t0) * 1000
            tm, us = out.get("timings", {}), out.get("usage", {})
            rows.append({"pair": i, "category": cat, "client_ms": ms, "error": out.get("error"),
                         "llm_pair": f"{user}:nova", "began": began,
                         "actor_ms": tm.get("total_ms", 0.0), "llm_ms": tm.get("llm_ms", 0.0),
                         "embed_ms": tm.get("embed_ms", 0.0), "nodes_ms": tm.get("nodes_ms", {}),
                         "nodes_start_ms": tm.get("nodes_start_ms") or {},
                         "nodes_llm_ms": tm.get("nodes_llm_ms") or {},
                         "reply_start_ms": (tm.get("nodes_start_ms") or {}).get("responder"),
                         "llm_calls": us.get("llm_calls", 0), "prompt_tokens": us.get("prompt_tokens", 0),
                         "completion_tokens": us.get("completion_tokens", 0)})
            if progress is not None:
                progress.update(1)

    async def earlier(i: int) -> None:
        for text in sc.earlier(i):
            await driver.turn(f"bench{i}-{tag}", "nova", text)

    probe = engine_probe(sc.engine_stats)
    if sc.warm:  # each pair's actor made and its earlier turns done before the clock starts
        await asyncio.gather(*(earlier(i) for i in range(sc.pairs)))
        await wait_llm_idle(llm, probe=probe)
        if sc.settled is not None:
            await sc.settled()
    mark = (await asyncio.to_thread(sc.engine_stats, 1 << 62))["count"] if sc.engine_stats else 0
    before = await llm.load.remote()
    await llm.record.remote(True)
    cpu0, parts0 = turn_graph.cpu_seconds(sc.cpu_exclude), turn_graph.cpu_by_part(sc.cpu_exclude)
    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(one_pair(i) for i in range(sc.pairs)))
    finally:
        wall = time.perf_counter() - t0
        await wait_llm_idle(llm, probe=probe)  # the background chain of the last turns belongs to them
        cpu = turn_graph.cpu_seconds(sc.cpu_exclude) - cpu0
        parts = turn_graph.cpu_profile(parts0, turn_graph.cpu_by_part(sc.cpu_exclude), len(rows))
        records = await llm.record.remote(False)
    after = await llm.load.remote()
    figures = summarise(rows, wall, records, before, after)
    figures["turn_graph"] = graph_figures(rows, records, sc.latency_ms, cpu)
    figures["turn_graph"]["cpu_s_per_turn_by_part"] = parts
    if sc.engine_stats is not None:
        figures["llm"] = token_figures((await asyncio.to_thread(sc.engine_stats, mark))["calls"], len(rows),
                                       sc.llm_replicas)
    return {"rows": rows, "records": records, "figures": figures}


def engine_probe(engine_stats):
    """What says the stand-in engine is busy, over all LLM replicas (the deployment's own `load`
    answers for the one replica that takes the call): its calls so far and those in flight."""
    if engine_stats is None:
        return None

    async def probe() -> tuple[int, int]:
        out = await asyncio.to_thread(engine_stats, 1 << 62)
        return out["count"], out["in_flight"]
    return probe


def graph_figures(rows: list[dict], records: list[dict], latency_ms: float | None, cpu_s: float) -> dict[str, Any]:
    """The turn against its critical path, LLM calls in flight, when the reply starts, CPU per turn."""
    n = max(1, len(rows))
    lat = [r["client_ms"] for r in rows]
    starts = [r["reply_start_ms"] + r["client_ms"] - r["actor_ms"] for r in rows if r.get("reply_start_ms") is not None]
    out: dict[str, Any] = {"llm_in_flight": turn_graph.in_flight(records), "reply_start_ms_p50": pct(starts, 50),
                           "cpu_s_per_turn": round(cpu_s / n, 4),
                           "llm_calls_per_turn_by_node": {k: round(v, 2) for k, v in
                                                          sorted(turn_graph.calls_per_turn(records, n).items())}}
    if latency_ms and lat:
        calls = turn_graph.calls_per_turn(records, n)
        out.update(turn_graph.critical_path_ms(calls, latency_ms))
        engine = statistics.median(r["ms"] for r in records) if records else None
        out.update(turn_graph.turn_paths(rows, records, latency_ms, engine))
        out.update(turn_graph.where_own_time_goes(rows))
        if engine:
            # the same against the engine as the LLM deployment met it (each call's time from its backend:
            # the engine's latency, its HTTP server and the client's round trip), not the nominal latency
            out.update(engine_call_ms_p50=round(engine, 2),
                       critical_path_met_ms=turn_graph.critical_path_ms(calls, engine)["critical_path_ms"])
    return out


async def wait_reserve_full(settings, quiet_s: float = 3.0, timeout_s: float = 180.0) -> float:
    """Wait until the reserve of warm spares is full again and has stayed so for `quiet_s`: the
    activations before the clock took spares, and starting their replacements is the activations'
    cost (`bench/activation.py` measures it), not the measured turns'. A system before the reserve
    (no `pair_spares`) has nothing to wait for."""
    target = getattr(settings, "pair_spares", 0)
    if not target:
        return 0.0
    from actors.activation import reserve_stand
    from memory.redis_client import verbinden

    redis = verbinden(settings.redis_url, settings.redis_reconnect_s)
    t0 = full_since = time.perf_counter()
    try:
        while time.perf_counter() - t0 < timeout_s:
            if (await reserve_stand(redis))["spares_ready"] < target:
                full_since = time.perf_counter()
            elif time.perf_counter() - full_since >= quiet_s:
                break
            await asyncio.sleep(0.5)
        else:
            print(f"note: the reserve was not full after {timeout_s:.0f} s; measuring anyway")
    finally:
        await redis.aclose()
    return round(time.perf_counter() - t0, 1)


async def wait_llm_idle(llm, quiet_s: float = 3.0, timeout_s: float = 900.0, probe=None) -> float:
    """Wait until the engine has had nothing to do for `quiet_s` (the background chain of the
    scenario's last turns runs after their replies): the replay must have the engine to itself.
    `probe`: an async callable answering (calls so far, calls in flight) for the whole engine;
    unset, the LLM deployment's `load` (one replica's)."""
    t0 = time.perf_counter()
    last = None
    quiet_since = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if probe is not None:
            mark = await probe()
            busy = mark[1]
        else:
            load = await llm.load.remote()
            mark, busy = (load.get("requests"), load.get("queued")), load.get("queued")
        if mark != last or busy:
            last, quiet_since = mark, time.perf_counter()
        elif time.perf_counter() - quiet_since >= quiet_s:
            break
        await asyncio.sleep(0.5)
    return round(time.perf_counter() - t0, 1)


async def replay(llm, records: list[dict], concurrency: int, progress=None) -> dict[str, Any]:
    """The recorded requests straight against the engine, `concurrency` at a time, in recorded order."""
    queue: asyncio.Queue = asyncio.Queue()
    for r in sorted(records, key=lambda r: r["started"]):
        queue.put_nowait(r["request"])
    done: list[dict] = []

    async def worker():
        while not queue.empty():
            req = queue.get_nowait()
            t0 = time.perf_counter()
            out = await llm.chat.remote(ChatRequest.model_validate({**req, "caller": f"replay:{req.get('caller', '?')}"}))
            done.append({"ms": (time.perf_counter() - t0) * 1000, "usage": out.usage.model_dump() if out.usage else {}})
            if progress is not None:
                progress.update(1)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    wall = time.perf_counter() - t0
    completion = sum(d["usage"].get("completion_tokens", 0) for d in done)
    prompt = sum(d["usage"].get("prompt_tokens", 0) for d in done)
    return {"requests": len(done), "wall_s": round(wall, 2), "requests_per_s": round(len(done) / wall, 4) if wall else None,
            "completion_tokens_per_s": round(completion / wall, 3) if wall else None,
            "prompt_tokens_per_s": round(prompt / wall, 3) if wall else None,
            "latency_ms": {"p50": pct([d["ms"] for d in done], 50), "p95": pct([d["ms"] for d in done], 95)}}


def compare(pipeline: dict, engine: dict) -> dict[str, Any]:
    """Pipeline LLM throughput as a share of the raw engine's on the same requests."""
    def ratio(a, b):
        return round(a / b, 4) if a is not None and b else None

    return {"requests_per_s": ratio(pipeline["llm_requests_per_s"], engine["requests_per_s"]),
            "prompt_tokens_per_s": ratio(pipeline["llm_prompt_tokens_per_s"], engine["prompt_tokens_per_s"]),
            "completion_tokens_per_s": ratio(pipeline["llm_completion_tokens_per_s"], engine["completion_tokens_per_s"]),
            "wall_s_engine_over_pipeline": ratio(engine["wall_s"], pipeline["wall_s"])}


# ------------------------------------------------------------------------------------- report
def gpu_info() -> dict[str, Any]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {"present": False, "note": "no GPU on this machine (nvidia-smi not found): GPU figures were not measured"}
    try:
        out = subprocess.run([smi, "--query-gpu=name,memory.total", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001 - reported, not raised
        return {"present": False, "note": f"nvidia-smi failed: {e}"}
    return {"present": bool(out), "gpus": [line.strip() for line in out.splitlines() if line.strip()]}


def plots(report: dict, rows: list[dict], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    fig, ax = plt.subplots(figsize=(7, 4))
    cats = sorted({r["category"] for r in rows})
    ax.hist([[r["client_ms"] / 1000 for r in rows if r["category"] == c] for c in cats], bins=20, stacked=True,
            label=cats)
    for q, ls in (("p50", "--"), ("p95", ":")):
        v = report["main"]["pipeline"]["latency_ms"][q]
        if v is not None:
            ax.axvline(v / 1000, color="k", linestyle=ls, label=f"{q} {v / 1000:.1f} s")
    ax.set_xlabel("turn latency (s)")
    ax.set_ylabel("turns")
    ax.set_title(f"Turn latency — {report['main']['scenario']['pairs']} pairs × {report['main']['scenario']['turns']} turns")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=110)
    plt.close(fig)
    files.append("latency.png")

    sweep = report["sweep"]
    fig, ax1 = plt.subplots(figsize=(7, 4))
    xs = [p["pairs"] for p in sweep]
    ax1.plot(xs, [p["pipeline"]["turns_per_s"] for p in sweep], "o-", label="pipeline turns/s")
    ax1.set_xlabel("concurrent pairs")
    ax1.set_ylabel("turns/s")
    ax2 = ax1.twinx()
    ax2.plot(xs, [p["pipeline"]["llm_completion_tokens_per_s"] for p in sweep], "s--", color="tab:orange",
             label="pipeline LLM tokens/s")
    ax2.plot(xs, [p["engine"]["completion_tokens_per_s"] if p.get("engine") else None for p in sweep], "^:",
             color="tab:green", label="raw engine tokens/s")
    ax2.set_ylabel("completion tokens/s")
    lines = ax1.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax1.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper left")
    ax1.set_title("Throughput against concurrency")
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)
    files.append("throughput.png")
    return files


def _progress(total: int, desc: str):
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="turn" if "turn" in desc else "req")
    except ImportError:  # the bench extra is not installed: run without a bar
        return None


async def run_all(driver_factory, llm, scenario: Scenario, sweep: list[int], engine_baseline: bool = True,
                  show_progress: bool = True, dump: Path | None = None) -> tuple[dict[str, Any], list[dict]]:
    levels = sorted(set(sweep) | {scenario.pairs})
    points, main, main_rows = [], None, []
    for pairs in levels:
        sc = replace(scenario, pairs=pairs)
        driver = driver_factory(pairs)
        bar = _progress(pairs * sc.turns, f"{pairs} pairs: turns") if show_progress else None
        try:
            run = await run_scenario(driver, sc, llm, bar)
        finally:
            await driver.close()
            if bar is not None:
                bar.close()
        point = {"pairs": pairs, "pipeline": run["figures"]}
        if engine_baseline and run["records"]:
            await wait_llm_idle(llm, probe=engine_probe(scenario.engine_stats))
            bar = _progress(len(run["records"]), f"{pairs} pairs: engine replay") if show_progress else None
            try:
                point["engine"] = await replay(llm, run["records"], concurrency=pairs, progress=bar)
            finally:
                if bar is not None:
                    bar.close()
            point["pipeline_over_engine"] = compare(run["figures"], point["engine"])
        points.append(point)
        if pairs == scenario.pairs:
            if dump is not None:
                dump.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in run["records"]))
            main = {"scenario": {k: v for k, v in asdict(sc).items() if k not in ("settled", "engine_stats")},
                    **{k: v for k, v in point.items() if k != "pairs"}}
            main_rows = run["rows"]
    return {"main": main, "sweep": points}, main_rows


def print_summary(report: dict) -> None:
    m = report["main"]
    p, sc = m["pipeline"], m["scenario"]
    print(f"\n== {sc['pairs']} pairs × {sc['turns']} turns, think {sc['think_s']} s, backend {report['system']['llm_backend']}"
          f" ({report['system']['llm_model']})")
    print(f"turns/s {p['turns_per_s']}  latency p50/p95/p99 ms {p['latency_ms']['p50']} / {p['latency_ms']['p95']} / "
          f"{p['latency_ms']['p99']}  errors {p['errors']}")
    print(f"LLM calls/turn {p['llm_calls_per_turn']}  tokens/turn prompt {p['tokens_per_turn']['prompt']} completion "
          f"{p['tokens_per_turn']['completion']}  LLM busy share {p['llm_busy_share']}  orchestration overhead "
          f"{p['orchestration_overhead_share']}")
    if "engine" in m:
        e, r = m["engine"], m["pipeline_over_engine"]
        print(f"engine replay ({e['requests']} requests, same concurrency): {e['completion_tokens_per_s']} tok/s, "
              f"{e['requests_per_s']} req/s — pipeline {p['llm_completion_tokens_per_s']} tok/s, "
              f"{p['llm_requests_per_s']} req/s")
        print(f"pipeline / engine: requests/s {r['requests_per_s']}, prompt tokens/s {r['prompt_tokens_per_s']}, "
              f"completion tokens/s {r['completion_tokens_per_s']}")
    print("prefix reuse per node (where it broke most): " + ", ".join(
        f"{k} {v['mean']:.2f}" + (f" ({v['bricht_bei']})" if v.get("bricht_bei") else "")
        for k, v in p["prefix_reuse"].items()))
    print("nodes p50 ms: " + ", ".join(f"{k} {v['p50']}" for k, v in p["nodes_ms"].items()))
    if p.get("llm"):
        t = p["llm"]
        print(f"tokens per turn (stand-in) prompt {t['tokens_per_turn']['prompt']} cached {t['tokens_per_turn']['cached']} "
              f"completion {t['tokens_per_turn']['completion']}, cached share {t['cached_share']}, responder time to "
              f"first token p50 {t['responder_ttft_p50_ms']} ms, GPU-seconds per turn (estimate) {t['gpu_s_per_turn']}, "
              f"calls per replica {list(t['replica_calls'].values())} (max/mean {t['replica_load_max_over_mean']})")
    g = p.get("turn_graph", {})
    print(f"turn graph: LLM calls in flight max {g['llm_in_flight']['max']} mean {g['llm_in_flight']['mean_while_busy']}, "
          f"reply starts p50 {g['reply_start_ms_p50']} ms, CPU per turn {g['cpu_s_per_turn']} s"
          + (f", critical path of the mean turn {g['critical_path_ms']} ms (serial {g['serial_ms']} ms)"
             if "critical_path_ms" in g else "")
          + (f"; each turn against its own critical path (p50): turn / critical path {g['turn_over_critical_path']}, "
             f"own time {g['own_ms_p50']} ms, own share {g['own_share']}" if "own_share" in g else "")
          + (f" (engine call as met p50 {g['engine_call_ms_p50']} ms: own time {g['own_met_ms_p50']} ms, "
             f"own share {g['own_share_met']})" if "own_share_met" in g else ""))
    if "llm_call_at_pair_ms_p50" in g:
        print(f"own time: a model call at the pair actor p50 {g['llm_call_at_pair_ms_p50']} ms (at the LLM deployment "
              f"{g.get('engine_call_ms_p50')} ms), the client beyond the pair actor p50 "
              f"{g.get('client_beyond_actor_ms_p50')} ms; nodes' own code p50 ms: " + ", ".join(
                  f"{k} {v}" for k, v in sorted((g.get("node_own_ms_p50") or {}).items(), key=lambda kv: -kv[1])
                  if v >= 0.5))
    print("CPU per turn by part: " + ", ".join(f"{k} {v}" for k, v in g.get("cpu_s_per_turn_by_part", {}).items()))
    for pt in report["sweep"]:
        ratio = pt.get("pipeline_over_engine", {}).get("completion_tokens_per_s")
        print(f"sweep {pt['pairs']:>3} pairs: {pt['pipeline']['turns_per_s']} turns/s, LLM busy "
              f"{pt['pipeline']['llm_busy_share']}, pipeline/engine tokens/s {ratio}, CPU per turn "
              f"{pt['pipeline']['turn_graph']['cpu_s_per_turn']} s")
    print(f"GPU: {report['gpu'].get('gpus') or report['gpu'].get('note')}")


def probe_deadline_s() -> float:
    """How long this run's handles wait for a replica's queue length: Serve's own setting, as it
    read it (`--probe-deadline-s` sets it before Serve is imported)."""
    from ray.serve._private.constants import RAY_SERVE_QUEUE_LENGTH_RESPONSE_DEADLINE_S

    return RAY_SERVE_QUEUE_LENGTH_RESPONSE_DEADLINE_S


def standin_kosten(args: argparse.Namespace):
    """The cost model the stand-in runs with (`--standin-cache`), or None."""
    if not args.standin_cache:
        return None
    over = {"cache_tokens": args.standin_cache_tokens, "prefill_tps": args.standin_prefill_tps}
    return standin.Kosten(**{k: v for k, v in over.items() if v is not None})


def llm_summary(main: dict) -> dict[str, Any]:
    """The report's `llm`: the measured level's token figures (with a stand-in engine; with a real
    one, the cached share of the recorded calls: all of them with one LLM replica) beside its turn
    latency and throughput."""
    p = main["pipeline"]
    return {"cached_share": p.get("llm_cached_share_recorded"), **(p.get("llm") or {}), "turn_p50_ms": p["latency_ms"]["p50"], "turn_p95_ms": p["latency_ms"]["p95"],
            "turns_per_s": p["turns_per_s"]}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The harness's options, checked: a combination that would be silently ignored is an error."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--think-s", type=float, default=1.0)
    ap.add_argument("--mix", default="smalltalk=0.4,memory=0.25,agent=0.2,web=0.15",
                    help="category=weight,... of smalltalk, memory, agent, web")
    ap.add_argument("--sweep", default="", help="further concurrency levels (pairs), e.g. 1,4")
    ap.add_argument("--driver", choices=("http", "actors"), default="http")
    ap.add_argument("--no-engine-baseline", action="store_true")
    ap.add_argument("--max-tokens", type=int, default=48, help="LLM output cap per call (on a scratch system)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--standin-ms", type=float, default=None,
                    help="answer every LLM call from a stand-in engine after this fixed latency, with no compute "
                         "(the openai backend against bench/standin.py): what is left is the pipeline's own cost")
    ap.add_argument("--standin-worte", choices=standin.WORTE, default=None,
                    help="the stand-in's free text (with --standin-ms): always `x` (fest, the default), or worded "
                         "anew for every request (neu), so profiles and memories grow turn by turn as with a real "
                         "engine (prefix reuse as in use)")
    ap.add_argument("--standin-cache", action="store_true",
                    help="answer every LLM call from the cost-modelling stand-in (bench/standin.py --cache): a prefix "
                         "cache, a prefill and a batch per LLM replica, with published figures of an 8B model on one "
                         "H100; the report's `llm` carries cached tokens, time to first token and calls per replica")
    ap.add_argument("--standin-cache-tokens", type=int, default=None,
                    help=f"the modelled prefix cache per replica in tokens (default {standin.Kosten.cache_tokens})")
    ap.add_argument("--standin-prefill-tps", type=float, default=None,
                    help=f"the modelled prefill rate per replica in tokens/s (default {standin.Kosten.prefill_tps:.0f})")
    ap.add_argument("--standin-antwort-zeichen", type=int, default=None,
                    help="the stand-in's reply to the person in characters (0: a short sentence; default with "
                         f"--standin-cache {standin.ANTWORT_ZEICHEN}, a real reply's length, else 0)")
    ap.add_argument("--probe-deadline-s", type=float, default=None,
                    help="how long a Serve handle waits for a replica's queue length before it routes elsewhere "
                         "(RAY_SERVE_QUEUE_LENGTH_RESPONSE_DEADLINE_S, Serve's default 0.1 s; on a machine whose "
                         "cores the system saturates the replicas answer late and calls leave their replica)")
    ap.add_argument("--llm-replicas", type=int, default=None, help="replicas of the LLM deployment (Settings.llm_replicas)")
    ap.add_argument("--routing", choices=("pow2", "pair"), default=None,
                    help="how a model call finds its LLM replica (Settings.llm_routing): Serve's power-of-two choices "
                         "or the pair's replica")
    ap.add_argument("--schedule", choices=("data", "written"), default="data", help="the runner's schedule")
    ap.add_argument("--transport", choices=("grpc", "ray"), default="grpc",
                    help="how the internal deployments are called (Settings.handle_transport)")
    ap.add_argument("--dump-prompts", action="store_true",
                    help="write every LLM request of the main level to prompts.jsonl (to read where prefix reuse broke)")
    ap.add_argument("--history", type=int, default=0,
                    help="further unmeasured turns per pair first: measure a conversation already underway")
    ap.add_argument("--cold", action="store_true",
                    help="measure each pair's first turn too (its actor is made then); default: one unmeasured turn first")
    args = ap.parse_args(argv)

    if args.cold and args.history:
        ap.error("--history needs the unmeasured turns that --cold leaves out")
    if args.standin_cache and args.standin_ms is not None:
        ap.error("--standin-cache models each call's latency: it takes no fixed --standin-ms")
    if args.standin_antwort_zeichen is not None and not (args.standin_cache or args.standin_ms is not None):
        ap.error("--standin-antwort-zeichen sets the stand-in engine's replies: it needs --standin-ms or --standin-cache")
    if (args.standin_cache_tokens is not None or args.standin_prefill_tps is not None) and not args.standin_cache:
        ap.error("--standin-cache-tokens and --standin-prefill-tps set the cost model: they need --standin-cache")
    if args.llm_replicas is not None and args.llm_replicas < 1:
        ap.error("--llm-replicas takes 1 or more")
    stand_in = args.standin_ms is not None or args.standin_cache
    if args.standin_worte is not None and not stand_in:
        ap.error("--standin-worte words the stand-in engine's answers: it needs --standin-ms or --standin-cache")
    if stand_in and args.standin_worte is None:
        args.standin_worte = "fest"
    try:
        args.mix = {k: float(v) for k, v in (x.split("=") for x in args.mix.split(",") if x)}
    except ValueError:
        ap.error(f"--mix {args.mix!r}: category=weight,... with numbers as weights")
    unknown = set(args.mix) - set(MESSAGES)
    if unknown:
        ap.error(f"unknown message categories {sorted(unknown)}; known: {sorted(MESSAGES)}")
    return args


def main() -> None:
    args = parse_args()
    mix = args.mix
    engine: dict = {}
    proc = None
    kosten = standin_kosten(args)
    if args.standin_ms is not None or kosten is not None:
        port = _free_port()
        proc = standin.start(port, args.standin_ms or 0.0, args.standin_worte, kosten=kosten,
                             antwort_zeichen=args.standin_antwort_zeichen)
        engine = {"llm_backend": "openai", "openai_base_url": f"http://127.0.0.1:{port}/v1", "llm_model": "standin"}
    engine.update({k: v for k, v in (("llm_replicas", args.llm_replicas), ("llm_routing", args.routing)) if v is not None})
    base_url = engine.get("openai_base_url")
    scenario = Scenario(pairs=args.pairs, turns=args.turns, think_s=args.think_s, mix=mix, seed=args.seed,
                        latency_ms=args.standin_ms, cpu_exclude=(proc.pid,) if proc else (), warm=not args.cold,
                        history=args.history,
                        engine_stats=(lambda since: standin.stats(base_url, since)) if proc else None)
    sweep = [int(x) for x in args.sweep.split(",") if x.strip()]
    out = args.out or Path("bench/results") / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)

    os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray reads it when first imported (cluster/runtime.py)
    if args.probe_deadline_s is not None:  # before Serve is imported: the raylet's workers inherit it
        os.environ["RAY_SERVE_QUEUE_LENGTH_RESPONSE_DEADLINE_S"] = str(args.probe_deadline_s)
    from ray import serve

    from cluster import runtime
    from core.settings import load_settings
    from core.names import APP_NAME, LLM_DEPLOYMENT

    home = Path(tempfile.mkdtemp(prefix="nbbench-", dir="/tmp"))
    settings = load_settings(home=home, http_port=int(os.environ.get("NOVABERG_HTTP_PORT", "8765")),
                             node_max_tokens=capped(args.max_tokens), schedule=args.schedule,
                             handle_transport=args.transport, **engine)
    scenario.llm_replicas = settings.llm_replicas
    rt = runtime.start(settings)
    scenario.settled = lambda: wait_reserve_full(rt.settings)
    try:
        key = runtime.create_key(None, operator=True)
        llm = serve.get_deployment_handle(LLM_DEPLOYMENT, app_name=APP_NAME)
        load = llm.load.remote().result()
        if settings.llm_replicas > 1:
            print("note: the LLM deployment has several replicas; the recording sees the one that answers "
                  "record(), so the engine replay covers only its requests")

        def factory(concurrency):
            return HttpDriver(rt.url, key, concurrency) if args.driver == "http" else ActorDriver(rt.settings)

        report, rows = asyncio.run(run_all(factory, llm, scenario, sweep, not args.no_engine_baseline,
                                           dump=out / "prompts.jsonl" if args.dump_prompts else None))
    finally:
        runtime.stop(rt)
        shutil.rmtree(home, ignore_errors=True)
        if proc is not None:
            proc.terminate()
    report.update(system={"llm_backend": load["backend"], "llm_model": load["model"], "driver": args.driver,
                          "http_front": rt.front,
                          "max_tokens": args.max_tokens, "cpus": os.cpu_count(),
                          "llm_replicas": settings.llm_replicas, "llm_routing": settings.llm_routing,
                          "schedule": args.schedule, "transport": args.transport,
                          "standin_ms": args.standin_ms,
                          "standin_kosten": asdict(kosten) if kosten is not None else None,
                          "standin_worte": args.standin_worte,
                          "standin_antwort_zeichen": (args.standin_antwort_zeichen if args.standin_antwort_zeichen
                                                      is not None else standin.ANTWORT_ZEICHEN if kosten else 0)
                          if proc else None,
                          "probe_deadline_s": probe_deadline_s(),
                          "history": args.history},
                  gpu=gpu_info(), measured_at=datetime.now(timezone.utc).isoformat())
    report["llm"] = llm_summary(report["main"])
    (out / "turns.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    report["files"] = ["report.json", "turns.jsonl"] + plots(report, rows, out)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print_summary(report)
    print(f"\nreport and plots in {out}")


if __name__ == "__main__":
    main()
