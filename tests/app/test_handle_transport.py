"""The internal deployments answer alike over both transports (`Settings.handle_transport`): from
an async actor, as a pair actor calls them, the store's results and errors, the embedder's vector
and the LLM's answer, plain and streamed, are the same over gRPC as over Ray actor calls — and the
gRPC handle really bypasses the object store (it cannot give an object reference)."""
import asyncio
import sys

import pytest
import ray
from ray import cloudpickle

from core.settings import Settings

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@ray.remote(num_cpus=0)
class Caller:
    """Calls the deployments through `Services.connect`, as the pair actors and workers do."""

    def __init__(self, settings: dict):
        self.settings = Settings(**settings)

    async def run(self) -> dict:
        from core.wire import ChatChunk, ChatRequest, ChatResponse
        from memory.ops import UnknownOperation
        from pipeline.services import Services

        svc = Services.connect(self.settings)
        out: dict = {}
        out["character"] = (await svc.store.charaktere.get("nova")).name
        # two in the same moment travel as one `batch` request
        missing, alle = await asyncio.gather(svc.store.charaktere.get("gibt-es-nicht"),
                                             svc.store.charaktere.list_all())
        out["missing"], out["batch"] = missing, sorted(c.character_id for c in alle)[:1]
        try:
            await svc.store.handle.call.remote("keine.operation")  # only the declared ones are asked for
            out["error"] = None
        except Exception as e:  # noqa: BLE001 - the class and text are what is compared
            # over Ray the error is also a RayTaskError; over both it is the store's own class
            out["error"] = (isinstance(e, UnknownOperation), "keine.operation" in str(e))
        # a call larger than gRPC's 4 MiB (a card's lorebook on its way to the store can be)
        out["gross"] = await svc.store.charaktere.get("x" * (5 * 1024 * 1024))
        vec = await svc.embedder.handle.embed.remote("Ein Satz fuer beide Wege.")
        out["vector"] = [round(x, 6) for x in vec[:8]] + [len(vec)]
        # the typed messages of the LLM seam (core/wire.py) travel whole over both
        request = ChatRequest(messages=[{"role": "user", "content": "Hallo"}], temperature=0.0, max_tokens=16,
                              think=False, caller="responder", pair="transport:nova")
        resp = await svc.llm.handle.chat.remote(request)
        out["chat"] = resp.content if isinstance(resp, ChatResponse) else None
        parts = []
        async for chunk in svc.llm.handle.options(stream=True).chat_stream.remote(request):
            parts.append((chunk.content or "") if isinstance(chunk, ChatChunk) else "?")
        out["stream"] = "".join(parts).strip()
        response = svc.store.handle.call.remote("charaktere.get", "nova")
        out["by_reference"] = response.by_reference
        try:
            await response._to_object_ref()
            out["object_ref"] = True
        except Exception:  # noqa: BLE001 - Serve refuses it for a call that never enters the object store
            out["object_ref"] = False
        return out


@pytest.fixture(scope="module")
def answers(system):
    s = system.settings
    return {t: ray.get(Caller.remote(s.model_copy(update={"handle_transport": t}).model_dump(mode="json"))
                       .run.remote(), timeout=120)
            for t in ("grpc", "ray")}


def test_both_transports_give_the_same_answers_and_errors(answers):
    grpc, by_ref = answers["grpc"], answers["ray"]
    assert grpc["character"] == "Nova" and grpc["missing"] is None and grpc["gross"] is None
    assert grpc["error"] == (True, True), grpc["error"]
    assert grpc["vector"][-1] > 8 and grpc["chat"] and grpc["stream"] == grpc["chat"]
    for key in ("character", "missing", "gross", "batch", "error", "vector", "chat", "stream"):
        assert grpc[key] == by_ref[key], key


def test_grpc_calls_bypass_the_object_store(answers):
    assert answers["grpc"]["by_reference"] is False and answers["grpc"]["object_ref"] is False
    assert answers["ray"]["by_reference"] is True and answers["ray"]["object_ref"] is True


def test_the_system_under_test_runs_on_grpc(system):
    """Every other test of this tier then goes through the gRPC transport."""
    assert system.settings.handle_transport == "grpc"
