"""A node placed in the node deployment gets the records it reads and its result merges typed (the
real deployment: tests/app/test_remote_nodes.py)."""
import asyncio
import types

from core.wire import NodeRunRequest, NodeRunResult
from pipeline.node import Node
from pipeline.runner import ChainRunner
from pipeline.services import Deps
from core.state import PairRecord, Stimulus, TurnState
from pipeline.trace import TurnTrace


class _Remote:
    """Stands in for the deployment handle: runs the node function on serialised records."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = []
        self.run_node = types.SimpleNamespace(remote=self._remote)

    async def _remote(self, request: NodeRunRequest) -> NodeRunResult:
        self.calls.append((request.node, request.records, request.chain))
        return NodeRunResult.model_validate(await self.fn(request.node, request.records))


def test_remote_node_roundtrip():
    async def fake(name, records):
        assert set(records.set_records()) == {"stimulus"}
        return {"update": {"pair": {"character_name": records.stimulus.character_id.title()}},
                "rows": [{"seq": 0, "node": name, "art": "switch", "entscheidung": "x.y", "outcome": "z",
                          "inputs": {}, "at": "2026-11-30T00:00:00+00:00"}],
                "llm_ms": 5.0, "embed_ms": 1.0, "llm_calls": 1, "prompt_tokens": 30, "completion_tokens": 4,
                "system_prompts": {name: "[ROLLE]"}}

    handle = _Remote(fake)
    node = Node(name="db_zugriff", reads=("stimulus",), writes=("pair",))
    runner = ChainRunner(chain=(), remote=["db_zugriff"], nodes_handle=handle)
    runner.nodes = [node]
    state = TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt="hi"))
    trace = TurnTrace("u", "nova", "t")
    asyncio.run(runner.run(state, Deps(services=None, trace=trace)))
    assert isinstance(state.pair, PairRecord) and state.pair.character_name == "Nova"
    assert [r.art for r in trace.rows] == ["switch", "node"]
    assert trace.llm_ms == 5.0 and trace.embed_ms == 1.0
    assert (trace.llm_calls, trace.prompt_tokens, trace.completion_tokens) == (1, 30, 4)
    assert trace.system_prompts == {"db_zugriff": "[ROLLE]"}
    assert handle.calls[0][2] == "character"
