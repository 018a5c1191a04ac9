"""The vllm backend with its optional extra (vLLM and Ray Serve LLM; GPU machines): the `LLMServer`
application is configured from the settings, and every request the engine sends is one that vLLM's
own request model accepts — the structured node's JSON schema, a text protocol's regex, the seed,
the token budget, thinking switched per call, usage in a stream — and the server's answers come
back typed. The server is a recording stand-in for the `LLMServer` handle, injected as Ray Serve
LLM's deployment hands its handle to the engine; the engine's own model runs only on a GPU."""
import asyncio

import pytest

pytest.importorskip("vllm")
pytest.importorskip("ray.serve.llm")

from core.settings import Settings  # noqa: E402
from core.wire import ChatRequest, TextProtocol  # noqa: E402
from serve.llm import vllm_llm_config, vllm_server_app  # noqa: E402
from serve.llm_backends import VLLMBackend  # noqa: E402

S = Settings(llm_backend="vllm", llm_model="Qwen/Qwen3-8B", llm_seed=7, llm_ctx=8192, vllm_gpus=1)
SCHEMA = {"type": "object", "properties": {"emotion": {"type": "string"}}, "required": ["emotion"]}
ANTWORT = {"id": "chatcmpl-1", "object": "chat.completion", "model": "Qwen/Qwen3-8B",
           "choices": [{"index": 0, "finish_reason": "stop", "message": {
               "role": "assistant", "reasoning_content": "Er klingt froh.", "content": '{"emotion": "freude"}'}}],
           "usage": {"prompt_tokens": 41, "completion_tokens": 9, "total_tokens": 50}}


class _Server:
    """The `LLMServer` handle as the engine calls it: `options(stream=True).chat.remote(request)`."""

    def __init__(self, items):
        self.items, self.requests = items, []

    def options(self, **kw):
        assert kw == {"stream": True}
        return self

    @property
    def chat(self):
        return self

    def remote(self, request):
        self.requests.append(request)

        async def gen():
            for item in self.items:
                yield item
        return gen()


def test_the_server_is_configured_from_the_settings():
    config = vllm_llm_config(S)
    assert config.model_loading_config.model_id == "Qwen/Qwen3-8B"
    assert config.model_loading_config.model_source == "Qwen/Qwen3-8B"
    assert config.engine_kwargs == {"max_model_len": 8192, "tensor_parallel_size": 1, "enable_prefix_caching": True,
                                    "reasoning_parser": "qwen3"}
    assert config.deployment_config["num_replicas"] == S.llm_replicas
    assert vllm_server_app(S) is not None


def test_a_structured_call_is_a_request_vllm_accepts_and_its_answer_comes_back_typed():
    server = _Server([ANTWORT])
    out = asyncio.run(VLLMBackend(S, server).chat(ChatRequest(
        messages=[{"role": "user", "content": "Wie klingt er?"}], max_tokens=24, caller="perzeption",
        response_schema=SCHEMA)))
    (req,) = server.requests
    assert (req.model, req.seed, req.max_tokens, req.stream) == ("Qwen/Qwen3-8B", 7, 24, False)
    assert req.chat_template_kwargs == {"enable_thinking": False}
    assert req.response_format.type == "json_schema"
    assert req.response_format.json_schema.model_dump(by_alias=True)["schema"] == SCHEMA
    assert (out.content, out.choices[0].message.reasoning_content) == ('{"emotion": "freude"}', "Er klingt froh.")
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (41, 9)


def test_a_protocol_call_carries_its_regex_and_a_stream_asks_for_usage():
    regex = r"ERGEBNIS: (OK|NEU)"
    server = _Server(['data: {"choices": [{"index": 0, "delta": {"content": "ERGEBNIS: OK"}}]}',
                      'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}', "data: [DONE]"])

    async def collect():
        req = ChatRequest(messages=[{"role": "user", "content": "?"}], think=True, protocol=TextProtocol(regex=regex))
        return [c async for c in VLLMBackend(S, server).chat_stream(req)]

    chunks = asyncio.run(collect())
    (req,) = server.requests
    fields = type(req).model_fields
    held = req.structured_outputs.regex if "structured_outputs" in fields else req.guided_regex
    assert held == regex and req.response_format is None
    assert req.chat_template_kwargs == {"enable_thinking": True} and req.max_tokens == S.llm_max_tokens
    assert req.stream is True and req.stream_options.include_usage is True
    assert "".join(c.content or "" for c in chunks) == "ERGEBNIS: OK" and chunks[-1].usage.completion_tokens == 3
