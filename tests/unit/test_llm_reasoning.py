"""The reasoning channel is separated from the content, whole and streamed."""
from serve.llm_backends import _ThinkSplitter, split_reasoning


def test_split_reasoning():
    assert split_reasoning("<think>a plan</think>Hallo") == ("Hallo", "a plan")
    assert split_reasoning("Hallo") == ("Hallo", None)


def test_stream_splitter_across_chunk_borders():
    s = _ThinkSplitter()
    pieces = ["<thi", "nk>ich ", "überlege</th", "ink>Hal", "lo!"]
    out = [p for c in pieces for p in s.feed(c)] + s.flush()
    content = "".join(t for k, t in out if k == "content")
    reasoning = "".join(t for k, t in out if k == "reasoning_content")
    assert content == "Hallo!"
    assert reasoning == "ich überlege"


def test_stream_splitter_plain_text_passes_through():
    s = _ThinkSplitter()
    out = s.feed("a < b") + s.feed(" und <x>") + s.flush()
    assert "".join(t for _, t in out) == "a < b und <x>"
    assert all(k == "content" for k, _ in out)


# recorded answers of vLLM's OpenAI layer (Qwen3-8B, thinking on): with the reasoning parser the
# reasoning arrives in its own field; without it, inline in the content
MIT_PARSER = {"id": "chatcmpl-1", "object": "chat.completion", "model": "qwen3-8b",
              "choices": [{"index": 0, "finish_reason": "stop", "message": {
                  "role": "assistant", "reasoning_content": "Der Nutzer fragt nach Montag.",
                  "content": "ERGEBNIS: OK"}}],
              "usage": {"prompt_tokens": 812, "completion_tokens": 57, "total_tokens": 869}}
OHNE_PARSER = {"id": "chatcmpl-2", "object": "chat.completion", "model": "qwen3-8b",
               "choices": [{"index": 0, "finish_reason": "stop", "message": {
                   "role": "assistant", "content": "<think>\nDer Nutzer fragt nach Montag.\n</think>\n\nERGEBNIS: OK"}}],
               "usage": {"prompt_tokens": 812, "completion_tokens": 61, "total_tokens": 873}}


def test_vllm_answers_give_their_reasoning_apart_with_and_without_the_parser():
    from serve.llm_backends import vllm_completion

    for recorded in (MIT_PARSER, OHNE_PARSER):
        out = vllm_completion("qwen3-8b", recorded)
        assert out.content.strip() == "ERGEBNIS: OK"
        assert out.reasoning.strip() == "Der Nutzer fragt nach Montag."


def test_vllm_streams_give_their_reasoning_apart_with_and_without_the_parser():
    import asyncio
    import json as _json

    from serve.llm_backends import vllm_stream

    def sse(*deltas):
        lines = [f"data: {_json.dumps({'choices': [{'index': 0, 'delta': d}]})}" for d in deltas]
        return lines + ['data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9}}', "data: [DONE]"]

    async def items(lines):
        for line in lines:
            yield line

    async def collect(lines):
        return [c async for c in vllm_stream("qwen3-8b", items(lines))]

    mit = sse({"reasoning_content": "Der Nutzer "}, {"reasoning_content": "fragt."}, {"content": "ERGEBNIS: "},
              {"content": "OK"})
    ohne = sse({"content": "<thi"}, {"content": "nk>Der Nutzer fragt.</th"}, {"content": "ink>ERGEBNIS: OK"})
    for lines in (mit, ohne):
        chunks = asyncio.run(collect(lines))
        assert "".join(c.content or "" for c in chunks) == "ERGEBNIS: OK"
        assert "".join(c.reasoning or "" for c in chunks) in ("Der Nutzer fragt.",)
        assert chunks[-1].usage.completion_tokens == 9


def test_the_vllm_engine_gets_the_reasoning_parser_of_its_model_family():
    from core.settings import Settings
    from serve.llm import vllm_engine_kwargs

    qwen = vllm_engine_kwargs(Settings(llm_backend="vllm", llm_model="Qwen/Qwen3-8B"))
    assert qwen["reasoning_parser"] == "qwen3" and qwen["enable_prefix_caching"] is True
    assert "reasoning_parser" not in vllm_engine_kwargs(Settings(llm_backend="vllm", llm_model="meta-llama/Llama-3.1-8B"))
    chosen = Settings(llm_backend="vllm", llm_model="meta-llama/Llama-3.1-8B", vllm_reasoning_parser="deepseek_r1")
    assert vllm_engine_kwargs(chosen)["reasoning_parser"] == "deepseek_r1"
    off = Settings(llm_backend="vllm", llm_model="Qwen/Qwen3-8B", vllm_reasoning_parser="")
    assert "reasoning_parser" not in vllm_engine_kwargs(off)
