"""The LLM deployment: one interface over the configured backend (llamacpp | vllm | openai) or an
injected engine. Its requests and answers are the typed messages of `core/wire.py` (`ChatRequest`,
`ChatResponse`, `ChatChunk`); every engine implements `core.wire.LLMEngine`."""
from __future__ import annotations

import logging
import time
from typing import Any, AsyncIterator

from ray import serve

from core.errors import ConfigError
from core.names import LLM_DEPLOYMENT
from core.settings import LLMSettings
from core.wire import ChatChunk, ChatRequest, ChatResponse, ChatUsage, LLMEngine
from pipeline import metrics

log = logging.getLogger("novaberg.llm")


@serve.deployment(name=LLM_DEPLOYMENT)
class LLMDeployment:
    def __init__(self, settings: LLMSettings, vllm_server=None, engine=None):
        """`settings`: the LLM section (`Settings.llm`), which the engine gets, as Ray Serve LLM
        hands its engine an `LLMConfig`."""
        self.settings = settings
        self.backend: LLMEngine = (engine(self.settings) if engine is not None
                                   else _make_backend(self.settings, vllm_server))
        if not isinstance(self.backend, LLMEngine):
            raise TypeError(f"the LLM engine {type(self.backend).__name__} does not implement core.wire.LLMEngine")
        if engine is not None:
            log.warning("LLM deployment runs an injected engine (%s), not the configured %s backend",
                        getattr(engine, "func", engine).__name__, self.settings.llm_backend)
        self._started = False
        self._since = time.time()
        self.requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._recording: list[dict[str, Any]] | None = None
        """When on: every request as sent (as a plain dict, `ChatRequest.as_dict`), with its usage
        and time (the benchmark replays them)."""

    def _count(self, request: ChatRequest, usage: ChatUsage, t0: float) -> None:
        self.requests += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        metrics.llm_tokens(request.caller or "?", usage.prompt_tokens, usage.completion_tokens)
        if self._recording is not None:
            self._recording.append({"request": request.as_dict(), "usage": usage.model_dump(), "started": t0,
                                    "ms": (time.time() - t0) * 1000})

    async def _ensure_started(self) -> None:
        if not self._started:
            await self.backend.start()
            self._started = True

    def _constraints(self, request: ChatRequest) -> ChatRequest:
        return constraints(self.settings, request)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """The whole answer; its content without reasoning, whatever the engine (`reasoning_apart`)."""
        from serve.llm_backends import reasoning_apart

        req = _typed(request)
        await self._ensure_started()
        t0 = time.time()
        out = reasoning_apart(await self.backend.chat(self._constraints(req)))
        self._count(req, out.usage, t0)
        return out

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The answer in pieces; the last carries the usage. No piece's content carries reasoning,
        whatever the engine (`StreamReasoningApart`): the person reads the content as it comes."""
        from serve.llm_backends import StreamReasoningApart

        req = _typed(request)
        await self._ensure_started()
        t0 = time.time()
        apart = StreamReasoningApart()
        async for piece in self.backend.chat_stream(self._constraints(req)):
            for c in apart.feed(piece):
                if c.usage is not None:
                    self._count(req, c.usage, t0)
                yield c
        for c in apart.close():
            yield c

    async def model_name(self) -> str:  # async: answered on the replica's loop, no thread hop
        return self.backend.model

    def load(self) -> dict[str, Any]:
        """Cumulative counters of this replica (rates come from two samples)."""
        return {"backend": self.settings.llm_backend, "model": self.backend.model, "requests": self.requests,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "since": self._since, "at": time.time(), **self.backend.load()}

    def record(self, on: bool) -> list[dict[str, Any]]:
        """Start recording requests (on) or stop and return what was recorded (off)."""
        if on:
            self._recording = []
            return []
        out, self._recording = self._recording or [], None
        return out

    async def check_health(self) -> None:
        await self._ensure_started()


def constraints(settings: LLMSettings, request: ChatRequest) -> ChatRequest:
    """The request as the backend gets it: without the answer's constraints when structured
    outputs are off (the answers are then only validated afterwards)."""
    if settings.llm_structured_outputs:
        return request
    return request.model_copy(update={"response_schema": None, "protocol": None})


def _make_backend(settings: LLMSettings, vllm_server) -> LLMEngine:
    from serve import llm_backends as b

    if settings.llm_backend == "llamacpp":
        return b.LlamaCppBackend(settings)
    if settings.llm_backend == "openai":
        return b.OpenAICompatBackend(settings)
    if vllm_server is None:
        raise ConfigError("llm_backend=vllm needs the Ray Serve LLM server deployment")
    return b.VLLMBackend(settings, vllm_server)


def vllm_source(settings: LLMSettings) -> str:
    """The model vLLM loads: NOVABERG_LLM_MODEL when it is a hub id, else NOVABERG_VLLM_MODEL_SOURCE."""
    from serve.modelle import ist_hub_referenz

    return settings.llm_model if ist_hub_referenz(settings.llm_model) else settings.vllm_model_source


def _serve_llm():
    try:
        import ray.serve.llm as serve_llm
    except ImportError as e:  # pragma: no cover - depends on the optional extra
        raise ConfigError("llm_backend=vllm needs the optional extra: pip install 'novaberg[vllm]'") from e
    return serve_llm


def router_config(settings: LLMSettings):
    """The request router of the deployment whose replicas hold the prompt cache, as `llm_routing`
    says: by pair (`serve/routing.py`, llama.cpp, OpenAI-compatible, an injected engine) or None:
    Serve's power of two choices."""
    from ray.serve.config import RequestRouterConfig

    from serve.routing import BOUND, ROUTER_PATH

    if settings.llm_routing != "pair":
        return None
    return RequestRouterConfig(request_router_class=ROUTER_PATH, request_router_kwargs={"bound": BOUND})


