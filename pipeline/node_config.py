"""Per-node model settings. A node asks the LLM with its own temperature and token budget."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class NodeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int = Field(default=160, ge=1, le=8192)
    """Capped again by Settings.llm_max_tokens."""


NODE_CONFIG: dict[str, NodeConfig] = {
    "responder": NodeConfig(temperature=0.7, max_tokens=160),
    "enricher": NodeConfig(temperature=0.2, max_tokens=48),
    "thinker": NodeConfig(temperature=0.15, max_tokens=400),
    "thinker_nachfass": NodeConfig(temperature=0.15, max_tokens=300),
}


def node_config(node: str) -> NodeConfig:
    return NODE_CONFIG.get(node, NodeConfig())
