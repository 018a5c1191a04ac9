"""The cost-modelling stand-in (bench/standin.py --cache): its prefix cache per replica, block
by block and least recently used out first, and its latency (queue + uncached prefill + decode),
on a virtual clock."""
import asyncio
import json

from bench import standin
from bench.standin import Buch, Kosten, Motor, PrefixCache, caller_of, kosten_args


def toks(n: int, start: int = 0) -> list[int]:
    return list(range(start, start + n))


def test_a_repeated_prompt_finds_its_whole_blocks_but_computes_its_last_token():
    cache = PrefixCache(10_000, block=16)
    assert cache.serve(toks(100)) == 0
    assert cache.serve(toks(100)) == 96  # 6 whole blocks
    assert cache.serve(toks(96)) == 80  # the whole prompt is never cached: its last block is computed


def test_a_longer_prompt_behind_the_same_prefix_reuses_it_and_a_changed_head_reuses_nothing():
    cache = PrefixCache(10_000, block=16)
    cache.serve(toks(64))
    assert cache.serve(toks(64) + toks(40, 1000)) == 64
    changed = [999] + toks(103)[1:]
    assert cache.serve(changed) == 0  # a block is reused only behind the same prefix


def test_the_cache_holds_its_capacity_and_drops_the_least_recently_used_prompt():
    cache = PrefixCache(64, block=16)  # four blocks
    cache.serve(toks(33))  # a: two blocks
    cache.serve(toks(33, 500))  # b: two blocks
    cache.serve(toks(33, 900))  # c: two blocks; a goes
    assert len(cache.blocks) == 4
    assert cache.serve(toks(33, 500)) == 32
    assert cache.serve(toks(33)) == 0


def test_a_prompt_loses_its_tail_before_its_head():
    cache = PrefixCache(64, block=16)
    cache.serve(toks(65))  # four blocks: the cache full
    cache.serve(toks(17, 500))  # one block in: the prompt's last block goes, its head stays
    assert cache.serve(toks(65)) == 48


class Uhr:
    """A virtual clock: sleeping advances it, no time passes."""

    def __init__(self):
        self.now = 0.0
        self.slept: list[float] = []

    async def sleep(self, s: float) -> None:
        self.slept.append(s)
        await asyncio.sleep(0)  # the others run first: all that is ready starts at the same moment
        self.now += s

    def __call__(self) -> float:
        return self.now


def motor(uhr: Uhr, **kw) -> Motor:
    return Motor(Kosten(**{"prefill_tps": 1000.0, "itl_ms": 10.0, "itl_slope_ms": 0.0, **kw}),
                 count=lambda text: list(text), sleep=uhr.sleep, clock=uhr)


def test_a_call_pays_the_prefill_of_its_uncached_tokens_and_the_decode_of_its_completion():
    uhr = Uhr()
    m = motor(uhr)
    first = asyncio.run(m.serve("r1", "a" * 500, "xyz"))
    assert first["prompt_tokens"] == 500 and first["cached_tokens"] == 0 and first["completion_tokens"] == 3
    assert first["ttft_ms"] == 500.0  # 500 tokens at 1000 a second
    assert first["ms"] == 530.0  # and three tokens at 10 ms
    again = asyncio.run(m.serve("r1", "a" * 500, "xyz"))
    assert again["cached_tokens"] == 496 and again["ttft_ms"] == 4.0
    assert again["gpu_s"] < first["gpu_s"]


def test_each_replica_has_its_own_cache():
    m = motor(Uhr())
    asyncio.run(m.serve("r1", "a" * 500, "x"))
    assert asyncio.run(m.serve("r2", "a" * 500, "x"))["cached_tokens"] == 0
    assert asyncio.run(m.serve(None, "a" * 500, "x"))["cached_tokens"] == 0  # no header: the default replica
    assert asyncio.run(m.serve("r1", "a" * 500, "x"))["cached_tokens"] == 496
    assert set(m.replicas) == {"r1", "r2", standin.DEFAULT_REPLICA}


def test_a_call_queues_behind_its_replicas_prefill_and_its_first_token_comes_after_its_own():
    uhr = Uhr()
    m = motor(uhr, itl_ms=0.0)
    seen: list[float] = []

    async def both():
        async def first():
            seen.append(uhr.now)
        return await asyncio.gather(m.serve("r1", "a" * 300, "x"), m.serve("r1", "b" * 200, "x", first))

    one, two = asyncio.run(both())
    assert one["ttft_ms"] == 300.0
    assert two["queue_ms"] == 300.0 and two["ttft_ms"] == 500.0
    assert seen == [0.5]


def test_a_full_batch_makes_a_call_wait_for_a_place():
    uhr = Uhr()
    m = motor(uhr, batch=1, prefill_tps=1e9, itl_ms=100.0)

    async def both():
        return await asyncio.gather(m.serve("r1", "a", "xx"), m.serve("r1", "b", "xx"))

    _, two = asyncio.run(both())
    assert two["queue_ms"] >= 200.0  # the first call's two tokens decoded before it got in


def test_the_batch_slows_every_sequence_in_it():
    uhr = Uhr()
    m = motor(uhr, prefill_tps=1e9, itl_ms=10.0, itl_slope_ms=5.0)
    alone = asyncio.run(m.serve("r1", "a", "x" * 10))
    m.replica("r1").decoding = 2  # two sequences decoding when the call's decode starts
    beside = asyncio.run(m.serve("r1", "b", "x" * 10))
    assert alone["ms"] - alone["ttft_ms"] == 100.0
    assert beside["ms"] - beside["ttft_ms"] == 10 * (10.0 + 2 * 5.0)
    assert m.replica("r1").decoding == 2


def test_the_caller_comes_from_the_header_the_schema_or_the_responders_task_block():
    assert caller_of({"messages": []}, "router") == "router"
    assert caller_of({"messages": [{"content": "x"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "perzeption_antwort", "schema": {}}}}) == "perzeption"
    assert caller_of({"messages": [{"content": "vorher\n" + standin.AKTUELL + "Hallo"}]}) == "responder"
    assert caller_of({"messages": [{"content": "Antworte mit ERGEBNIS: ..."}]}) == "thinker"
    assert caller_of({"messages": [{"content": "frei"}]}) == "frei"


def test_the_book_counts_calls_and_tokens_per_replica_and_hands_calls_from_a_mark():
    buch = Buch()
    for rep, cached in (("a", 10), ("a", 0), ("b", 5)):
        buch.add({"replica": rep, "prompt_tokens": 20, "cached_tokens": cached, "completion_tokens": 1, "gpu_s": 0.5})
    out = buch.stats(since=2)
    assert out["count"] == 3 and len(out["calls"]) == 1
    assert out["replicas"]["a"]["calls"] == 2 and out["replicas"]["a"]["cached_tokens"] == 10
    assert out["replicas"]["b"]["gpu_s"] == 0.5
    json.dumps(out)


def test_the_costs_reach_the_stand_ins_process_as_options():
    import argparse
    from dataclasses import fields

    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", action="store_true")
    for f in fields(Kosten):
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    k = Kosten(prefill_tps=123.0, cache_tokens=4096, batch=3)
    args = ap.parse_args(kosten_args(k))
    assert args.cache and Kosten(**{f.name: getattr(args, f.name) for f in fields(Kosten)}) == k
