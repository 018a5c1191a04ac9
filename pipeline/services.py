"""What nodes are given to work with (`Deps`) and the thin clients over the Serve deployments.

A pair actor builds one `Services` lazily and reuses it for every turn; `Deps` adds the per-turn
trace and cache. No heavy library is imported here: the model weights and the Postgres pool live
in the deployments.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from core.errors import ReplicaGone, ServiceError
from core.names import APP_NAME, EMBEDDER_DEPLOYMENT, LLM_DEPLOYMENT, STORE_DEPLOYMENT, WEB_DEPLOYMENT
from core.settings import Settings
from core.wire import ChatChunk, ChatRequest, ChatResponse
from memory import seams
from memory.clients import StoreOps
from memory.session_store import (AuftragStore, ImpulsStore, KzgStore, LandschaftStore, QuotenStore,
                                  SessionStore)
from pipeline.node_config import budget, node_config
from pipeline.trace import Slot, TurnTrace
from prompts import PromptLibrary

log = logging.getLogger("novaberg.llm")


def transient(e: BaseException) -> bool:
    """An engine error that may pass: the backend says so (`LLMBackendError.transient`, also
    when Ray hands it on wrapped), the call timed out or lost its connection, or its replica died
    or could not be reached (`ReplicaGone`, mapped from Ray's errors at the call: Serve routes a
    repeat to a live replica, and a model call changes nothing, so it may be asked again)."""
    for err in (e, getattr(e, "cause", None), e.__cause__):
        if not isinstance(err, BaseException):
            continue
        if getattr(err, "transient", False) or isinstance(err, (TimeoutError, asyncio.TimeoutError, ConnectionError)):
            return True
        if isinstance(seams.family(err, stores=False), ReplicaGone):
            return True
    return False


def transport(handle, settings: Settings):
    """The handle as `Settings.handle_transport` says: over the replica's gRPC server (`grpc`:
    no object store, no Ray task per call) or as a Ray actor call (`ray`)."""
    return handle.options(_by_reference=settings.handle_transport == "ray")


@dataclass
class ChatResult:
    content: str
    reasoning: str | None
    model: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None


class LLMClient:
    MODEL_NAME_TTL_S = 30.0
    """How long a client trusts the model name it asked for: every LLM node asks for it before it
    renders its prompt (the prompt variant follows the model), and a call per node doubled the
    handle calls of a turn; a redeployed model is seen within this time."""

    def __init__(self, handle, settings: Settings):
        self.handle = handle
        self.settings = settings
        self._model: tuple[float, str] | None = None

    async def chat(self, trace: TurnTrace, node: str, messages: list[dict[str, str]], *,
                   think: bool = False, stream_tokens: bool = False, response_schema: dict | None = None,
                   protocol: dict[str, str] | None = None, max_tokens: int | None = None) -> ChatResult:
        """`response_schema`: the JSON schema the answer must follow; `protocol`: a text protocol
        as a GBNF grammar (`gbnf`) and a regular expression (`regex`). Each backend applies what
        its engine supports; the caller validates the answer either way. `max_tokens`: this call's
        budget where the node computes one (the responder's follows the turn's span); unset, the
        node's `budget`."""
        cfg = node_config(node)
        request = ChatRequest(
            messages=messages, temperature=cfg.temperature,
            max_tokens=budget(node, self.settings) if max_tokens is None else max_tokens, think=think,
            caller=node, pair=f"{trace.user_id}:{trace.character_id}", response_schema=response_schema,
            protocol=protocol)
        trace.prompt_sent(node, messages)
        t0 = time.perf_counter()
        versuch = 0
        while True:
            drafted: list[str] = []
            try:
                with seams.service_calls():
                    if stream_tokens and trace.events is not None:
                        result = await self._stream(trace, node, request, drafted)
                    else:
                        result = await self._call(trace, request)
                break
            except Exception as e:  # noqa: BLE001 - sorted below: only a transient engine error is asked again
                if drafted or versuch >= self.settings.llm_retries or not transient(e):
                    raise
                versuch += 1
                wait = self.settings.llm_retry_backoff_s * 2 ** (versuch - 1) * random.uniform(0.8, 1.2)
                log.warning("llm: fallback modell_wiederholt: %s's call failed (%s: %s); asking again in %.2f s "
                            "(repeat %d of %d; pair %s:%s, turn %s)", node, type(e).__name__, str(e)[:200], wait,
                            versuch, self.settings.llm_retries, trace.user_id, trace.character_id, trace.turn_id)
                await asyncio.sleep(wait)
        trace.llm_done((time.perf_counter() - t0) * 1000, result.prompt_tokens, result.completion_tokens, node)
        return result

    async def _stream(self, trace: TurnTrace, node: str, request: ChatRequest, drafted: list[str]) -> ChatResult:
        reasoning: list[str] = []
        final: ChatChunk | None = None
        gen = self.handle.options(stream=True).chat_stream.remote(request)
        trace.call_sent()
        chunk: ChatChunk
        async for chunk in gen:
            if chunk.content:
                drafted.append(chunk.content)
                # provisional: review may still change it; the kept reply follows as `token`
                trace.emit("draft", node=node, text=chunk.content)
            if chunk.reasoning:
                reasoning.append(chunk.reasoning)
            if chunk.usage is not None:
                final = chunk
        if final is None:
            return ChatResult("".join(drafted), "".join(reasoning) or None, "", 0, 0, None)
        return ChatResult("".join(drafted), "".join(reasoning) or None, final.model, final.usage.prompt_tokens,
                          final.usage.completion_tokens, final.finish_reason)

    async def _call(self, trace: TurnTrace, request: ChatRequest) -> ChatResult:
        call = self.handle.chat.remote(request)
        trace.call_sent()
        resp: ChatResponse = await call
        return ChatResult(resp.content, resp.reasoning, resp.model, resp.usage.prompt_tokens,
                          resp.usage.completion_tokens, resp.finish_reason)

    async def model_name(self) -> str:
        now = time.monotonic()
        if self._model is None or now - self._model[0] > self.MODEL_NAME_TTL_S:
            self._model = (now, await self.handle.model_name.remote())
        return self._model[1]


