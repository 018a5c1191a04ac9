"""Typed messages across the process seams. Each seam's models live in its own section:

- the ingress ↔ the pair actor (a turn, an event, the stream's events, a failed turn as an object);
- the chain runner ↔ the node deployment;
- the LLM client ↔ the LLM deployment ↔ its backends (`LLMEngine`, the protocol every engine
  implements, the scripted one of the tests too);
- the store's operations: declared in `memory/client.py`, one class per store module.

Like everything in `core/`, it imports nothing of the project.
"""
from __future__ import annotations

import abc
from typing import Any, AsyncIterator

from pydantic import BaseModel, ConfigDict, Field

# ---------------------------------------------------------------------------- ingress ↔ pair actor

# ---------------------------------------------------------------------------- runner ↔ node deployment

# ---------------------------------------------------------------------------- LLM client ↔ deployment ↔ engine
class TextProtocol(BaseModel):
    """A text answer's form, for the engines that can hold a model to it: a GBNF grammar (llama.cpp)
    and the same as a regular expression (vLLM)."""

    model_config = ConfigDict(extra="forbid")

    gbnf: str | None = None
    regex: str | None = None


class ChatRequest(BaseModel):
    """One model call as the LLM client sends it and every engine gets it. Each engine hands on
    what it supports of the answer's constraints (`response_schema`, `protocol`); the deployment
    drops them when structured outputs are off."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]]
    """The chat messages (`role`, `content`), handed to the engine as they are."""
    temperature: float = 0.7
    max_tokens: int | None = None
    """The answer's budget; unset: the deployment's `llm_max_tokens`."""
    think: bool = False
    """Reasoning on or off (templates that know the switch, e.g. Qwen3's `enable_thinking`)."""
    caller: str | None = None
    """The node that asks (the deployment counts tokens per caller; the schema's name)."""
    pair: str | None = None
    """`user:character` of the turn the call belongs to."""
    response_schema: dict[str, Any] | None = None
    """The JSON schema the answer must follow."""
    protocol: TextProtocol | None = None
    """The text protocol the answer must follow (when no schema is given)."""

    def as_dict(self) -> dict[str, Any]:
        """The request as a plain dict of the fields it carries (what the deployment records)."""
        return self.model_dump(exclude_none=True)


class ChatUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class AnswerMessage(BaseModel):
    role: str = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    """The model's reasoning, apart from the content (never mixed into it)."""


class ChatChoice(BaseModel):
    index: int = 0
    finish_reason: str | None = None
    message: AnswerMessage = Field(default_factory=AnswerMessage)


class ChatResponse(BaseModel):
    """A whole answer, shaped as OpenAI's chat completion."""

    id: str = ""
    object: str = "chat.completion"
    created: int = 0
    model: str = ""
    choices: list[ChatChoice] = Field(default_factory=list)
    usage: ChatUsage = Field(default_factory=ChatUsage)

    @property
    def content(self) -> str:
        return (self.choices[0].message.content or "") if self.choices else ""

    @property
    def reasoning(self) -> str | None:
        return self.choices[0].message.reasoning_content if self.choices else None

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason if self.choices else None


class ChatDelta(BaseModel):
    content: str | None = None
    reasoning_content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChatDelta = Field(default_factory=ChatDelta)
    finish_reason: str | None = None


class ChatChunk(BaseModel):
    """A piece of a streamed answer, shaped as OpenAI's chat completion chunk; the last one of a
    stream carries `usage` and the finish reason."""

    id: str = ""
    object: str = "chat.completion.chunk"
    created: int = 0
    model: str = ""
    choices: list[ChunkChoice] = Field(default_factory=list)
    usage: ChatUsage | None = None

    @property
    def content(self) -> str | None:
        return self.choices[0].delta.content if self.choices else None

    @property
    def reasoning(self) -> str | None:
        return self.choices[0].delta.reasoning_content if self.choices else None

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason if self.choices else None


class LLMEngine(abc.ABC):
    """What the LLM deployment runs: one of its backends (llama.cpp, vLLM, an OpenAI-compatible
    server) or an engine class injected in their place (`build_app(settings, engine=…)`), as Ray
    Serve LLM takes its engine. The class is called with the settings. A failed call raises an
    error object (`LLMBackendError`, its `transient` says whether the call may be asked again)."""

    model: str
    """The model's name, as the answers carry it."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Load or connect; the deployment calls it once before the first request."""

    @abc.abstractmethod
    async def chat(self, request: ChatRequest) -> ChatResponse:
        """The whole answer."""

    @abc.abstractmethod
    def chat_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The answer in pieces; the last piece carries the usage."""

    @abc.abstractmethod
    def load(self) -> dict[str, Any]:
        """The engine's own figures for the deployment's load (`queued`, `busy_s`, …)."""
