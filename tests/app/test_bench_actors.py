"""The harness straight to the pair actors (`--driver actors`), on the tier's system with the
scripted engine's fixed latency: each turn's model calls are found by its pair and time, and the
turn is measured against the critical path of the calls it made."""
import asyncio

from bench import harness, turn_graph
from tests.app.conftest import LATENCY_S


def test_the_harness_drives_the_pair_actors_and_measures_each_turn_against_its_own_path(system):
    from ray import serve

    from pipeline.chains import CHARACTER_CHAIN, HUMAN_CHAIN
    from pipeline.runner import Loop

    llm = serve.get_deployment_handle("LLM", app_name="novaberg")
    sc = harness.Scenario(pairs=1, turns=3, think_s=0.0, mix={"smalltalk": 1.0}, latency_ms=LATENCY_S * 1000)
    out = asyncio.run(harness.run_scenario(harness.ActorDriver(system.settings), sc, llm))
    rows, records, g = out["rows"], out["records"], out["figures"]["turn_graph"]
    assert len(rows) == 3 and not any(r["error"] for r in rows)
    chain_nodes = {n for chain in (HUMAN_CHAIN, CHARACTER_CHAIN) for s in chain
                   for n in (s.names() if isinstance(s, Loop) else (s.name,))}
    for r in rows:
        assert r["actor_ms"] <= r["client_ms"] and r["nodes_llm_ms"]
        calls = turn_graph.calls_of_turn(records, r["llm_pair"], r["began"], r["began"] + r["client_ms"] / 1000)
        # the pair actor's own count of its model calls is what the recording finds in the turn's time
        # (a background call of the turn before, which runs into it, is no chain node's)
        assert sum(n for node, n in calls.items() if node in chain_nodes) == r["llm_calls"] > 0
        # a node's model calls as the pair actor waited for them: never shorter than the engine's latency
        assert all(ms >= LATENCY_S * 1000 for ms in r["nodes_llm_ms"].values())
    # no turn is faster than the longest chain of its own dependent calls
    assert g["turn_over_critical_path"] >= 1.0 and g["own_ms_p50"] >= 0.0 and 0.0 <= g["own_share"] < 1.0
    assert g["llm_call_at_pair_ms_p50"] >= g["engine_call_ms_p50"] >= LATENCY_S * 1000
    assert g["node_own_ms_p50"]["responder"] >= 0.0 and g["client_beyond_actor_ms_p50"] >= 0.0