EMBEDDING: Slot[list[float]] = Slot("embedding")
"""A text's embedding (`.of(text)`), computed once per turn."""


class EmbedderClient:
    def __init__(self, handle):
        self.handle = handle

    async def embed(self, trace: TurnTrace, text: str) -> list[float]:
        # the same text twice in one turn (both chains embed the stimulus) is embedded once
        return await trace.start_once(EMBEDDING.of(text), lambda: self._embed(trace, text))

    def prefetch(self, trace: TurnTrace, text: str) -> None:
        """Start embedding `text` now; the first `embed` of it in this turn waits for this one
        (the pair actor starts the stimulus's before the first node: it runs beside perzeption's
        model call instead of after it)."""
        trace.start_once(EMBEDDING.of(text), lambda: self._embed(trace, text))

    async def _embed(self, trace: TurnTrace, text: str) -> list[float]:
        t0 = time.perf_counter()
        vec = await self.handle.embed.remote(text)
        trace.embed_ms += (time.perf_counter() - t0) * 1000
        return vec


class StoreClient(StoreOps):
    """Postgres work, run in the store deployment where the connections are pooled: the typed
    clients of `memory/clients.py` (`store.lzg.add_nodes(…)`) over the store deployment. Operations
    asked for in the same moment — the reads nodes and the enricher make side by side — travel as
    one request (`StoreDeployment.batch`) and run side by side there: one round trip instead of one
    each, and the handle's cost once."""

    def __init__(self, handle):
        super().__init__(self._run)
        self.handle = handle
        self._pending: list[tuple[str, tuple, dict, asyncio.Future]] = []

    async def load_pair(self, user_id: str, character_id: str) -> dict[str, Any]:
        return await self.handle.load_pair.remote(user_id, character_id)

    async def _run(self, op: str, args: tuple, kwargs: dict) -> Any:
        """The transport of the typed clients (`memory/clients.py`): one operation, run where the
        connections are pooled, in the moment's batch."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if not self._pending:
            loop.call_soon(self._send)  # after every call made in this moment
        self._pending.append((op, args, kwargs, fut))
        return await fut

    def _send(self) -> None:
        calls, self._pending = self._pending, []
        asyncio.ensure_future(self._single(*calls[0]) if len(calls) == 1 else self._batched(calls))

    async def _single(self, op: str, args: tuple, kwargs: dict, fut: asyncio.Future) -> None:
        try:
            with seams.service_calls():  # the store's own outages are mapped in its process (the pool)
                result = await self.handle.call.remote(op, *args, **kwargs)
            _settle(fut, None, result)
        except Exception as e:
            _settle(fut, e, None)

    async def _batched(self, calls: list[tuple[str, tuple, dict, asyncio.Future]]) -> None:
        try:
            with seams.service_calls():
                out = await self.handle.batch.remote([(op, args, kwargs) for op, args, kwargs, _ in calls])
        except Exception as e:  # the request failed as a whole (a replica died): every call fails
            for *_, fut in calls:
                _settle(fut, e, None)
            return
        for (*_, fut), (error, value) in zip(calls, out):
            _settle(fut, None if error is None else seams.family(error), value)


def _settle(fut: asyncio.Future, error: BaseException | None, value: Any) -> None:
    if fut.done():  # its caller was cancelled meanwhile
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


class WebClient:
    """Search and page text through the web deployment (the guard and the parsers live there)."""

    def __init__(self, handle, settings: Settings):
        self.handle = handle
        self.settings = settings

    @property
    def configured(self) -> bool:
        return bool(self.settings.serper_api_key or self.settings.searxng_url)

    async def search(self, query: str) -> dict:
        return await self.handle.search.remote(query)

    async def fetch(self, url: str) -> dict:
        """The page (`url`, `text`, `extraktor`, `gekuerzt`, `weiterleitungen`; `ok` true), or why it
        could not be had (`ok` false, `fehler`): the web deployment raises `PageUnavailable` (a
        `ServiceError`, caught by its family) with its reason as `grund`, mapped here once."""
        try:
            return {**await self.handle.fetch.remote(url), "ok": True}
        except ServiceError as e:
            return {"url": url, "ok": False, "fehler": getattr(e, "grund", None) or type(e).__name__}


@dataclass
class Services:
    settings: Settings
    llm: LLMClient
    embedder: EmbedderClient
    store: StoreClient
    redis: Any
    prompts: PromptLibrary
    web: WebClient | None = None
    cache: dict = field(default_factory=dict)
    """What is the same for every pair these services serve (e.g. the memory configuration).
    Never a pair's data: the node deployment serves many pairs with one `Services`."""
    pair_caches: "OrderedDict[tuple[str, str], dict]" = field(default_factory=OrderedDict)
    zaun: tuple[str, str, str] | None = None
    """In a pair process: its registry entry, the fence of every commit it makes
    (`memory.session.commit_turn`); None where many pairs share the services."""

    PAIR_CACHES = 256
    """How many pairs' caches a shared node deployment keeps warm (least recently used go)."""

    def pair_cache(self, user_id: str, character_id: str) -> dict:
        """What one pair keeps warm across turns (e.g. its KZG vectors), apart from every other
        pair's: in a pair actor the only one, in the shared node deployment one of many."""
        key = (user_id, character_id)
        c = self.pair_caches.get(key)
        if c is None:
            c = self.pair_caches[key] = {}
            while len(self.pair_caches) > self.PAIR_CACHES:
                self.pair_caches.popitem(last=False)
        else:
            self.pair_caches.move_to_end(key)
        return c

    @property
    def memory_cfg(self):
        from memory.config import for_model

        cfg = self.cache.get("memory_cfg")
        if cfg is None:
            cfg = self.cache["memory_cfg"] = for_model(self.settings.embedding_model)
        return cfg

    @classmethod
    def connect(cls, settings: Settings) -> "Services":
        from ray import serve
        from memory.redis_client import verbinden

        def h(name):
            return transport(serve.get_deployment_handle(name, app_name=APP_NAME), settings)

        return cls(
            settings=settings,
            llm=LLMClient(h(LLM_DEPLOYMENT), settings),
            embedder=EmbedderClient(h(EMBEDDER_DEPLOYMENT)),
            store=StoreClient(h(STORE_DEPLOYMENT)),
            redis=verbinden(settings.redis_url, settings.redis_reconnect_s),
            prompts=PromptLibrary(),
            web=WebClient(h(WEB_DEPLOYMENT), settings),
        )


