"""The dependency graph the runner derives from the nodes' declarations: what waits for what in
the product's chains, and declarations that cover every store a node touches inside the turn."""
import inspect
import re

import pytest

from memory import clients
from pipeline import schedule
from pipeline.chains import CHARACTER_CHAIN, HUMAN_CHAIN, NODES
from pipeline.runner import ChainRunner, Loop, EarlyStart

OP = re.compile(r"store\.(" + "|".join(c.MODULE for c in clients.MODULES) + r")\.\w+\(")
"""A store operation called through the typed clients: `deps.store.timeline.add(`."""
STORE_OF_OP = {"lesepfad": "lzg"}  # the read path reads the LZG
HELPERS = {"agent_dispatch": ("pipeline.agents.notizen.dispatch", "pipeline.agents.timeline.dispatch",
                              "pipeline.agents.charakter.dispatch", "pipeline.agents.direktiven.dispatch"),
           "enricher": ("pipeline.plugins.notizen", "pipeline.plugins.timeline", "pipeline.plugins.bibliothek"),
           "thinker": ("pipeline.thinker.tools", "pipeline.dienste")}


def _name(step):
    if isinstance(step, Loop):
        return step.name
    return f"early:{step.name}" if isinstance(step, EarlyStart) else step.name


def _waves(chain, **kw):
    runner = ChainRunner(chain, name="x", **kw)
    names = [_name(s) for s in runner.steps]
    return [[names[j] for j in w] for w in schedule.waves(runner.waits_for)]


def test_the_character_chain_runs_independent_nodes_side_by_side():
    waves = _waves(CHARACTER_CHAIN)
    assert waves[0] == ["db_zugriff", "sachlage"]  # sachlage reads only the stimulus
    assert ["planner_schleife", "gv_node", "haltungsraum"] in waves  # all three wait only for the router
    where = {n: k for k, w in enumerate(waves) for n in w}
    # the erinnerungsanker writes the timeline the enricher's plugins read before and the router reads after
    assert where["enricher"] < where["erinnerungsanker"] < where["router"]
    assert where["responder"] < where["thinker"] < where["tribunal_schleife"] < where["leckschutz"]
    assert _waves(HUMAN_CHAIN) == [["perzeption"], ["enricher"], ["ei_calc"]]


def test_perzeption_assistant_starts_beside_the_tribunal_loop_and_waits_for_its_early_start():
    waves = _waves(CHARACTER_CHAIN)
    where = {n: k for k, w in enumerate(waves) for n in w}
    # her reply is perceived once the Thinker is done, beside the tribunal loop and the leak guard
    assert where["early:perzeption_assistant"] == where["tribunal_schleife"] == where["thinker"] + 1
    assert where["leckschutz"] < where["perzeption_assistant"] < where["ei_calc_persist"]
    runner = ChainRunner(CHARACTER_CHAIN, name="x")
    names = [_name(s) for s in runner.steps]
    assert names.index("early:perzeption_assistant") in runner.waits_for[names.index("perzeption_assistant")]
    # in the node deployment, or in the written order, nothing starts early
    for kw in ({"remote": ["perzeption_assistant"], "nodes_handle": object()}, {"schedule": "written"}):
        assert "early:perzeption_assistant" not in [_name(s) for s in ChainRunner(CHARACTER_CHAIN, **kw).steps]


def test_the_routers_model_call_starts_beside_the_erinnerungsanker_and_reads_the_timeline_after_it():
    where = {n: k for k, w in enumerate(_waves(CHARACTER_CHAIN)) for n in w}
    assert where["early:router"] == where["erinnerungsanker"] == where["enricher"] + 1
    assert where["erinnerungsanker"] < where["router"]  # its timeline read waits for the anchor's write
    runner = ChainRunner(CHARACTER_CHAIN, name="x")
    names = [_name(s) for s in runner.steps]
    assert {names.index("early:router"), names.index("erinnerungsanker")} <= runner.waits_for[names.index("router")]


