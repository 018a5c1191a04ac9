"""The LLM seam's typed messages (core/wire.py): the deployment takes a `ChatRequest` and answers
with a `ChatResponse` or `ChatChunk`s from any `LLMEngine`, and refuses a dict; the recording stays
plain dicts the replay sends again as requests; the messages survive pickling (Ray's
seam); an engine that does not implement `LLMEngine` is refused."""
import asyncio
import pickle

import pytest

from core.settings import Settings
from core.wire import ChatChunk, ChatRequest, ChatResponse, LLMEngine, TextProtocol
from serve.llm import LLMDeployment, constraints
from tests.scripted_engine import ScriptedEngine

Deployment = LLMDeployment.func_or_class
"""The deployment's class itself, run in this process (no Ray)."""

REQUEST = ChatRequest(messages=[{"role": "user", "content": "Hallo"}], temperature=0.2, max_tokens=16,
                      caller="responder", pair="u:nova")


def _deployment(**settings) -> "Deployment":
    return Deployment(Settings(**settings).llm, None,
                      ScriptedEngine.with_script({"responder": ["Schoen, dass du da bist."]}))


def test_every_engine_implements_the_protocol():
    from serve.llm_backends import LlamaCppBackend, OpenAICompatBackend, VLLMBackend

    for engine in (LlamaCppBackend, OpenAICompatBackend, VLLMBackend, ScriptedEngine):
        assert issubclass(engine, LLMEngine) and not getattr(engine, "__abstractmethods__", None), engine


def test_typed_in_typed_out_plain_and_streamed():
    d = _deployment()

    async def go():
        whole = await d.chat(REQUEST)
        pieces = [c async for c in d.chat_stream(REQUEST)]
        return whole, pieces

    whole, pieces = asyncio.run(go())
    assert isinstance(whole, ChatResponse) and whole.content == "Schoen, dass du da bist."
    assert whole.model == "scripted-engine" and whole.finish_reason == "stop" and whole.usage.prompt_tokens == 10
    assert all(isinstance(c, ChatChunk) for c in pieces)
    assert "".join(c.content or "" for c in pieces).strip() == whole.content
    assert pieces[-1].usage is not None and pieces[-1].finish_reason == "stop"
    load = d.load()
    assert load["requests"] == 2 and load["prompt_tokens"] == 20 and load["scripted_calls"] == 2


def test_a_dict_request_is_refused_with_its_type_named():
    d = _deployment()
    with pytest.raises(TypeError, match="takes a ChatRequest"):
        asyncio.run(d.chat(REQUEST.as_dict()))

    async def stream():
        return [c async for c in d.chat_stream(REQUEST.as_dict())]

    with pytest.raises(TypeError, match="takes a ChatRequest"):
        asyncio.run(stream())
    assert d.load()["requests"] == 0


def test_the_recording_holds_plain_dicts_the_replay_can_send_again():
    d = _deployment()
    d.record(True)
    schema = {"type": "object", "properties": {"urteil": {"enum": ["ok"]}}}
    asyncio.run(d.chat(REQUEST.model_copy(update={"caller": "tribunal", "response_schema": schema})))
    [rec] = d.record(False)
    assert rec["request"] == {"messages": [{"role": "user", "content": "Hallo"}], "temperature": 0.2,
                              "max_tokens": 16, "think": False, "caller": "tribunal", "pair": "u:nova",
                              "response_schema": schema}
    assert rec["usage"] == {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "cached_tokens": 0}
    again = asyncio.run(d.chat(ChatRequest.model_validate({**rec["request"], "caller": "replay:tribunal"})))
    assert again.usage.prompt_tokens == 10  # as bench/harness.py replays


def test_constraints_leave_the_request_or_drop_both():
    req = REQUEST.model_copy(update={"response_schema": {"type": "object"},
                                     "protocol": TextProtocol(gbnf="root ::= \"x\"", regex="x")})
    assert constraints(Settings(), req) is req
    off = constraints(Settings(llm_structured_outputs=False), req)
    assert off.response_schema is None and off.protocol is None and off.messages == req.messages


def test_the_messages_survive_pickling_and_unknown_fields_are_refused():
    answer = ChatResponse.model_validate({"model": "m", "choices": [
        {"message": {"content": "a", "reasoning_content": "r"}, "finish_reason": "length"}]})
    for m in (REQUEST, answer, ChatChunk.model_validate({"choices": [{"delta": {"content": "a"}}]})):
        assert pickle.loads(pickle.dumps(m)) == m
    assert (answer.content, answer.reasoning, answer.finish_reason) == ("a", "r", "length")
    with pytest.raises(ValueError, match="stream"):
        ChatRequest(messages=[], stream=True)


def test_an_engine_outside_the_protocol_is_refused():
    class Loose:
        model = "loose"

        def __init__(self, settings):
            pass

    with pytest.raises(TypeError, match="does not implement core.wire.LLMEngine"):
        Deployment(Settings().llm, None, Loose)