@dataclass
class Deps:
    """Per-turn dependencies of a node: the shared services plus this turn's trace and cache."""

    services: Services
    trace: TurnTrace

    @property
    def settings(self) -> Settings:
        return self.services.settings

    @property
    def llm(self) -> LLMClient:
        return self.services.llm

    @property
    def embedder(self) -> EmbedderClient:
        return self.services.embedder

    @property
    def store(self) -> StoreClient:
        return self.services.store

    @property
    def session(self) -> SessionStore | None:
        """The pair's conversation in Redis (None: these services have no Redis)."""
        return self._redis_client(SessionStore)

    @property
    def auftrag(self) -> AuftragStore | None:
        """The pair's pending order (None: no Redis)."""
        return self._redis_client(AuftragStore)

    @property
    def quoten(self) -> QuotenStore | None:
        """The agents' quota counters (None: no Redis)."""
        return self._redis_client(QuotenStore)

    @property
    def landschaft(self) -> LandschaftStore | None:
        """The landscape detail of the pair's last turn (None: no Redis)."""
        return self._redis_client(LandschaftStore)

    @property
    def kzg(self) -> KzgStore | None:
        """The pair's short-term memory (None: no Redis)."""
        return self._redis_client(KzgStore)

    @property
    def impulse(self) -> ImpulsStore | None:
        """Nova's impulses planned for later (None: no Redis)."""
        return self._redis_client(ImpulsStore)

    def _redis_client(self, cls):
        r = self.services.redis
        return None if r is None else cls(r)

    @property
    def prompts(self) -> PromptLibrary:
        return self.services.prompts
