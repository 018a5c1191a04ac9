"""A model call the engine failed transiently is asked again with backoff before its node fails;
a permanent error, or a stream that already sent text, is not."""
import asyncio
import logging

import pytest

from core.settings import Settings
from core.wire import ChatChunk
from pipeline.services import LLMClient, transient
from pipeline.trace import TurnTrace
from serve.llm_backends import LLMBackendError, completion, http_error

MESSAGES = [{"role": "user", "content": "Hallo"}]


class _Call:
    def __init__(self, handle):
        self.handle = handle

    def remote(self, request):
        self.handle.requests.append(request)
        outcome = self.handle.outcomes.pop(0)

        async def answer():
            if isinstance(outcome, BaseException):
                raise outcome
            return completion("m", outcome, None, 3, 2, "stop")

        return answer()


class _Stream:
    def __init__(self, handle):
        self.handle = handle

    def remote(self, request):
        self.handle.requests.append(request)
        outcome = self.handle.outcomes.pop(0)

        async def chunks():
            for part in outcome:
                if isinstance(part, BaseException):
                    raise part
                yield ChatChunk.model_validate({"choices": [{"delta": {"content": part}}]})
            yield ChatChunk.model_validate({"choices": [{"delta": {}, "finish_reason": "stop"}],
                                            "usage": {"prompt_tokens": 3, "completion_tokens": 2}})

        return chunks()


class FakeHandle:
    """Answers each call from `outcomes` in turn: a text, an exception, or (streaming) a list of parts."""

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.requests = []
        self.chat = _Call(self)
        self.chat_stream = _Stream(self)

    def options(self, **_):
        return self


def _client(handle, retries=2):
    return LLMClient(handle, Settings(llm_retries=retries, llm_retry_backoff_s=0.001))


def test_server_errors_and_lost_connections_are_transient_client_errors_are_not():
    assert transient(http_error(500, "boom")) and transient(http_error(503, "")) and transient(http_error(429, ""))
    assert not transient(http_error(400, "bad request")) and not transient(http_error(404, ""))
    assert transient(ConnectionResetError()) and transient(asyncio.TimeoutError())
    assert not transient(ValueError("parse"))
    # as Ray hands a replica's error on: the cause carries it
    wrapped = RuntimeError("task failed")
    wrapped.cause = http_error(502, "")
    assert transient(wrapped)
    # the flag survives pickling across a process seam
    import pickle

    assert pickle.loads(pickle.dumps(http_error(500, "x"))).transient is True


def test_a_transient_error_is_asked_again_and_named(caplog):
    handle = FakeHandle([http_error(500, "boom"), ConnectionResetError("reset"), "Gern."])
    trace = TurnTrace("u", "c", "t1")
    with caplog.at_level(logging.WARNING, logger="novaberg.llm"):
        result = asyncio.run(_client(handle).chat(trace, "responder", MESSAGES))
    assert result.content == "Gern." and len(handle.requests) == 3
    lines = [r.getMessage() for r in caplog.records if "fallback modell_wiederholt" in r.getMessage()]
    assert len(lines) == 2 and "repeat 1 of 2" in lines[0] and "repeat 2 of 2" in lines[1]
    assert trace.llm_calls == 1  # one answered call


def test_the_node_fails_when_the_repeats_are_spent_or_the_error_is_permanent():
    handle = FakeHandle([http_error(500, "a"), http_error(500, "b"), http_error(500, "c")])
    with pytest.raises(LLMBackendError):
        asyncio.run(_client(handle).chat(TurnTrace("u", "c", "t"), "responder", MESSAGES))
    assert len(handle.requests) == 3
    handle = FakeHandle([http_error(400, "bad"), "never"])
    with pytest.raises(LLMBackendError):
        asyncio.run(_client(handle).chat(TurnTrace("u", "c", "t"), "responder", MESSAGES))
    assert len(handle.requests) == 1


def test_a_stream_is_asked_again_only_before_it_sent_text():
    events = asyncio.Queue()
    handle = FakeHandle([[http_error(503, "")], ["Gern ", "doch."]])
    result = asyncio.run(_client(handle).chat(TurnTrace("u", "c", "t", events), "responder", MESSAGES,
                                              stream_tokens=True))
    assert result.content == "Gern doch." and len(handle.requests) == 2
    drafts = []
    while not events.empty():
        ev = events.get_nowait()
        assert ev["event"] == "draft"  # provisional text: the kept reply comes with the commit
        drafts.append(ev["text"])
    assert "".join(drafts) == "Gern doch."
    # text already went out as draft: a break after it fails the node rather than writing it twice
    handle = FakeHandle([["Gern ", http_error(503, "")], ["nie"]])
    with pytest.raises(LLMBackendError):
        asyncio.run(_client(handle).chat(TurnTrace("u", "c", "t", asyncio.Queue()), "responder", MESSAGES,
                                         stream_tokens=True))
    assert len(handle.requests) == 1


def test_a_call_whose_replica_died_or_is_unreachable_is_asked_again():
    """A replica killed under a call (Serve raises `ActorUnavailableError` over gRPC, `ActorDiedError`
    as a Ray call): the repeat goes to a live replica; a model call changes nothing."""
    from ray.exceptions import ActorDiedError, ActorUnavailableError

    weg = ActorUnavailableError("the replica is unreachable", b"\0" * 16)
    assert transient(weg) and transient(ActorDiedError())
    wrapped = RuntimeError("task failed")
    wrapped.cause = ActorDiedError()
    assert transient(wrapped)
    handle = FakeHandle([weg, "Da bin ich."])
    result = asyncio.run(_client(handle).chat(TurnTrace("u", "c", "t"), "salience", MESSAGES))
    assert result.content == "Da bin ich." and len(handle.requests) == 2
