"""The harness's token figures (bench/harness.py `token_figures`, `--standin-cache`,
`--llm-replicas`, `--routing`) and the cost-modelling stand-in through the real openai backend."""
import asyncio

import pytest

from bench import harness, standin


def call(caller: str, replica: str, prompt: int, cached: int, ttft: float, gpu_s: float | None = 0.01,
         pair: str | None = None) -> dict:
    return {"caller": caller, "replica": replica, "prompt_tokens": prompt, "cached_tokens": cached,
            "completion_tokens": 4, "ttft_ms": ttft, "gpu_s": gpu_s, "pair": pair}


def test_token_figures_count_tokens_per_turn_and_node_and_calls_per_replica():
    calls = [call("responder", "a", 1000, 900, 20.0), call("responder", "b", 1000, 0, 60.0),
             call("router", "a", 500, 400, 5.0), call("router", "a", 500, 400, 5.0)]
    f = harness.token_figures(calls, turns=2, replicas=4)
    assert f["cached_share"] == round(1700 / 3000, 4)
    assert f["tokens_per_turn"] == {"prompt": 1500.0, "cached": 850.0, "completion": 8.0}
    assert f["gpu_s_per_turn"] == 0.02
    assert f["responder_ttft_p50_ms"] in (20.0, 60.0) and f["by_node"]["router"]["ttft_p50_ms"] == 5.0
    assert f["by_node"]["responder"]["tokens_per_turn"] == {"prompt": 1000.0, "cached": 450.0, "completion": 4.0}
    assert f["by_node"]["router"]["cached_share"] == 0.8 and f["by_node"]["router"]["calls_per_turn"] == 1.0
    assert f["replica_calls"] == {"a": 3, "b": 1}
    assert f["replica_load_max_over_mean"] == 3.0  # four calls over four replicas, two of them idle


def test_pair_affinity_is_the_share_of_a_pairs_calls_on_its_most_used_replica():
    calls = [call("router", "a", 10, 0, 1.0, pair="u1:nova"), call("router", "a", 10, 0, 1.0, pair="u1:nova"),
             call("router", "b", 10, 0, 1.0, pair="u1:nova"), call("router", "c", 10, 0, 1.0, pair="u2:nova")]
    assert harness.token_figures(calls, turns=1)["pair_affinity"] == round((2 / 3 + 1) / 2, 4)
    assert harness.token_figures([call("router", "a", 10, 0, 1.0)], turns=1)["pair_affinity"] is None


def test_a_fixed_latency_stand_in_has_no_gpu_estimate():
    f = harness.token_figures([call("responder", "-", 10, 0, 200.0, gpu_s=None)], turns=1)
    assert f["gpu_s_per_turn"] is None and f["by_node"]["responder"]["gpu_s_per_turn"] is None
    assert f["replica_load_max_over_mean"] == 1.0


def test_the_options_set_replicas_routing_and_the_cost_model():
    a = harness.parse_args(["--standin-cache", "--llm-replicas", "4", "--routing", "pow2",
                            "--standin-cache-tokens", "1000"])
    assert (a.llm_replicas, a.routing, a.standin_worte) == (4, "pow2", "fest")
    assert harness.standin_kosten(a) == standin.Kosten(cache_tokens=1000)
    assert harness.standin_kosten(harness.parse_args([])) is None


@pytest.mark.parametrize("argv", [["--standin-cache", "--standin-ms", "200"], ["--standin-cache-tokens", "10"],
                                  ["--llm-replicas", "0"], ["--routing", "random"], ["--standin-worte", "neu"]])
def test_options_that_would_be_ignored_are_refused(argv):
    with pytest.raises(SystemExit):
        harness.parse_args(argv)


def test_the_report_carries_the_llm_figures_beside_turn_latency_and_throughput():
    main = {"pipeline": {"latency_ms": {"p50": 900.0, "p95": 1500.0}, "turns_per_s": 2.5,
                         "llm": {"cached_share": 0.8, "responder_ttft_p50_ms": 40.0, "replica_calls": {"a": 3}}}}
    out = harness.llm_summary(main)
    assert out["cached_share"] == 0.8 and out["responder_ttft_p50_ms"] == 40.0 and out["replica_calls"] == {"a": 3}
    assert (out["turn_p50_ms"], out["turn_p95_ms"], out["turns_per_s"]) == (900.0, 1500.0, 2.5)


def test_without_a_stand_in_the_cached_share_comes_from_the_engines_usage_as_recorded():
    records = [{"usage": {"prompt_tokens": 100, "completion_tokens": 5, "cached_tokens": 60}, "started": 1.0,
                "request": {"messages": [{"role": "user", "content": "a"}], "caller": "router", "pair": "u:nova"}},
               {"usage": {"prompt_tokens": 100, "completion_tokens": 5}, "started": 2.0,
                "request": {"messages": [{"role": "user", "content": "b"}], "caller": "router", "pair": "u:nova"}}]
    rows = [{"client_ms": 900.0, "actor_ms": 800.0, "llm_ms": 0.0, "embed_ms": 0.0, "nodes_ms": {}, "category": "smalltalk",
             "llm_calls": 2, "prompt_tokens": 200, "completion_tokens": 10}]
    p = harness.summarise(rows, 10.0, records, {}, {})
    assert p["llm_cached_share_recorded"] == 0.3
    assert harness.llm_summary({"pipeline": p})["cached_share"] == 0.3


def test_the_cost_modelling_stand_in_caches_a_replicas_prefix_through_the_openai_backend():
    from core.settings import Settings
    from core.wire import ChatRequest
    from serve.llm_backends import OpenAICompatBackend
    from tests.conftest import _free_port

    port = _free_port()
    proc = standin.start(port, 0.0, kosten=standin.Kosten())
    url = f"http://127.0.0.1:{port}/v1"
    messages = [{"role": "system", "content": "Du bist Nova, eine Begleiterin. " * 40},
                {"role": "user", "content": "[GEDAECHTNIS]\nHallo"}]

    async def go():
        backend = OpenAICompatBackend(Settings(openai_base_url=url, llm_model="standin"))
        await backend.start()
        try:
            first = await backend.chat(ChatRequest(messages=messages, caller="verfasser", pair="u:nova"))
            chunks = [c async for c in backend.chat_stream(ChatRequest(messages=messages, caller="verfasser",
                                                                       pair="u:nova"))]
            return first, chunks
        finally:
            await backend.close()

    try:
        first, chunks = asyncio.run(go())
        out = standin.stats(url)
    finally:
        proc.terminate()
    assert first.usage.prompt_tokens > 200 and chunks[-1].usage.prompt_tokens == first.usage.prompt_tokens
    one, two = out["calls"]
    assert one["cached_tokens"] == 0 and two["cached_tokens"] >= two["prompt_tokens"] - 16
    assert two["ttft_ms"] < two["ms"] and one["caller"] == two["caller"] == "verfasser"  # the node named by its header
    assert one["pair"] == "u:nova"
    assert out["count"] == 2 and sum(r["calls"] for r in out["replicas"].values()) == 2
