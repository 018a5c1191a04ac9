"""Token budgets per node: what a node asks for reaches the engine whole; a budget the deployment
cannot give is a configuration error at startup, never a quiet truncation."""
import asyncio
import os
import types

import pytest

from core.settings import Settings
from pipeline.node_config import budget, budgets, check_budgets
from pipeline.services import LLMClient
from pipeline.trace import TurnTrace
from tests.unit.test_llm_openai_backend import _server, served


def _ask(settings: Settings, node: str) -> dict:
    """One call of `node` through the pipeline's LLM client into the OpenAI-compatible backend."""
    seen: list[dict] = []

    async def go():
        async with served(_server(seen), settings) as backend:
            handle = types.SimpleNamespace(chat=types.SimpleNamespace(remote=backend.chat))
            await LLMClient(handle, settings).chat(TurnTrace("u", "nova", "t1"), node,
                                                   [{"role": "user", "content": "hi"}], think=True)

    asyncio.run(go())
    return seen[0]


def test_the_thinkers_budget_holds_at_400_on_the_openai_backend():
    settings = Settings(llm_backend="openai", llm_model="Qwen/Qwen3-8B")
    assert _ask(settings, "thinker")["max_tokens"] == 400
    # the responder asks per turn for its span's budget (tests/unit/test_responder_laenge.py); a call
    # without one gets its configured budget, the widest span's
    assert _ask(settings, "responder")["max_tokens"] == 398
    assert _ask(settings, "router")["max_tokens"] == 256  # its longest valid answer needs more than 160
    assert _ask(settings, "tribunal")["max_tokens"] == 160  # a node without its own budget: the default


def test_overrides_per_node_and_for_all():
    s = Settings(node_max_tokens={"*": 24, "thinker": 64})
    assert (budget("thinker", s), budget("responder", s), budget("router", s)) == (64, 24, 24)
    assert budgets(s)["*"] == 24


def test_a_budget_above_the_deployments_limit_is_refused_at_startup():
    with pytest.raises(ValueError, match=r"token budgets above llm_max_tokens \(300\): \{.*'thinker': 400"):
        check_budgets(Settings(llm_max_tokens=300))
    with pytest.raises(ValueError, match="'responder': 4100"):
        check_budgets(Settings(node_max_tokens={"responder": 4100}))
    check_budgets(Settings(llm_max_tokens=360, thinker_reasoning_tokens=0,  # a model that does not reason
                           node_max_tokens={"thinker": 360, "thinker_nachfass": 300, "planner": 360, "praegung": 360,
                                            "responder": 360}))  # fits


def test_the_start_checks_the_budgets_before_anything_starts(monkeypatch):
    """The settings hold what they are given (core imports nothing of the pipeline); the start is where
    a budget above the limit stops: `novaberg up` (before the daemon), the runtime (before Ray and
    the stores) and the app builder (before a deployment is bound, also for a Serve config)."""
    from cluster import cli, runtime
    from serve.app import build_app

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    too_small = Settings(llm_max_tokens=300)
    for start in (lambda: cli.cmd_up(too_small, None), lambda: runtime.start(too_small), lambda: build_app(too_small)):
        with pytest.raises(ValueError, match=r"token budgets above llm_max_tokens \(300\)"):
            start()
    assert "RAY_AUTH_MODE" not in os.environ  # the runtime stopped before it set anything up
