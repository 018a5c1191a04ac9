"""The stimulus's vector is started before the first node and used by every node that asks for it
in the turn: one embedding call, and a node that asks while it runs waits for that same call."""
import asyncio

from pipeline.services import EmbedderClient
from pipeline.trace import TurnTrace


class _Remote:
    def __init__(self):
        self.calls = []

    async def remote(self, text):
        self.calls.append(text)
        await asyncio.sleep(0.05)
        return [float(len(text))]


class _Handle:
    def __init__(self):
        self.embed = _Remote()


def test_a_prefetched_text_is_embedded_once_and_waited_for():
    handle = _Handle()
    client = EmbedderClient(handle)
    trace = TurnTrace("u", "c", "t")

    async def go():
        client.prefetch(trace, "Hallo Nova")
        await asyncio.sleep(0.01)  # perzeption's model call runs meanwhile
        first, second = await asyncio.gather(client.embed(trace, "Hallo Nova"), client.embed(trace, "Hallo Nova"))
        other = await client.embed(trace, "etwas anderes")
        return first, second, other

    first, second, other = asyncio.run(go())
    assert first == second == [10.0] and other == [13.0]
    assert handle.embed.calls == ["Hallo Nova", "etwas anderes"]
    assert trace.embed_ms >= 40  # the time of the calls, counted once each


class _LLMHandle:
    """Records when a call is sent; answers after a while."""

    def __init__(self, log):
        self.log = log
        self.chat = self

    def remote(self, request):
        from core.wire import ChatResponse

        self.log.append(f"gesendet:{request.caller}")

        async def answer():
            await asyncio.sleep(0.02)
            self.log.append(f"beantwortet:{request.caller}")
            return ChatResponse.model_validate({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                                                "model": "m"})

        return answer()


def test_the_turns_reads_start_once_its_first_model_call_is_on_its_way():
    # the pair actor's `vorab` reads waited for nothing, but issued before perzeption's model call
    # they delayed it: now the call goes out first and the reads start beside it, once
    from core.settings import Settings
    from pipeline.services import LLMClient

    log: list[str] = []
    trace = TurnTrace("u", "c", "t")
    trace.after_first_call(lambda: log.append("vorab"))
    client = LLMClient(_LLMHandle(log), Settings())

    async def go():
        await client.chat(trace, "perzeption", [{"role": "user", "content": "hallo"}])
        await client.chat(trace, "enricher", [{"role": "user", "content": "hallo"}])
        trace.call_sent()  # the pair actor's later call: nothing left to start

    asyncio.run(go())
    assert log == ["gesendet:perzeption", "vorab", "beantwortet:perzeption", "gesendet:enricher", "beantwortet:enricher"]


def test_early_reads_that_fail_to_start_do_not_fail_the_model_call(caplog):
    from core.settings import Settings
    from pipeline.services import LLMClient

    log: list[str] = []
    trace = TurnTrace("u", "c", "t")

    def kaputt():
        raise RuntimeError("no embedder handle")

    trace.after_first_call(kaputt)
    client = LLMClient(_LLMHandle(log), Settings())
    res = asyncio.run(client.chat(trace, "perzeption", [{"role": "user", "content": "hallo"}]))
    assert res.content == "ok" and log == ["gesendet:perzeption", "beantwortet:perzeption"]
    assert "fallback vorab_nicht_gestartet" in caplog.text
