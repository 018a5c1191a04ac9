"""The chain runner enforces the node contract: declared reads, declared writes, typed records."""
import asyncio

import pytest

from pipeline.chains import NODES
from pipeline.node import Node, NodeDeclarationError
from pipeline.runner import ChainRunner, NodeContractError, NodeFailed, apply_update, view_for
from pipeline.services import Deps
from core.state import DraftRecord, PairRecord, Stimulus, TurnState
from pipeline.trace import TurnTrace


def _state():
    return TurnState(stimulus=Stimulus(user_id="u", character_id="c", turn_id="t1", user_prompt="hi"))


def _node(name, reads, writes, fn, **more):
    return Node(name=name, reads=reads, writes=writes, run=fn, **more)


def test_a_node_sees_only_what_it_declared():
    state = _state()
    state.pair = PairRecord(character_name="Nova")
    view = view_for(state, ("stimulus",), "x")
    assert view.stimulus.user_prompt == "hi"
    # a record it did not declare is an error, not a silent None, even when the state holds it
    with pytest.raises(NodeContractError, match="node x reads the record 'pair'"):
        view.pair
    with pytest.raises(NodeContractError, match="returns the records it writes"):
        view.pair = PairRecord(character_name="Eve")
    assert state.pair.character_name == "Nova"


def test_the_runner_stops_a_turn_whose_node_reads_undeclared():
    async def sneaky(state, deps):
        return {"draft": DraftRecord(reply=state.pair.character_name, model="m")}

    runner = ChainRunner(chain=())
    runner.nodes = [_node("sneaky", ("stimulus",), ("draft",), sneaky)]
    state = _state()
    state.pair = PairRecord(character_name="Nova")
    with pytest.raises(NodeContractError, match="sneaky reads the record 'pair'"):
        asyncio.run(runner.run(state, Deps(services=None, trace=TurnTrace("u", "c", "t1"))))
    assert state.draft is None


def test_undeclared_write_is_refused():
    node = _node("x", ("stimulus",), ("pair",), None)
    with pytest.raises(NodeContractError, match="undeclared"):
        apply_update(_state(), node, {"draft": DraftRecord(reply="a", model="m")})


def test_wrong_type_is_refused():
    node = _node("x", ("stimulus",), ("pair",), None)
    with pytest.raises(Exception):
        apply_update(_state(), node, {"pair": {"nonsense": 1}})


def test_stimulus_needs_exactly_one_source():
    with pytest.raises(ValueError):
        Stimulus(user_id="u", character_id="c", turn_id="t", user_prompt="a", eigener_gedanke="b")
    with pytest.raises(ValueError):
        Stimulus(user_id="u", character_id="c", turn_id="t")


def test_runner_runs_in_order_records_rows_and_names_a_failed_node():
    seen = []

    async def first(state, deps):
        seen.append("first")
        deps.trace.decision("first", "first.branch", "a", {"k": 1}, threshold=0.5)
        return {"pair": PairRecord(character_name="Nova")}

    async def second(state, deps):
        seen.append(state.pair.character_name)
        raise RuntimeError("boom")

    runner = ChainRunner(chain=())
    runner.nodes = [_node("first", ("stimulus",), ("pair",), first), _node("second", ("pair",), ("draft",), second)]
    trace = TurnTrace("u", "c", "t1")
    deps = Deps(services=None, trace=trace)
    with pytest.raises(NodeFailed) as e:
        asyncio.run(runner.run(_state(), deps))
    assert e.value.node == "second"
    assert seen == ["first", "Nova"]
    arts = [(r.node, r.art) for r in trace.rows]
    assert arts == [("first", "switch"), ("first", "node")]
    assert trace.rows[0].threshold == 0.5


def test_spine_nodes_declare_valid_contracts():
    for name in ("db_zugriff", "enricher", "responder", "dispatcher"):
        node = NODES[name]
        assert node.name == name and node.run is not None
        assert "stimulus" not in node.writes


