"""The operators' dashboard: what the chain did and decided, next to what Ray's own dashboard shows
about the cluster. Read-only. The same snapshot feeds the JSON endpoint, the page
(`serve/dashboard.html`) and the Prometheus gauges (through `ray.util.metrics`).

Sources: `turns` and `pipeline_log` in Postgres (latencies, decisions), Redis (live and evicted
pairs, failed nodes, the outbox), and the LLM and embedder deployments' cumulative counters,
sampled periodically so that loads are rates over a window.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from actors.pair import EVICTED_PAIRS, LIVE_PAIRS, NODE_ERRORS
from core.bestand import DecisionRate
from memory.clients import StoreOps

log = logging.getLogger("novaberg.dashboard")

PAGE = Path(__file__).with_name("dashboard.html")
IDLE_AFTER_S = 60.0
"""A live pair whose last turn is older than this counts as idle."""


class LoadSampler:
    """Samples the deployments' cumulative counters; a rate is the difference of two samples."""

    def __init__(self, llm, embedder, keep: int = 720):
        self.llm = llm
        self.embedder = embedder
        self.samples: deque[tuple[float, dict, dict]] = deque(maxlen=keep)

    async def sample(self) -> None:
        llm, emb = await asyncio.gather(self.llm.load.remote(), self.embedder.load.remote())
        self.samples.append((time.time(), llm, emb))

    def rates(self, window_s: float) -> tuple[dict[str, Any], dict[str, Any]]:
        if not self.samples:
            return {}, {}
        now_t, llm, emb = self.samples[-1]
        old = next((s for s in self.samples if s[0] >= now_t - window_s), self.samples[-1])
        dt = now_t - old[0]
        llm_out = {"backend": llm.get("backend"), "model": llm.get("model"), "queued": llm.get("queued", 0),
                   "requests": llm.get("requests", 0), "sampled_s": round(dt, 1)}
        emb_out = {"texts": emb.get("texts", 0), "batches": emb.get("batches", 0), "sampled_s": round(dt, 1)}
        if dt > 0:
            d = lambda new, prev, k: (new.get(k, 0) or 0) - (prev.get(k, 0) or 0)  # noqa: E731
            llm_out.update(busy_share=round(min(1.0, d(llm, old[1], "busy_s") / dt), 4),
                           tokens_per_s=round(d(llm, old[1], "completion_tokens") / dt, 2),
                           prompt_tokens_per_s=round(d(llm, old[1], "prompt_tokens") / dt, 2),
                           requests_per_s=round(d(llm, old[1], "requests") / dt, 3))
            emb_out.update(busy_share=round(min(1.0, d(emb, old[2], "busy_s") / dt), 4),
                           texts_per_s=round(d(emb, old[2], "texts") / dt, 3),
                           batch_size=round(d(emb, old[2], "texts") / max(1, d(emb, old[2], "batches")), 2))
        else:
            llm_out.update(busy_share=None, tokens_per_s=None, prompt_tokens_per_s=None, requests_per_s=None)
            emb_out.update(busy_share=None, texts_per_s=None, batch_size=None)
        return llm_out, emb_out


async def pairs_figures(redis, now: float | None = None) -> dict[str, int]:
    now = now or time.time()
    live = {k.decode() if isinstance(k, bytes) else k: float(v) for k, v in (await redis.hgetall(LIVE_PAIRS)).items()}
    from actors.activation import reserve_stand

    return {"alive": len(live), "idle": sum(1 for t in live.values() if now - t > IDLE_AFTER_S),
            "active": sum(1 for t in live.values() if now - t <= IDLE_AFTER_S),
            "evicted_last_hour": int(await redis.zcount(EVICTED_PAIRS, now - 3600, now)),
            **await reserve_stand(redis)}


async def node_errors(redis, since: float) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in await redis.zrangebyscore(NODE_ERRORS, since, "+inf"):
        node = (m.decode() if isinstance(m, bytes) else m).split(":")[1]
        out[node] = out.get(node, 0) + 1
    return out


def decision_table(rates: list[DecisionRate]) -> list[dict]:
    """Rates grouped per decision (one branching point), outcomes by count."""
    groups: dict[str, dict] = {}
    for r in rates:
        g = groups.setdefault(r.entscheidung, {"entscheidung": r.entscheidung, "node": r.entscheidung.split(".")[0],
                                               "total": 0, "outcomes": []})
        g["total"] += r.count
        g["outcomes"].append({"outcome": r.outcome, "count": r.count, "rate": r.rate})
    for g in groups.values():
        g["outcomes"].sort(key=lambda o: (-o["count"], o["outcome"]))
    return sorted(groups.values(), key=lambda g: g["entscheidung"])


