"""The OpenAI-compatible backend against a scripted server (a real aiohttp server on a local
port): request shape, the think switch, the reasoning channel, token counts, streaming, and a
clear error."""
import asyncio
import json
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from core.settings import Settings
from core.wire import ChatRequest
from serve.llm_backends import LLMBackendError, OpenAICompatBackend


def _server(seen):
    """A scripted engine: "fail" as the first message's text answers 500, a stream two deltas of
    content after one of reasoning, anything else one completion with reasoning."""

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        if body["messages"][0]["content"] == "fail":
            return web.Response(status=500, text="engine exploded")
        if not body["stream"]:
            return web.json_response({
                "model": "m", "choices": [{"finish_reason": "stop", "message": {
                    "role": "assistant", "content": "Hallo!", "reasoning_content": "kurz nachdenken"}}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14,
                          "prompt_tokens_details": {"cached_tokens": 8}}})
        lines = [
            {"choices": [{"delta": {"reasoning": "erst denken"}}]},
            {"choices": [{"delta": {"content": "Hal"}}]},
            {"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13,
                                      "prompt_tokens_details": {"cached_tokens": 8}}},
        ]
        text = "".join(f"data: {json.dumps(x)}\n\n" for x in lines) + "data: [DONE]\n\n"
        return web.Response(text=text, content_type="text/event-stream")

    return handler


@asynccontextmanager
async def served(handler, settings: Settings):
    """The backend, started, against `handler` served on a free local port."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    backend = OpenAICompatBackend(settings.model_copy(update={"openai_base_url": f"http://127.0.0.1:{port}/v1/"}))
    await backend.start()
    try:
        yield backend
    finally:
        await backend.close()
        await runner.cleanup()


def _settings(**kw) -> Settings:
    return Settings(llm_backend="openai", llm_model="qwen3.8-test", **kw)


def test_plain_completion_with_reasoning_and_usage():
    seen = []

    async def go():
        async with served(_server(seen), _settings()) as b:
            return await b.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}], temperature=0.15,
                                            max_tokens=7, think=True))

    out = asyncio.run(go())
    assert out.content == "Hallo!" and out.reasoning == "kurz nachdenken"
    # the prompt tokens the engine found in its prefix cache come through, as vLLM reports them
    assert out.usage.model_dump() == {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14, "cached_tokens": 8}
    assert seen[0]["temperature"] == 0.15 and seen[0]["max_tokens"] == 7
    assert seen[0]["chat_template_kwargs"] == {"enable_thinking": True}
    assert seen[0]["model"] == "qwen3.8-test"


def test_streamed_completion():
    seen = []

    async def go():
        async with served(_server(seen), _settings()) as b:
            return [c async for c in b.chat_stream(ChatRequest(messages=[{"role": "user", "content": "hi"}],
                                                               think=False))]

    chunks = asyncio.run(go())
    content = "".join(c.content or "" for c in chunks)
    reasoning = "".join(c.reasoning or "" for c in chunks)
    assert content == "Hallo" and reasoning == "erst denken"
    assert chunks[-1].usage.completion_tokens == 2 and chunks[-1].usage.cached_tokens == 8
    assert seen[0]["stream_options"] == {"include_usage": True}
    assert seen[0]["chat_template_kwargs"] == {"enable_thinking": False}


def test_server_error_is_named():
    async def go():
        async with served(_server([]), _settings()) as b:
            await b.chat(ChatRequest(messages=[{"role": "user", "content": "fail"}]))

    with pytest.raises(LLMBackendError, match="HTTP 500.*engine exploded"):
        asyncio.run(go())


def test_a_server_that_does_not_answer_is_named_with_its_address():
    async def go(stream: bool):
        async with served(_server([]), _settings()) as b:
            port_free = b._url  # the server's address; then nothing listens there any more
        b = OpenAICompatBackend(_settings(openai_base_url=port_free.rsplit("/chat/completions", 1)[0]))
        await b.start()
        try:
            req = ChatRequest(messages=[{"role": "user", "content": "hi"}])
            if stream:
                return [c async for c in b.chat_stream(req)]
            return await b.chat(req)
        finally:
            await b.close()

    for stream in (False, True):
        with pytest.raises(LLMBackendError, match=r"openai backend: http://127\.0\.0\.1:\d+/v1/chat/completions "
                                                  r"did not answer: ClientConnectorError"):
            asyncio.run(go(stream))


def test_a_server_that_refuses_response_format_is_asked_again_without_it(caplog):
    seen = []

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        if "response_format" in body:
            return web.json_response({"error": "unknown field response_format"}, status=400)
        return web.json_response({"model": "m", "choices": [{"finish_reason": "stop", "message": {
            "role": "assistant", "content": '{"urteil": "ok"}'}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    req = ChatRequest(messages=[{"role": "user", "content": "x"}], caller="tribunal",
                      response_schema={"type": "object"})

    async def go():
        async with served(handler, Settings(llm_backend="openai")) as b:
            first = await b.chat(req)
            second = await b.chat(req)
            return first, second

    with caplog.at_level("WARNING", logger="novaberg.llm"):
        first, second = asyncio.run(go())
    assert first.content == '{"urteil": "ok"}' == second.content
    assert ["response_format" in b_ for b_ in seen] == [True, False, False]  # refused once, never sent again
    assert "fallback response_format_abgelehnt" in caplog.text


def test_the_seed_goes_into_the_body_only_when_it_is_set():
    seen = []

    async def go(settings):
        async with served(_server(seen), settings) as b:
            await b.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))

    asyncio.run(go(Settings(llm_backend="openai")))
    asyncio.run(go(Settings(llm_backend="openai", llm_seed=7)))
    assert "seed" not in seen[0] and seen[1]["seed"] == 7


def test_a_stream_event_longer_than_aiohttp_s_default_line_is_read_whole():
    long = "Wort " * 30_000  # 150,000 characters in one event

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        event = {"choices": [{"delta": {"content": long}, "finish_reason": "stop"}]}
        await resp.write(f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode())
        return resp

    async def go():
        async with served(handler, _settings()) as b:
            return [c async for c in b.chat_stream(ChatRequest(messages=[{"role": "user", "content": "hi"}]))]

    chunks = asyncio.run(go())
    assert "".join(c.content or "" for c in chunks) == long