def test_a_declaration_is_checked_when_it_is_made():
    async def run(state, deps):
        return {}

    with pytest.raises(TypeError):  # a misspelt field is an error, not a feature switched off
        Node(name="x", reads=("stimulus",), writes=(), early_withot=("route",))
    with pytest.raises(NodeDeclarationError, match="unknown records"):
        Node(name="x", reads=("stimulus", "routen"), writes=())
    with pytest.raises(NodeDeclarationError, match="read-only"):
        Node(name="x", reads=(), writes=("stimulus",))
    with pytest.raises(NodeDeclarationError, match="tuple of names"):
        Node(name="x", reads="stimulus", writes=())
    with pytest.raises(NodeDeclarationError, match="early_without names"):
        Node(name="x", reads=("stimulus",), writes=(), early_without=("route",))
    with pytest.raises(NodeDeclarationError, match="at_start_reads names"):
        Node(name="x", reads=("stimulus",), writes=(), at_start_reads=("session",))
    node = Node(name="x", reads=("stimulus", "route"), writes=(), early_without=("route",))
    with pytest.raises(NodeDeclarationError, match="no `run`"):
        node.check_complete()
    node.runs(run)
    with pytest.raises(NodeDeclarationError, match="without an early start"):
        node.check_complete()
    with pytest.raises(NodeDeclarationError, match="bound twice"):
        node.runs(run)


def test_by_data_a_failed_node_ends_the_turn_before_the_commit():
    """Side by side, a node that fails stops the turn: the commit waits for every node before it
    (`waits_for_all`), steps after the failure never start, and the error names the node."""
    ran = []

    async def langsam(state, deps):
        await asyncio.sleep(0.05)
        ran.append("langsam")
        return {"pair": PairRecord(character_name="Nova")}

    async def kaputt(state, deps):
        raise RuntimeError("engine unavailable")

    async def danach(state, deps):
        ran.append("danach")
        return {"draft": DraftRecord(reply=state.pair.character_name, model="m")}

    async def commit(state, deps):
        ran.append("commit")
        return {}

    commit_node = _node("commit", ("stimulus",), (), commit, waits_for_all=True)
    runner = ChainRunner(chain=())
    runner.nodes = [_node("langsam", ("stimulus",), ("pair",), langsam), _node("kaputt", ("stimulus",), (), kaputt),
                    _node("danach", ("stimulus", "pair"), ("draft",), danach), commit_node]
    assert runner.waits_for == [frozenset(), frozenset(), {0}, {0, 1, 2}]
    with pytest.raises(NodeFailed, match="node kaputt failed"):
        asyncio.run(runner.run(_state(), Deps(None, TurnTrace("u", "c", "t1"))))
    assert "commit" not in ran and "danach" not in ran


def test_a_background_chain_lets_its_running_nodes_finish_when_one_fails():
    """`ausklingen` (the background chain): a node that fails no longer cuts off a node running
    beside it between two of its writes — that one finishes, nothing after the failure starts, and
    the chain fails naming the node; a turn's chain cancels the running node at once."""
    for ausklingen, expected in ((True, ["erste", "zweite"]), (False, ["erste"])):
        writes = []
        erst = asyncio.Event()

        async def zwei_schritte(state, deps):
            writes.append("erste")
            erst.set()
            await asyncio.sleep(0.3)  # the failure comes now: cancelled here, or finishes
            writes.append("zweite")
            return {"pair": PairRecord(character_name="Nova")}

        async def kaputt(state, deps):
            await erst.wait()
            raise RuntimeError("the model is away")

        async def danach(state, deps):
            writes.append("danach")
            return {}

        runner = ChainRunner(chain=(), name="background", ausklingen=ausklingen)
        runner.nodes = [_node("praegung", ("stimulus",), ("pair",), zwei_schritte),
                        _node("kaputt", ("stimulus",), (), kaputt),
                        _node("danach", ("stimulus", "pair"), (), danach)]
        with pytest.raises(NodeFailed, match="node kaputt failed"):
            asyncio.run(runner.run(_state(), Deps(None, TurnTrace("u", "c", "t1"))))
        assert writes == expected, ausklingen
