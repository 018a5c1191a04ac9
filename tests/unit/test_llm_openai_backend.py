"""The OpenAI-compatible backend against a scripted server (httpx MockTransport): request shape,
the think switch, the reasoning channel, token counts, streaming, and a clear error."""
import asyncio
import json

import httpx
import pytest

from cluster.settings import Settings
from serve.llm_backends import LLMBackendError, OpenAICompatBackend


def _server(seen):
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if body["messages"][0]["content"] == "fail":
            return httpx.Response(500, text="engine exploded")
        if not body["stream"]:
            return httpx.Response(200, json={
                "model": "m", "choices": [{"finish_reason": "stop", "message": {
                    "role": "assistant", "content": "Hallo!", "reasoning_content": "kurz nachdenken"}}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})
        lines = [
            {"choices": [{"delta": {"reasoning": "erst denken"}}]},
            {"choices": [{"delta": {"content": "Hal"}}]},
            {"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}},
        ]
        text = "".join(f"data: {json.dumps(x)}\n\n" for x in lines) + "data: [DONE]\n\n"
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


def _backend(seen):
    return OpenAICompatBackend(Settings(llm_backend="openai", llm_model="qwen3.8-test"), transport=_server(seen))


def test_plain_completion_with_reasoning_and_usage():
    seen = []

    async def go():
        b = _backend(seen)
        await b.start()
        return await b.chat({"messages": [{"role": "user", "content": "hi"}], "temperature": 0.15,
                             "max_tokens": 7, "think": True})

    out = asyncio.run(go())
    msg = out["choices"][0]["message"]
    assert msg["content"] == "Hallo!" and msg["reasoning_content"] == "kurz nachdenken"
    assert out["usage"] == {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    assert seen[0]["temperature"] == 0.15 and seen[0]["max_tokens"] == 7
    assert seen[0]["chat_template_kwargs"] == {"enable_thinking": True}
    assert seen[0]["model"] == "qwen3.8-test"


def test_streamed_completion():
    seen = []

    async def go():
        b = _backend(seen)
        await b.start()
        return [c async for c in b.chat_stream({"messages": [{"role": "user", "content": "hi"}], "think": False})]

    chunks = asyncio.run(go())
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks)
    assert content == "Hallo" and reasoning == "erst denken"
    assert chunks[-1]["usage"]["completion_tokens"] == 2
    assert seen[0]["stream_options"] == {"include_usage": True}
    assert seen[0]["chat_template_kwargs"] == {"enable_thinking": False}


def test_server_error_is_named():
    async def go():
        b = _backend([])
        await b.start()
        await b.chat({"messages": [{"role": "user", "content": "fail"}]})

    with pytest.raises(LLMBackendError, match="HTTP 500.*engine exploded"):
        asyncio.run(go())


def test_a_server_that_refuses_response_format_is_asked_again_without_it(caplog):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if "response_format" in body:
            return httpx.Response(400, json={"error": "unknown field response_format"})
        return httpx.Response(200, json={"model": "m", "choices": [{"finish_reason": "stop", "message": {
            "role": "assistant", "content": '{"urteil": "ok"}'}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    b = OpenAICompatBackend(Settings(llm_backend="openai"), transport=httpx.MockTransport(handler))
    req = {"messages": [{"role": "user", "content": "x"}], "caller": "tribunal", "response_schema": {"type": "object"}}

    async def go():
        await b.start()
        first = await b.chat(req)
        second = await b.chat(req)
        return first, second

    with caplog.at_level("WARNING", logger="novaberg.llm"):
        first, second = asyncio.run(go())
    assert first["choices"][0]["message"]["content"] == '{"urteil": "ok"}' == second["choices"][0]["message"]["content"]
    assert ["response_format" in b_ for b_ in seen] == [True, False, False]  # refused once, never sent again
    assert "fallback response_format_abgelehnt" in caplog.text


def test_the_seed_goes_into_the_body_only_when_it_is_set():
    seen = []

    async def go(settings):
        b = OpenAICompatBackend(settings, transport=_server(seen))
        await b.start()
        await b.chat({"messages": [{"role": "user", "content": "hi"}]})

    asyncio.run(go(Settings(llm_backend="openai")))
    asyncio.run(go(Settings(llm_backend="openai", llm_seed=7)))
    assert "seed" not in seen[0] and seen[1]["seed"] == 7
