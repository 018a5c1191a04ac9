"""Prometheus metrics through ray.util.metrics (exported by every Ray process, prefixed `ray_`).
Created lazily: outside a Ray worker they are no-ops."""
from __future__ import annotations

from functools import lru_cache

_BOUNDS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000]


@lru_cache(maxsize=1)
def _m():
    import ray

    if not ray.is_initialized():
        return None
    from ray.util.metrics import Counter, Histogram

    return {
        "turn": Histogram("novaberg_turn_latency_ms", "Turn latency", boundaries=_BOUNDS_MS,
                          tag_keys=("character",)),
        "node": Histogram("novaberg_node_latency_ms", "Node latency", boundaries=_BOUNDS_MS, tag_keys=("node",)),
        "tokens": Counter("novaberg_llm_tokens", "LLM tokens", tag_keys=("kind", "caller")),
        "turns": Counter("novaberg_turns", "Finished turns", tag_keys=("outcome",)),
        "errors": Counter("novaberg_node_errors", "Turns ended by a failed node", tag_keys=("node",)),
    }


def node_latency(node: str, ms: float) -> None:
    m = _m()
    if m:
        m["node"].observe(ms, tags={"node": node})


def turn_latency(character: str, ms: float) -> None:
    m = _m()
    if m:
        m["turn"].observe(ms, tags={"character": character})


def turn_finished(outcome: str) -> None:
    m = _m()
    if m:
        m["turns"].inc(1, tags={"outcome": outcome})


def node_error(node: str) -> None:
    m = _m()
    if m:
        m["errors"].inc(1, tags={"node": node})


def llm_tokens(caller: str, prompt: int, completion: int) -> None:
    m = _m()
    if m:  # a counter takes only positive steps: an empty answer (0 tokens) adds nothing
        if prompt > 0:
            m["tokens"].inc(prompt, tags={"kind": "prompt", "caller": caller})
        if completion > 0:
            m["tokens"].inc(completion, tags={"kind": "completion", "caller": caller})
