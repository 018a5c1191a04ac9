"""Per-node model settings. A node asks the LLM with its own temperature and token budget."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class NodeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int = Field(default=160, ge=1, le=8192)
    """The node's budget; `Settings.node_max_tokens` overrides it, `Settings.llm_max_tokens` bounds
    it at startup (never silently)."""


NODE_CONFIG: dict[str, NodeConfig] = {
    "responder": NodeConfig(temperature=0.7, max_tokens=160),
    "enricher": NodeConfig(temperature=0.2, max_tokens=48),
    "thinker": NodeConfig(temperature=0.15, max_tokens=400),
    "thinker_nachfass": NodeConfig(temperature=0.15, max_tokens=300),
    "erschliessung": NodeConfig(temperature=0.2, max_tokens=200),
    # structured nodes whose longest valid answer needs more than the default (llm_json.antwort_tokens;
    # tests/unit/test_structured_outputs.py keeps every structured node's budget above it)
    "perzeption": NodeConfig(temperature=0.7, max_tokens=240),
    "router": NodeConfig(temperature=0.7, max_tokens=256),
    "sachlage": NodeConfig(temperature=0.7, max_tokens=304),
    "planner": NodeConfig(temperature=0.7, max_tokens=512),
    "salience": NodeConfig(temperature=0.7, max_tokens=288),
    "praegung": NodeConfig(temperature=0.7, max_tokens=352),
    "zusammenfassung": NodeConfig(temperature=0.7, max_tokens=224),
}


def node_config(node: str) -> NodeConfig:
    return NODE_CONFIG.get(node, NodeConfig())


def budget(node: str, settings) -> int:
    """The tokens a node's call asks for: its override in the settings, else `*`, else its config."""
    over = settings.node_max_tokens
    return over.get(node, over.get("*", node_config(node).max_tokens))


def capped(limit: int) -> dict[str, int]:
    """`Settings.node_max_tokens` that cap every node at `limit` (a benchmark's shorter answers)."""
    return {**{n: min(c.max_tokens, limit) for n, c in NODE_CONFIG.items()}, "*": min(NodeConfig().max_tokens, limit)}


def budgets(settings) -> dict[str, int]:
    """Every budget the settings lead to: the configured nodes, the overrides and the default."""
    names = {*NODE_CONFIG, *settings.node_max_tokens, "*"} - {"*"}
    return {**{n: budget(n, settings) for n in names}, "*": settings.node_max_tokens.get("*", NodeConfig().max_tokens)}
