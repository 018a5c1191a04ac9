"""A scripted engine for the app tier: it takes the place of the llama.cpp / vLLM / OpenAI backend
inside the real LLM deployment, injected through the app builder (`build_app(settings,
engine=...)`), the way Ray Serve LLM takes its engine. It answers per node (the request's
`caller`) from a script, after an optional fixed latency, and spends no compute. Only for tests
that are not about the model; the product always runs a real engine.

A structured node without a scripted answer gets the smallest answer its schema allows (the
first word of each vocabulary, short strings), so every node runs its real path.

With `reasoning` set it answers as a reasoning model does (Qwen3): a call with think on first
thinks that text, a call with think off writes the block the model still writes under its switch
(`stray`, empty by default); the output is cut at the call's `max_tokens` (a token per word), so a
thought longer than the budget never reaches its answer. The thought stands inline as a
`<think>…</think>` block of the content (a model without a reasoning parser), or with
`reasoning_apart` in `reasoning_content` (vLLM's reasoning parser), the cut thought there too.
"""
from __future__ import annotations

import asyncio
import json
import re
import uuid
from functools import partial
from typing import Any, AsyncIterator

from bench.standin import instance  # noqa: F401  (the smallest answer a schema allows)
from core.wire import ChatChunk, ChatRequest, ChatResponse, LLMEngine
from serve.llm_backends import LLMBackendError, chunk, completion, split_reasoning

DEFAULT_SCRIPT: dict[str, list[str]] = {
    "responder": ["Schoen, dass du da bist. Erzaehl mir mehr davon."],
    "corrector": ["Schoen, dass du da bist. Erzaehl mir mehr davon."],
    "verfasser": ["Nova nimmt auf, was Person B erzaehlt, und fragt nach."],
    "query_rewrite": ["Worueber spricht Person B gerade?"],
    "thinker": ["ERGEBNIS: OK"],
    "pixie": ["Nichts Neues."],
}


class ScriptedEngine(LLMEngine):
    """The engine interface (`core.wire.LLMEngine`: `start`, `chat`, `chat_stream`, `load`, `model`)
    over a script."""

    def __init__(self, settings, script: dict[str, list[str]] | None = None, latency_s: float = 0.0,
                 wenn: dict[str, dict[str, list]] | None = None, fehler: dict[str, dict[str, int]] | None = None,
                 reasoning: str | None = None, reasoning_apart: bool = False, stray: str = ""):
        self.settings = settings
        self.model = "scripted-engine"
        self.reasoning = reasoning
        """Set: the engine answers as a reasoning model (the module's docstring)."""
        self.reasoning_apart = reasoning_apart
        self.stray = stray
        self.script = {k: list(v) for k, v in {**DEFAULT_SCRIPT, **(script or {})}.items()}
        self.wenn = wenn or {}
        """Per marker: a node's answers when the request's last message contains the marker; an
        answer is a text or [content, reasoning] (a model that answers in its reasoning alone)."""
        self.fehler = {m: dict(per) for m, per in (fehler or {}).items()}
        """Per marker: how many of a node's next calls whose last message carries the marker the
        engine fails as a server error would (HTTP 500, transient) before it answers again."""
        self.latency_s = latency_s
        self.calls = 0

    @classmethod
    def with_script(cls, script: dict[str, list[str]] | None = None, latency_s: float = 0.0,
                    wenn: dict[str, dict[str, list]] | None = None, fehler: dict[str, dict[str, int]] | None = None,
                    **reasoning):
        """The engine class as the app builder takes it, with its script (and its reasoning) bound."""
        return partial(cls, script=script, latency_s=latency_s, wenn=wenn, fehler=fehler, **reasoning)

    def _as_reasoning_model(self, req: ChatRequest, text: str) -> tuple[str, str | None, str, int]:
        """(content, reasoning_content, finish reason, tokens) of a reasoning model's answer `text`:
        the thought first, the whole cut at the call's budget."""
        thought = self.reasoning if req.think else self.stray
        raw = f"<think>\n{thought}\n</think>\n\n{text}"
        tokens = re.findall(r"\S+\s*", raw)
        budget = req.max_tokens if req.max_tokens is not None else self.settings.llm_max_tokens
        finish = "length" if len(tokens) > budget else "stop"
        raw = "".join(tokens[:budget])
        if not self.reasoning_apart:
            return raw, None, finish, min(len(tokens), budget)
        content, reasoning = split_reasoning(raw)  # as vLLM's reasoning parser hands it on
        return content, reasoning, finish, min(len(tokens), budget)

    def _fail(self, req: ChatRequest) -> None:
        last = str((req.messages or [{}])[-1].get("content", ""))
        for marker, per in self.fehler.items():
            left = per.get(req.caller or "", 0)
            if marker in last and left > 0:
                per[req.caller] = left - 1
                raise LLMBackendError(f"scripted engine: HTTP 500 for {req.caller} ({marker})", transient=True)

    def _answer(self, req: ChatRequest) -> tuple[str, str | None]:
        last = str((req.messages or [{}])[-1].get("content", ""))
        for marker, script in self.wenn.items():
            if marker in last and req.caller in script:
                a = script[req.caller][0]
                return (a[0], a[1]) if isinstance(a, (list, tuple)) else (a, None)
        return self.answer(req), None

    async def start(self) -> None:
        pass

    def answer(self, req: ChatRequest) -> str:
        answers = self.script.get(req.caller or "")
        if answers:
            return answers.pop(0) if len(answers) > 1 else answers[0]
        if req.response_schema:
            return json.dumps(instance(req.response_schema))
        return "Ja."

    async def chat(self, req: ChatRequest) -> ChatResponse:
        self.calls += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        self._fail(req)
        text, reasoning = self._answer(req)
        if self.reasoning is not None:
            text, reasoning, finish, n = self._as_reasoning_model(req, text)
            return completion(self.model, text, reasoning, 10, n, finish)
        return completion(self.model, text, reasoning, 10, len(text.split()), "stop")

    async def chat_stream(self, req: ChatRequest) -> AsyncIterator[ChatChunk]:
        self.calls += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        self._fail(req)
        (text, _), cid = self._answer(req), f"chatcmpl-{uuid.uuid4().hex[:24]}"
        if self.reasoning is not None:
            async for c in self._stream_reasoning(req, text, cid):
                yield c
            return
        for word in text.split(" "):
            yield chunk(self.model, cid, {"content": word + " "})
        n = len(text.split())
        yield chunk(self.model, cid, {}, "stop", {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n})

    async def _stream_reasoning(self, req: ChatRequest, text: str, cid: str) -> AsyncIterator[ChatChunk]:
        """A reasoning model's stream: pieces of five characters, so a tag falls across pieces."""
        content, reasoning, finish, n = self._as_reasoning_model(req, text)
        for kind, whole in (("reasoning_content", reasoning or ""), ("content", content)):
            for i in range(0, len(whole), 5):
                yield chunk(self.model, cid, {kind: whole[i:i + 5]})
        yield chunk(self.model, cid, {}, finish, {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n})

    def load(self) -> dict[str, Any]:
        return {"queued": 0, "busy_s": 0.0, "scripted_calls": self.calls}