VLLM_ROUTER_PATH = "ray.serve.llm.request_router.PrefixCacheAffinityRouter"
"""Ray Serve LLM's prefix-aware router: the vLLM server's replica by the longest cached prefix of
the prompt (a pair's calls share theirs), balanced load first."""


def vllm_deployment_config(settings: LLMSettings) -> dict:
    """The `LLMServer`'s deployment options: its replicas, and with `llm_routing = "pair"`
    Ray Serve LLM's prefix-aware router."""
    config: dict = {"num_replicas": settings.llm_replicas, "max_ongoing_requests": 256}
    if settings.llm_routing == "pair":
        config["request_router_config"] = {"request_router_class": VLLM_ROUTER_PATH}
    return config


def vllm_llm_config(settings: LLMSettings):
    """Ray Serve LLM's `LLMConfig` for the vllm backend: the model, its replicas and router, the
    engine's options."""
    return _serve_llm().LLMConfig(
        model_loading_config={"model_id": settings.llm_model, "model_source": vllm_source(settings)},
        deployment_config=vllm_deployment_config(settings),
        engine_kwargs=vllm_engine_kwargs(settings),
    )


def vllm_server_app(settings: LLMSettings):
    """The `LLMServer` application of Ray Serve LLM for the vllm backend (GPU machines)."""
    return _serve_llm().build_llm_deployment(vllm_llm_config(settings))


REASONING_PARSERS = (("qwen3", "qwen3"), ("qwq", "deepseek_r1"), ("deepseek-r1", "deepseek_r1"))
"""vLLM's reasoning parser per model family (a part of the model source, any case), first match."""


def vllm_reasoning_parser(settings: LLMSettings) -> str | None:
    """The configured parser, or the one of the model's family; None: reasoning stays inline."""
    if settings.vllm_reasoning_parser is not None:
        return settings.vllm_reasoning_parser or None
    source = vllm_source(settings).lower()
    return next((parser for stem, parser in REASONING_PARSERS if stem in source), None)


def vllm_engine_kwargs(settings: LLMSettings) -> dict:
    kw = {"max_model_len": settings.llm_ctx, "tensor_parallel_size": settings.vllm_gpus, "enable_prefix_caching": True}
    parser = vllm_reasoning_parser(settings)
    if parser:  # the engine hands the reasoning back in its own field, `reasoning_content`
        kw["reasoning_parser"] = parser
    return kw


def _typed(request: ChatRequest) -> ChatRequest:
    if not isinstance(request, ChatRequest):
        raise TypeError(f"the LLM deployment takes a ChatRequest (core/wire.py), not {type(request).__name__}")
    return request