def test_the_critical_path_follows_the_early_starts():
    from bench.turn_graph import critical_path_ms

    # one call each for the nodes of a smalltalk turn: perzeption beside the calls that start with the
    # turn (the enricher's rewrite, the anchor's and the router's), verfasser beside gv_node, responder,
    # then the tribunal beside perzeption_assistant
    calls = dict.fromkeys(("perzeption", "enricher", "erinnerungsanker", "router", "verfasser", "gv_node",
                           "responder", "tribunal", "perzeption_assistant", "sachlage"), 1.0)
    assert critical_path_ms(calls, 200.0) == {"critical_path_ms": 800.0, "serial_ms": 2000.0}
    # a rewrite slower than perzeption holds the character chain back by the difference
    assert critical_path_ms({**calls, "enricher": 2.0}, 200.0)["critical_path_ms"] == 1000.0


def test_a_step_waits_for_every_conflict_and_nothing_else():
    a = schedule.Access(frozenset(), frozenset({"x"}), frozenset(), frozenset())
    reads_x = schedule.Access(frozenset({"x"}), frozenset(), frozenset(), frozenset())
    writes_y = schedule.Access(frozenset(), frozenset({"y"}), frozenset(), frozenset())
    store_w = schedule.Access(frozenset(), frozenset(), frozenset(), frozenset({"t"}))
    store_r = schedule.Access(frozenset(), frozenset(), frozenset({"t"}), frozenset())
    deps = schedule.dependencies([a, reads_x, writes_y, store_r, store_w, a])
    assert deps == [frozenset(), {0}, frozenset(), frozenset(), {3}, {0, 1}]
    assert schedule.critical_path(deps, lambda j: 1.0) == 3.0  # a → reads_x → a
    with pytest.raises(ValueError):
        ChainRunner((NODES["sachlage"],), schedule="irgendwie")


@pytest.mark.parametrize("name", sorted({n for c in (HUMAN_CHAIN, CHARACTER_CHAIN) for s in c
                                         for n in (s.names() if isinstance(s, Loop) else (s.name,))}))
def test_every_store_a_node_calls_is_declared(name):
    import importlib

    node = NODES[name]
    mod = importlib.import_module(node.module)
    sources = [inspect.getsource(mod)] + [inspect.getsource(importlib.import_module(h)) for h in HELPERS.get(name, ())]
    used = {STORE_OF_OP.get(op, op) for src in sources for op in OP.findall(src)}
    declared = set(node.store_reads) | set(node.store_writes)
    assert used <= declared, f"{name} calls stores it does not declare: {sorted(used - declared)}"
    if re.search(r"deps\.(redis|session|auftrag|quoten|landschaft|kzg|impulse)\.", inspect.getsource(mod)):
        assert declared, f"{name} touches Redis without declaring it"


def _turn_order():
    """Every node of a turn in the written order: the human chain, then the character chain."""
    return list(dict.fromkeys(n for c in (HUMAN_CHAIN, CHARACTER_CHAIN) for s in c
                              for n in (s.names() if isinstance(s, Loop) else (s.name,))))


def _vorab_conflicts(order, modules):
    """Per node with `at_start`: the stores it reads at the turn's start that a node before it writes."""
    out = {}
    for i, name in enumerate(order):
        node = modules[name]
        if node.at_start is None:
            continue
        early = set(node.at_start_reads)
        assert early <= set(node.store_reads), f"{name} reads early what it does not declare"
        writers = {w: set(modules[w].store_writes) & early for w in order[:i] if w != name}
        out[name] = {w: sorted(s) for w, s in writers.items() if s}
    return out


def test_what_a_node_reads_at_the_turns_start_no_node_before_it_writes():
    """`vorab` reads run before any node of the turn: a node before the reader that writes one of
    those stores would go unseen. None does in the product's chains; moved before them, a writer is
    found."""
    order = _turn_order()
    modules = {n: NODES[n] for n in order}
    early = _vorab_conflicts(order, modules)
    assert set(early) == {"enricher", "db_zugriff", "erinnerungsanker", "router"} and not any(early.values())
    # the dispatcher commits Nova's state db_zugriff reads early: placed before it, it is caught
    moved = ["dispatcher"] + [n for n in order if n != "dispatcher"]
    assert _vorab_conflicts(moved, modules)["db_zugriff"] == {"dispatcher": ["zustand"]}
