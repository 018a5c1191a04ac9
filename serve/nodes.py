"""The stateless node deployment: runs any node of the chain for any pair, when the
configuration places that node here (`Settings.remote_nodes`) instead of in the pair actor. What
the node recorded comes back with its result: its rows, its time at the LLM and the embedder, its
LLM calls and tokens (the turn's usage in `pipeline_log`) and the system messages it sent (the leak
guard compares the reply with them)."""
from __future__ import annotations

from typing import Any

from ray import serve

from core.names import NODES_DEPLOYMENT
from core.settings import Settings
from pipeline.runner import load_node, view_for
from pipeline.services import Deps, Services
from pipeline.state import TurnState
from pipeline.trace import TurnTrace


@serve.deployment(name=NODES_DEPLOYMENT, max_ongoing_requests=256)
class NodeDeployment:
    def __init__(self, settings: dict):
        self.settings = Settings(**settings)
        self._services: Services | None = None

    async def run_node(self, name: str, records: dict[str, Any], chain: str = "character") -> dict[str, Any]:
        if self._services is None:
            self._services = Services.connect(self.settings)
        node = load_node(name)
        state = TurnState.model_validate(records) if "stimulus" in records else None
        if state is None:
            raise ValueError(f"node {name} called without the stimulus record")
        s = state.stimulus
        trace = TurnTrace(s.user_id, s.character_id, s.turn_id)
        trace.chain = chain
        # the same view the pair actor's runner gives: declared records only, an undeclared read fails
        update = await node.run(view_for(state, node.READS, name), Deps(self._services, trace))
        return {"update": {k: (v.model_dump(mode="json") if v is not None else None) for k, v in update.items()},
                "rows": trace.rows, "llm_ms": trace.llm_ms, "embed_ms": trace.embed_ms,
                "usage": [trace.llm_calls, trace.prompt_tokens, trace.completion_tokens],
                "system_prompts": trace.system_prompts}