async def snapshot(store: StoreOps, redis, sampler: LoadSampler, window_s: float) -> dict[str, Any]:
    from memory import agent_quoten, outbox

    now = datetime.now(timezone.utc)
    since = now - timedelta(seconds=window_s)
    turns, nodes, rates, recent, pairs, backlog, errors, quoten = await asyncio.gather(
        store.dashboard.turn_stats(since), store.dashboard.node_stats(since),
        store.pg.decision_rates(since), store.dashboard.recent_pairs(since, 20),
        pairs_figures(redis), outbox.backlog(redis), node_errors(redis, since.timestamp()), agent_quoten.lesen(redis))
    llm, emb = sampler.rates(window_s)
    turn_figures = {**turns.model_dump(mode="json"), "per_minute": round(turns.count / (window_s / 60), 3)}
    return {"generated_at": now.isoformat(), "since": since.isoformat(), "window_s": window_s, "pairs": pairs,
            "turns": turn_figures, "nodes": [n.model_dump(mode="json") for n in nodes], "errors_by_node": errors,
            "llm": llm, "embedder": emb, "outbox": backlog, "decisions": decision_table(rates),
            "recent_pairs": [p.model_dump(mode="json") for p in recent],
            "agents": [q.model_dump() for q in quoten]}


@lru_cache(maxsize=1)
def _gauges():
    import ray

    if not ray.is_initialized():
        return None
    from ray.util.metrics import Gauge

    g = lambda name, doc, tags=(): Gauge(name, doc, tag_keys=tags)  # noqa: E731
    return {
        "pairs": g("novaberg_pairs", "Pair actors by state", ("state",)),
        "turns_per_minute": g("novaberg_turns_per_minute", "Finished turns per minute over the window"),
        "turn_latency": g("novaberg_turn_latency_window_ms", "Turn latency percentile over the window", ("quantile",)),
        "node_latency": g("novaberg_node_latency_window_ms", "Node latency percentile over the window", ("node", "quantile")),
        "llm": g("novaberg_llm_load", "LLM deployment load over the window", ("figure",)),
        "embedder": g("novaberg_embedder_load", "Embedder load over the window", ("figure",)),
        "outbox": g("novaberg_outbox", "Outbox backlog", ("figure",)),
        "errors": g("novaberg_node_errors_window", "Failed nodes over the window", ("node",)),
        "decision": g("novaberg_decision_rate", "Share of each outcome per decision over the window",
                      ("entscheidung", "outcome")),
    }


def publish(snap: dict[str, Any]) -> None:
    """The snapshot as Prometheus gauges (exported by Ray's metrics agent, next to Ray's own)."""
    g = _gauges()
    if g is None:
        return
    for state in ("alive", "idle", "active", "evicted_last_hour"):
        g["pairs"].set(snap["pairs"][state], tags={"state": state})
    g["turns_per_minute"].set(snap["turns"]["per_minute"])
    for q in ("p50", "p95"):
        if snap["turns"][f"{q}_ms"] is not None:
            g["turn_latency"].set(snap["turns"][f"{q}_ms"], tags={"quantile": q})
        for n in snap["nodes"]:
            if n[f"{q}_ms"] is not None:
                g["node_latency"].set(n[f"{q}_ms"], tags={"node": n["node"], "quantile": q})
    for name in ("llm", "embedder"):
        for k, v in snap[name].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                g[name].set(v, tags={"figure": k})
    for k, v in snap["outbox"].items():
        if isinstance(v, (int, float)):
            g["outbox"].set(v, tags={"figure": k})
    for node, n in snap["errors_by_node"].items():
        g["errors"].set(n, tags={"node": node})
    for d in snap["decisions"]:
        for o in d["outcomes"]:
            g["decision"].set(o["rate"], tags={"entscheidung": d["entscheidung"], "outcome": o["outcome"]})


class DashboardLoop:
    """Samples loads and publishes the gauges every `interval_s`, in the ingress replica."""

    def __init__(self, store, redis_factory, sampler: LoadSampler, interval_s: float, window_s: float):
        self.store = store
        self.redis_factory = redis_factory
        self.sampler = sampler
        self.interval_s = interval_s
        self.window_s = window_s
        self.task: asyncio.Task | None = None

    def ensure(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                await self.sampler.sample()
                publish(await snapshot(self.store, await self.redis_factory(), self.sampler, self.window_s))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("dashboard: sampling failed; next try in %.0fs", self.interval_s, exc_info=True)
            await asyncio.sleep(self.interval_s)


def page() -> str:
    return PAGE.read_text(encoding="utf-8")
