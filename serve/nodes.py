"""The stateless node deployment: runs any node of the chain for any pair, when the
configuration places that node here (`Settings.remote_nodes`) instead of in the pair actor. What
the node recorded comes back with its result: its rows, its time at the LLM and the embedder, its
LLM calls and tokens (the turn's usage in `pipeline_log`) and the system messages it sent (the leak
guard compares the reply with them)."""
from __future__ import annotations

from ray import serve

from core.names import NODES_DEPLOYMENT
from core.settings import Settings
from core.wire import NodeRunRequest, NodeRunResult, TurnRecords
from pipeline.chains import NODES
from pipeline.runner import view_for
from pipeline.services import Deps, Services
from core.state import TurnState
from pipeline.trace import TurnTrace


@serve.deployment(name=NODES_DEPLOYMENT, max_ongoing_requests=256)
class NodeDeployment:
    def __init__(self, settings: Settings):
        self.settings = settings
        self._services: Services | None = None

    async def run_node(self, request: NodeRunRequest) -> NodeRunResult:
        if self._services is None:
            self._services = Services.connect(self.settings)
        node = NODES[request.node]
        if request.records.stimulus is None:
            raise ValueError(f"node {node.name} called without the stimulus record")
        state = TurnState.model_validate(request.records.set_records())
        s = state.stimulus
        trace = TurnTrace(s.user_id, s.character_id, s.turn_id)
        trace.chain = request.chain
        # the same view the pair actor's runner gives: declared records only, an undeclared read fails
        update = await node.run(view_for(state, node.reads, node.name), Deps(self._services, trace))
        return NodeRunResult(update=TurnRecords(**update), rows=trace.rows, llm_ms=trace.llm_ms, embed_ms=trace.embed_ms, llm_calls=trace.llm_calls,
                             prompt_tokens=trace.prompt_tokens, completion_tokens=trace.completion_tokens,
                             system_prompts=trace.system_prompts)
