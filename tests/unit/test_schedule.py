"""The dependency graph the runner derives from the nodes' declarations: what waits for what in
the product's chains, and declarations that cover every store a node touches inside the turn."""
import inspect
import re

import pytest

from pipeline import schedule
from pipeline.runner import CHARACTER_CHAIN, HUMAN_CHAIN, ChainRunner, Loop, load_node

OP = re.compile(r"""store\.call\(\s*["']([a-z_]+)\.""")
STORE_OF_OP = {"lesepfad": "lzg"}  # the read path reads the LZG
HELPERS = {"agent_dispatch": ("pipeline.agents.notizen.dispatch", "pipeline.agents.timeline.dispatch",
                              "pipeline.agents.charakter.dispatch", "pipeline.agents.direktiven.dispatch"),
           "enricher": ("pipeline.plugins.notizen", "pipeline.plugins.timeline", "pipeline.plugins.bibliothek"),
           "thinker": ("pipeline.thinker.tools",)}


def _names(chain):
    return [s.name if isinstance(s, Loop) else s for s in chain]


def _waves(chain):
    names = _names(chain)
    return [[names[j] for j in w] for w in schedule.waves(ChainRunner(chain, name="x").waits_for)]


def test_the_character_chain_runs_independent_nodes_side_by_side():
    waves = _waves(CHARACTER_CHAIN)
    assert waves[0] == ["db_zugriff", "sachlage"]  # sachlage reads only the stimulus
    assert ["planner_schleife", "gv_node", "haltungsraum"] in waves  # all three wait only for the router
    where = {n: k for k, w in enumerate(waves) for n in w}
    # the erinnerungsanker writes the timeline the enricher's plugins read before and the router reads after
    assert where["enricher"] < where["erinnerungsanker"] < where["router"]
    assert where["responder"] < where["thinker"] < where["tribunal_schleife"] < where["leckschutz"]
    assert _waves(HUMAN_CHAIN) == [["perzeption"], ["enricher"], ["ei_calc"]]


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
        ChainRunner(("sachlage",), schedule="irgendwie")


@pytest.mark.parametrize("name", sorted({n for c in (HUMAN_CHAIN, CHARACTER_CHAIN) for s in c
                                         for n in (s.names() if isinstance(s, Loop) else (s,))}))
def test_every_store_a_node_calls_is_declared(name):
    import importlib

    mod = load_node(name)
    sources = [inspect.getsource(mod)] + [inspect.getsource(importlib.import_module(h)) for h in HELPERS.get(name, ())]
    used = {STORE_OF_OP.get(op, op) for src in sources for op in OP.findall(src)}
    declared = set(getattr(mod, "STORE_READS", ())) | set(getattr(mod, "STORE_WRITES", ()))
    assert used <= declared, f"{name} calls stores it does not declare: {sorted(used - declared)}"
    if re.search(r"session\.\w+\(deps\.redis|deps\.redis\.", inspect.getsource(mod)):
        assert declared, f"{name} touches Redis without declaring it"
