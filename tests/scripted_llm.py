"""A scripted LLM for node unit tests: answers per node from a script and records every call.
Only for tests; the product always talks to a real engine."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from pipeline.services import ChatResult, Deps, Services
from pipeline.trace import TurnTrace
from memory.clients import StoreOps
from memory.ops import PoolStore  # noqa: F401  (the tests import it from here)
from prompts import PromptLibrary


@dataclass
class ScriptedLLM:
    script: dict[str, list[str]] = field(default_factory=dict)
    model: str = "scripted"
    calls: list[dict] = field(default_factory=list)
    fail: set[str] = field(default_factory=set)
    reasoning: str | None = None
    """Set: answers as a reasoning model behind vLLM's reasoning parser does — a call with think on
    first thinks this text (a token per word) and answers in what its budget (`max_tokens`, else
    the node's) leaves; a thought the budget cuts leaves the content empty and the reasoning
    channel full, finish "length"."""

    async def chat(self, trace: TurnTrace, node: str, messages, *, think: bool = False,
                   stream_tokens: bool = False, response_schema: dict | None = None,
                   protocol: dict | None = None, max_tokens: int | None = None) -> ChatResult:
        self.calls.append({"node": node, "messages": [dict(m) for m in messages], "think": think,
                           "response_schema": response_schema, "protocol": protocol, "max_tokens": max_tokens})
        trace.prompt_sent(node, messages)  # as the real client does
        if node in self.fail:
            raise RuntimeError("engine unavailable")
        answers = self.script.get(node) or [""]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        # an answer is its content, or (content, reasoning) for a model that reasons apart, or
        # (content, reasoning, finish_reason) for one that ended otherwise ("length": cut by the budget)
        text, reasoning, finish = (answer, None, "stop") if isinstance(answer, str) else (*answer, "stop")[:3]
        if self.reasoning is not None and think:
            text, reasoning, finish = self._thought_first(node, text, max_tokens)
        trace.llm_done(1.0, 10, len(text.split()))
        if stream_tokens:
            trace.emit("draft", node=node, text=text)
        return ChatResult(text, reasoning, self.model, 10, len(text.split()), finish)

    async def model_name(self) -> str:
        return self.model

    def _thought_first(self, node: str, text: str, max_tokens: int | None) -> tuple[str, str, str]:
        from pipeline.node_config import node_config

        budget = node_config(node).max_tokens if max_tokens is None else max_tokens
        thought, answer = self.reasoning.split(), text.split(" ")
        if len(thought) >= budget:
            return "", " ".join(thought[:budget]), "length"
        left = budget - len(thought)
        return " ".join(answer[:left]), self.reasoning, "length" if len(answer) > left else "stop"


class InProcessHandle:
    """The LLM deployment's handle as the pipeline's client uses it (`chat.remote`,
    `options(stream=True).chat_stream.remote`, `model_name.remote`), over the deployment's class run
    in this process: a node's call passes the real client, the real deployment and its engine."""

    def __init__(self, deployment):
        self.deployment = deployment
        self.chat = SimpleNamespace(remote=deployment.chat)
        self.chat_stream = SimpleNamespace(remote=deployment.chat_stream)
        self.model_name = SimpleNamespace(remote=deployment.model_name)

    def options(self, **_):
        return self


def engine_client(engine, settings=None):
    """The pipeline's LLM client over the LLM deployment running `engine` (an engine class, e.g.
    `ScriptedEngine.with_script(...)`) in this process, recording every request; the deployment is
    `client.handle.deployment`."""
    from core.settings import Settings
    from pipeline.services import LLMClient
    from serve.llm import LLMDeployment

    settings = settings or Settings()
    deployment = LLMDeployment.func_or_class(settings.llm, None, engine)
    deployment.record(True)
    return LLMClient(InProcessHandle(deployment), settings)


class NoStore(StoreOps):
    def __init__(self):
        super().__init__(self._run)

    async def _run(self, op, args, kwargs):
        raise AssertionError(f"this test expects no store call ({op})")


class Zaehler:
    """Redis as a node sees it that writes only counters (the router's quota denominator,
    memory/agent_quoten.py): records each HINCRBY, for tests without a Redis."""

    def __init__(self):
        self.counted: list[tuple[str, str, int]] = []
        self._marks: set[str] = set()

    async def hincrby(self, key, field, n):
        self.counted.append((key, field, n))
        return n

    async def eval(self, script, numkeys, *args):
        """The once-per-turn count (memory/agent_quoten.py `_EINMAL`): counted when its mark is new."""
        (key, mark), (field, _ttl) = args[:numkeys], args[numkeys:]
        if mark in self._marks:
            return 0
        self._marks.add(mark)
        return await self.hincrby(key, field, 1)


def deps_for(llm: ScriptedLLM, *, store=None, redis=None, embedder=None, settings=None, web=None,
             turn=("u", "nova", "t1")) -> Deps:
    from core.settings import Settings

    services = Services(settings=settings or Settings(), llm=llm, embedder=embedder, store=store or NoStore(),
                        redis=redis, prompts=PromptLibrary(), web=web)
    return Deps(services, TurnTrace(*turn))
