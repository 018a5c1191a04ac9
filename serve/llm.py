"""The LLM deployment: one interface over the configured backend (llamacpp | vllm | openai)."""
from __future__ import annotations

import logging
from typing import Any, AsyncIterator

from ray import serve

from cluster.settings import Settings
from pipeline import metrics

log = logging.getLogger("novaberg.llm")


@serve.deployment(name="LLM")
class LLMDeployment:
    def __init__(self, settings: dict, vllm_server=None):
        self.settings = Settings(**settings)
        self.backend = _make_backend(self.settings, vllm_server)
        self._started = False

    async def _ensure_started(self) -> None:
        if not self._started:
            await self.backend.start()
            self._started = True

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        await self._ensure_started()
        out = await self.backend.chat(request)
        u = out["usage"]
        metrics.llm_tokens(request.get("caller", "?"), u["prompt_tokens"], u["completion_tokens"])
        return out

    async def chat_stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        await self._ensure_started()
        async for c in self.backend.chat_stream(request):
            if c.get("usage"):
                metrics.llm_tokens(request.get("caller", "?"), c["usage"]["prompt_tokens"],
                                   c["usage"]["completion_tokens"])
            yield c

    def model_name(self) -> str:
        return self.backend.model

    def load(self) -> dict[str, Any]:
        return {"backend": self.settings.llm_backend, "model": self.backend.model, **self.backend.load()}

    async def check_health(self) -> None:
        await self._ensure_started()


def _make_backend(settings: Settings, vllm_server):
    from serve import llm_backends as b

    if settings.llm_backend == "llamacpp":
        return b.LlamaCppBackend(settings)
    if settings.llm_backend == "openai":
        return b.OpenAICompatBackend(settings)
    if vllm_server is None:
        raise ValueError("llm_backend=vllm needs the Ray Serve LLM server deployment")
    return b.VLLMBackend(settings, vllm_server)


def vllm_server_app(settings: Settings):
    """The `LLMServer` application of Ray Serve LLM for the vllm backend (GPU machines)."""
    try:
        from ray.serve.llm import LLMConfig, build_llm_deployment
    except ImportError as e:  # pragma: no cover - depends on the optional extra
        raise RuntimeError("llm_backend=vllm needs the optional extra: pip install 'novaberg[vllm]'") from e
    config = LLMConfig(
        model_loading_config={"model_id": settings.llm_model, "model_source": settings.vllm_model_source},
        deployment_config={"num_replicas": settings.llm_replicas, "max_ongoing_requests": 256},
        engine_kwargs={"max_model_len": settings.llm_ctx, "tensor_parallel_size": settings.vllm_gpus,
                       "enable_prefix_caching": True},
    )
    return build_llm_deployment(config)
