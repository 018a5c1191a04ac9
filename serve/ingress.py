"""The HTTP ingress (FastAPI through `serve.ingress`): native turn API, OpenAI-compatible chat
completions, health, operator endpoints. It authenticates, validates, finds the pair's actor by
name and forwards; it never runs a node itself."""

import asyncio
import json
import logging
import time
import uuid
from collections import OrderedDict
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import ray
from fastapi import FastAPI, Header, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from ray import serve
from sse_starlette.sse import EventSourceResponse

from actors.pair import get_or_create_pair, pair_name
from core.names import INGRESS_DEPLOYMENT
from core.settings import Settings
from core.wire import (ErrorEvent, EventDropped, FinalEvent, PairEventRequest, PairTurnRequest, RestartEvent,
                       TokenEvent, TurnFailure, TurnResult, TurnStreamEvent)
from memory import session
from pipeline.figur import einsetzen
from pipeline.node_config import budget
from pipeline.services import transport
from prompts import PromptLibrary
from serve import charakterkarte, dashboard, dateien, erschliessung
from serve.body_limit import BodyLimit
from serve.direct_front import reuse_the_port
from serve.schemas import (ID_PATTERN, TURN_ID_PATTERN, Character, CharacterCreate, CharacterImportResponse,
                           CharacterPatch, ChatCompletionRequest, DateiListe, DateiUploadResponse, EventRequest,
                           HistoryResponse, KeyCreateRequest, KeyCreateResponse, KeyRevokeRequest, TurnRequest,
                           TurnResponse)

log = logging.getLogger("novaberg.ingress")

app = FastAPI(title="Novaberg", version="0.1.0",
              description="Talk to a character whose memory lives server-side, one actor per (user, character).")

_LIMITS = {"body": 1024 * 1024, "card": 8 * 1024 * 1024, "file": 10 * 1024 * 1024}
"""Set from the settings when a replica starts (the middleware is registered at import)."""


def _limit(path: str) -> int:
    """The body limit of a route: a card import and a file upload have their own."""
    if path.endswith("/characters/import"):
        return _LIMITS["card"]
    if path.endswith("/files"):
        return _LIMITS["file"]
    return _LIMITS["body"]


app.add_middleware(BodyLimit, limits=_limit)
reuse_the_port()  # in the ingress replica's process, before Serve starts its server (Settings.http_front)

_ACTOR_GONE = (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError, ray.exceptions.RayActorError)
_KEY_CACHE_S = 30.0
_CHARACTER_CACHE_S = 10.0
"""How long a replica trusts that a character exists; a removal reaches other replicas within it."""

T = TypeVar("T")

# admission and arrival in one round trip, atomically. KEYS: the user's leases, the pair's leases,
# the pair's arrival counter; ARGV: lease, now, lease_s, keep (s), the user's bound, the pair's
# bound, whether to draw an arrival number. Returns {admitted, user's count, pair's count, arrival}:
# a turn beyond a bound takes its lease back at once and draws no number.
_ZULASSEN = """
local now, lease_s, keep = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = {}
for i = 1, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - lease_s)
  redis.call('ZADD', KEYS[i], now, ARGV[1])
  n[i] = redis.call('ZCARD', KEYS[i])
  redis.call('EXPIRE', KEYS[i], keep)
end
if n[1] > tonumber(ARGV[5]) or n[2] > tonumber(ARGV[6]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {0, n[1], n[2], 0}
end
local seq = 0
if ARGV[7] == '1' then seq = redis.call('INCR', KEYS[3]) end
return {1, n[1], n[2], seq}
"""


@app.exception_handler(RequestValidationError)
async def _invalid(request: Request, exc: RequestValidationError):
    details = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
    # of the branches of a union, the one that says what is wrong rather than which type it expected
    first = next((d for d in details if d["msg"].startswith("Value error")), details[0] if details else
                 {"loc": [], "msg": "invalid request"})
    where = ".".join(str(x) for x in first["loc"] if x != "body") or "request"
    return JSONResponse(status_code=422, content={"error": {"type": "invalid_request",
                                                            "message": f"{where}: {first['msg']}",
                                                            "details": details}})


def _error(status: int, kind: str, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail={"type": kind, "message": message})


def turn_failed(failure: TurnFailure) -> dict:
    """The error body of a turn whose chain failed: which node, and whether the human's message
    is kept (then the same turn_id asks for the reply again, and his message is not stored twice)."""
    message = f"node {failure.node} failed: {failure.message}"
    if failure.message_kept:
        message += (f"; your message is kept: send it again with the same turn_id ({failure.turn_id}) "
                    "to ask for the reply")
    return {"type": "turn_failed", "message": message, "turn_id": failure.turn_id,
            "message_kept": failure.message_kept, "node": failure.node}


def turn_result(result: TurnResult | TurnFailure) -> TurnResult:
    """The turn's result; a failed turn answers 502 with `turn_failed`'s body."""
    if isinstance(result, TurnFailure):
        raise HTTPException(status_code=502, detail=turn_failed(result))
    return result


def _unknown_character(character_id: str) -> HTTPException:
    return _error(404, "unknown_character", f"no character {character_id!r}; GET /v1/characters lists the characters")


@app.exception_handler(HTTPException)
async def _http_error(request: Request, exc: HTTPException):
    detail = exc.detail if isinstance(exc.detail, dict) else {"type": "error", "message": str(exc.detail)}
    return JSONResponse(status_code=exc.status_code, content={"error": detail}, headers=exc.headers)


@serve.deployment(name=INGRESS_DEPLOYMENT)
@serve.ingress(app)
class Ingress:
    def __init__(self, settings: dict, store, llm, embedder, web=None, nodes=None, *, hintergrund: bool = False):
        self.settings = Settings(**settings)
        if hintergrund:  # deployed by Serve config: no `novaberg up` makes the workers and the pixie
            from actors.pixie import start_pixie
            from actors.worker import start_workers

            start_workers(self.settings)
            start_pixie(self.settings)
        self.store, self.llm, self.embedder = (transport(h, self.settings) for h in (store, llm, embedder))
        self._pairs: dict[str, Any] = {}
        self._keys: OrderedDict[str, tuple[float, dict | None]] = OrderedDict()
        self._characters: dict[str, float] = {}
        self._streams: dict[str, int] = {}
        """Open event streams per user on this replica."""
        _LIMITS.update(body=self.settings.max_body_bytes, card=self.settings.character_card_max_bytes,
                       file=self.settings.file_max_bytes)
        self._redis = None
        self._zulassen = None
        self._dashboard = dashboard.DashboardLoop(
            store, self._redis_client, dashboard.LoadSampler(llm, embedder),
            interval_s=self.settings.dashboard_sample_s, window_s=self.settings.dashboard_window_s)
        try:  # the gauges are published from the start when the replica has its loop already
            self._dashboard.ensure()
        except RuntimeError:
            pass  # no running loop yet: the first dashboard request starts it

    # ------------------------------------------------------------------ auth
    async def _principal(self, authorization: str | None) -> dict:
        if not authorization or not authorization.lower().startswith("bearer "):
            raise _error(401, "unauthorized", "missing bearer API key")
        key = authorization.split(None, 1)[1].strip()
        now = time.monotonic()
        hit = self._keys.get(key)
        if hit is None or now - hit[0] > _KEY_CACHE_S:
            hit = (now, await self.store.lookup_api_key.remote(key))
            self._keys[key] = hit
            while len(self._keys) > self.settings.key_cache_size:  # refused strings too: bounded
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(key)
        if hit[1] is None:
            raise _error(401, "unauthorized", "unknown or revoked API key")
        return hit[1]

    def _owner(self, principal: dict, user_id: str) -> None:
        if principal["is_operator"]:
            return
        if principal["user_id"] != user_id:
            raise _error(403, "forbidden", "this API key does not reach that user's pairs")

    def _validate_text(self, text: str) -> str:
        if not text.strip():
            raise _error(422, "invalid_request", "text: must not be empty")
        if len(text) > self.settings.max_text_chars:
            raise _error(422, "invalid_request",
                         f"text: longer than {self.settings.max_text_chars} characters ({len(text)})")
        return text

    async def _redis_client(self):
        if self._redis is None:
            from redis.asyncio import Redis

            self._redis = Redis.from_url(self.settings.redis_url)
        return self._redis

    @staticmethod
    def _inflight_keys(user_id: str, character_id: str) -> tuple[str, str]:
        # sorted sets of leases; not the counters (strings) the names `inflight:*` held before
        return f"inflight:leases:user:{user_id}", f"inflight:leases:pair:{user_id}:{character_id}"

    async def _admit(self, user_id: str, character_id: str, ankunft: bool = False) -> tuple[str, int | None]:
        """Count a turn against its user's and its pair's bounds (across ingress replicas, in
        Redis); beyond either: 429 with Retry-After. Returns the turn's lease, which `_release`
        gives back, and with `ankunft` the turn's arrival number for its pair (the same sequence
        across ingress replicas; drawn only when the turn is admitted). Each bound is a sorted set
        of leases scored by their start: a lease that was never given back (its replica died, or
        Redis was down at the release) expires after `admission_lease_s` on its own, however often
        the user calls again meanwhile. One round trip: `_ZULASSEN` does all of it at once."""
        r = await self._redis_client()
        if self._zulassen is None:
            self._zulassen = r.register_script(_ZULASSEN)
        s = self.settings
        lease = uuid.uuid4().hex
        user_key, pair_key = self._inflight_keys(user_id, character_id)
        ok, u, q, seq = await self._zulassen(
            keys=[user_key, pair_key, f"pair:seq:{user_id}:{character_id}"],
            args=[lease, repr(time.time()), repr(float(s.admission_lease_s)), int(s.admission_lease_s) + 1,
                  s.max_turns_in_flight_per_user, s.max_turns_queued_per_pair, int(ankunft)])
        if not ok:
            what = (f"user {user_id} has {s.max_turns_in_flight_per_user} turns in flight"
                    if u > s.max_turns_in_flight_per_user else
                    f"pair {user_id}/{character_id} has {s.max_turns_queued_per_pair} turns waiting")
            raise HTTPException(429, detail={"type": "limit", "message": f"{what}; try again shortly"},
                                headers={"Retry-After": "2"})
        return lease, (int(seq) if ankunft else None)

    async def _release(self, user_id: str, character_id: str, lease: str) -> None:
        r = await self._redis_client()
        async with r.pipeline(transaction=False) as p:
            for key in self._inflight_keys(user_id, character_id):
                p.zrem(key, lease)
            await p.execute()

    @asynccontextmanager
    async def _admitted(self, user_id: str, character_id: str, ankunft: bool = False):
        lease, seq = await self._admit(user_id, character_id, ankunft)
        try:
            yield seq
        finally:
            await self._release(user_id, character_id, lease)

    async def _known_character(self, character_id: str) -> None:
        """404 for a character that does not exist, before any pair actor is made for it."""
        now = time.monotonic()
        seen = self._characters.get(character_id)
        if seen is not None and now - seen < _CHARACTER_CACHE_S:
            return
        if await self.store.call.remote("charaktere.exists", character_id):
            if len(self._characters) > 10_000:
                self._characters.clear()
            self._characters[character_id] = now
            return
        self._characters.pop(character_id, None)
        raise _unknown_character(character_id)

    # ------------------------------------------------------------------ pair actors
    def _pair(self, user_id: str, character_id: str):
        k = f"{user_id}\x00{character_id}"
        h = self._pairs.get(k)
        if h is None:
            if len(self._pairs) > 10_000:
                self._pairs.clear()
            h = get_or_create_pair(user_id, character_id, self.settings)
            self._pairs[k] = h
        return h

    async def _live_pair(self, user_id: str, character_id: str):
        """The pair's actor when one is alive, else None; never creates one."""
        h = self._pairs.get(f"{user_id}\x00{character_id}")
        if h is not None:
            return h
        try:
            return await asyncio.to_thread(ray.get_actor, pair_name(user_id, character_id),
                                           namespace=self.settings.namespace)
        except ValueError:
            return None

    def _forget(self, user_id: str, character_id: str) -> None:
        self._pairs.pop(f"{user_id}\x00{character_id}", None)

    async def _call(self, user_id: str, character_id: str, send: Callable[[Any], Awaitable[T]]) -> T:
        """Call the pair's actor: `send` calls one of its methods on the handle, e.g.
        `lambda h: h.turn.remote(request)` (`actors.pair.PairActor.turn`). When the actor is gone
        (evicted or crashed), drop the handle and retry. Retrying a turn is safe: the turn_id was
        fixed before the first attempt."""
        last: Exception | None = None
        for attempt in range(4):
            h = self._pair(user_id, character_id)
            try:
                return await send(h)
            except _ACTOR_GONE as e:
                last = e
                self._forget(user_id, character_id)
                log.warning("ingress: pair %s:%s actor gone during a call (attempt %d): retrying", user_id,
                            character_id, attempt + 1)
                await asyncio.sleep(0.2 * (attempt + 1))
        raise _error(503, "unavailable", f"pair actor unavailable: {type(last).__name__}")

    async def _stream(self, user_id: str, character_id: str,
                      request: PairTurnRequest) -> AsyncIterator[TurnStreamEvent]:
        """The turn's events from `actors.pair.PairActor.turn_stream`. When the actor dies on the
        way, the turn runs again (after a `restart` event once events were sent); when it stays
        gone, an `error` event ends the stream."""
        for attempt in range(4):
            h = self._pair(user_id, character_id)
            started = False
            try:
                gen = h.turn_stream.options(num_returns="streaming").remote(request)
                async for ref in gen:
                    ev = await ref
                    started = True
                    yield ev
                return
            except _ACTOR_GONE:
                self._forget(user_id, character_id)
                log.warning("ingress: pair %s:%s actor gone while streaming (attempt %d)", user_id,
                            character_id, attempt + 1)
                if started:
                    yield RestartEvent(reason="pair actor restarted; the turn runs again")
                await asyncio.sleep(0.2 * (attempt + 1))
        yield ErrorEvent(failure=TurnFailure(node=None, message="pair actor unavailable"))

    # ------------------------------------------------------------------ native API
    @app.get("/healthz")
    async def healthz(self) -> dict:
        await self.store.ready.remote()
        await (await self._redis_client()).ping()
        return {"status": "ok"}

    @app.post("/v1/pairs/{user_id}/{character_id}/turns", response_model=TurnResponse)
    async def post_turn(self, body: TurnRequest, user_id: str = Path(pattern=ID_PATTERN),
                        character_id: str = Path(pattern=ID_PATTERN), stream: bool = Query(False),
                        authorization: str | None = Header(None)):
        principal = await self._principal(authorization)
        self._owner(principal, user_id)
        text, turn_id = self._validate_text(body.text), body.turn_id or uuid.uuid4().hex
        await self._known_character(character_id)
        if not stream:
            async with self._admitted(user_id, character_id, ankunft=True) as seq:
                request = PairTurnRequest(text=text, turn_id=turn_id, seq=seq)
                result = await self._call(user_id, character_id, lambda h: h.turn.remote(request))
            return turn_result(result).body()
        lease, seq = await self._admit(user_id, character_id, ankunft=True)  # held until the stream ends
        request = PairTurnRequest(text=text, turn_id=turn_id, seq=seq)

        async def events():
            try:
                async for ev in self._stream(user_id, character_id, request):
                    if isinstance(ev, ErrorEvent):  # the same body as a plain request's 502
                        data = {"error": turn_failed(ev.failure)}
                    elif isinstance(ev, FinalEvent):
                        data = ev.result.body()
                    else:
                        data = ev.model_dump(exclude={"event"})
                    yield {"event": ev.event, "data": json.dumps(data)}
            finally:
                await self._release(user_id, character_id, lease)

        return EventSourceResponse(events())

    @app.get("/v1/pairs/{user_id}/{character_id}/turns", response_model=HistoryResponse)
    async def get_history(self, user_id: str = Path(pattern=ID_PATTERN),
                          character_id: str = Path(pattern=ID_PATTERN), limit: int = Query(50, ge=1, le=500),
                          authorization: str | None = Header(None)):
        principal = await self._principal(authorization)
        self._owner(principal, user_id)
        await self._known_character(character_id)
        # from the session store: reading the history never makes (or wakes) a pair actor
        turns = await session.load_turns(await self._redis_client(), user_id, character_id, limit)
        return {"user_id": user_id, "character_id": character_id, "turns": turns}

    @app.get("/v1/pairs/{user_id}/{character_id}/events")
    async def get_events(self, request: Request, user_id: str = Path(pattern=ID_PATTERN),
                         character_id: str = Path(pattern=ID_PATTERN),
                         after: str | None = Query(None, max_length=30),
                         last_event_id: str | None = Header(None, max_length=30),
                         authorization: str | None = Header(None)):
        """Server-sent events: every message Nova produces without being asked (the Thinker's
        retry, a planned impulse, a `continue`), once it is committed. The cursor (`Last-Event-ID`
        or `?after=`; `0` = every kept message) resumes where a client left; none = only new ones."""
        principal = await self._principal(authorization)
        self._owner(principal, user_id)
        await self._known_character(character_id)
        r = await self._redis_client()
        cursor = last_event_id or after
        if cursor is not None and not session.CURSOR.match(cursor):
            raise _error(422, "invalid_request", f"invalid cursor {cursor!r}: expected 0 or an event id "
                                                 "such as 1733011200000-0")
        if self._streams.get(user_id, 0) >= self.settings.max_event_streams_per_user:
            raise HTTPException(status_code=429, headers={"Retry-After": "5"}, detail={
                "type": "limit", "message": f"at most {self.settings.max_event_streams_per_user} open event streams "
                                           "per user"})
        cursor = cursor or await session.push_cursor_now(r, user_id, character_id)
        self._streams[user_id] = self._streams.get(user_id, 0) + 1

        async def events():
            nonlocal cursor
            try:
                yield {"event": "bereit", "id": cursor, "data": json.dumps({"cursor": cursor})}
                quiet_since = time.monotonic()
                while not await request.is_disconnected():  # a client that left frees its place at once
                    # each wait stays below the Redis client's socket timeout (5 s)
                    got = await session.read_pushed(r, user_id, character_id, cursor, block_ms=session.PUSH_WAIT_MS)
                    if not got and time.monotonic() - quiet_since >= self.settings.events_block_s:
                        yield {"comment": "keep-alive"}
                        quiet_since = time.monotonic()
                    for mid, message in got:
                        cursor, quiet_since = mid, time.monotonic()
                        yield {"event": "nachricht", "id": mid, "data": json.dumps(message)}
            finally:
                self._streams[user_id] -= 1

        return EventSourceResponse(events())

    @app.get("/v1/pairs/{user_id}/{character_id}/status")
    async def get_status(self, user_id: str = Path(pattern=ID_PATTERN),
                         character_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
        principal = await self._principal(authorization)
        self._owner(principal, user_id)
        await self._known_character(character_id)
        h = await self._live_pair(user_id, character_id)
        if h is not None:
            try:
                return {**await h.status.remote(), "live": True}
            except _ACTOR_GONE:
                self._forget(user_id, character_id)
        # no actor: the pair is idle (or new); the answer comes from the stores and makes none
        turns = await session.count_turns(await self._redis_client(), user_id, character_id)
        return {"user_id": user_id, "character_id": character_id, "live": False, "busy": False, "inflight": 0,
                "session_turns": turns}

    # ------------------------------------------------------------------ OpenAI-compatible
    @app.post("/v1/chat/completions")
    async def chat_completions(self, body: ChatCompletionRequest, authorization: str | None = Header(None),
                               x_turn_id: str | None = Header(None, pattern=TURN_ID_PATTERN)):
        principal = await self._principal(authorization)
        user_id = body.user or principal["user_id"]
        if user_id is None:
            raise _error(422, "invalid_request", "user: an operator key must name the user")
        self._owner(principal, user_id)
        last = next((m for m in reversed(body.messages) if m.role == "user"), None)
        if last is None:
            raise _error(422, "invalid_request", "messages: no user message (the history lives server-side)")
        text = last.content if isinstance(last.content, str) else "".join(p.text for p in (last.content or []))
        text, turn_id = self._validate_text(text or ""), x_turn_id or uuid.uuid4().hex
        character_id = body.model
        await self._known_character(character_id)
        cid = f"chatcmpl-{turn_id}"
        created = int(time.time())
        if not body.stream:
            async with self._admitted(user_id, character_id, ankunft=True) as seq:
                request = PairTurnRequest(text=text, turn_id=turn_id, seq=seq)
                result = await self._call(user_id, character_id, lambda h: h.turn.remote(request))
            result = turn_result(result)
            u = result.usage
            return {"id": cid, "object": "chat.completion", "created": created, "model": character_id,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": result.reply}}],
                    "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                              "total_tokens": u.prompt_tokens + u.completion_tokens},
                    "novaberg": {"turn_id": result.turn_id, "replayed": result.replayed}}

        include_usage = bool((body.stream_options or {}).get("include_usage"))
        lease, seq = await self._admit(user_id, character_id, ankunft=True)  # held until the stream ends
        request = PairTurnRequest(text=text, turn_id=turn_id, seq=seq)

        def sse(obj: dict) -> str:
            return f"data: {json.dumps(obj)}\n\n"

        async def chunks():
            try:
                async for part in _chunks():
                    yield part
            finally:
                await self._release(user_id, character_id, lease)

        async def _chunks():
            base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": character_id}
            yield sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                            "finish_reason": None}]})
            # only text that passed review: the draft events are left out (an OpenAI client has no
            # way to take back content it was sent), the kept reply comes as one `token` event
            async for ev in self._stream(user_id, character_id, request):
                if isinstance(ev, TokenEvent):
                    yield sse({**base, "choices": [{"index": 0, "delta": {"content": ev.text},
                                                    "finish_reason": None}]})
                elif isinstance(ev, FinalEvent):
                    yield sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                    if include_usage:
                        u = ev.result.usage
                        yield sse({**base, "choices": [], "usage": {
                            "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                            "total_tokens": u.prompt_tokens + u.completion_tokens}})
                elif isinstance(ev, ErrorEvent):
                    yield sse({"error": turn_failed(ev.failure)})
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    # ------------------------------------------------------------------ operators
    async def _operator(self, authorization: str | None) -> dict:
        principal = await self._principal(authorization)
        if not principal["is_operator"]:
            raise _error(403, "forbidden", "operator key required")
        return principal

    @app.post("/v1/operator/keys", response_model=KeyCreateResponse)
    async def create_key(self, body: KeyCreateRequest, authorization: str | None = Header(None)):
        await self._operator(authorization)
        key = await self.store.create_api_key.remote(body.user_id, False, body.label)
        return {"user_id": body.user_id, "api_key": key}

    @app.post("/v1/operator/keys/revoke")
    async def revoke_keys(self, body: KeyRevokeRequest, authorization: str | None = Header(None)):
        """Revoke one key, or every key of a user. This replica forgets them at once; every
        other replica within its key cache time (30 s)."""
        await self._operator(authorization)
        if (body.api_key is None) == (body.user_id is None):
            raise _error(422, "invalid_request", "exactly one of api_key / user_id must be set")
        n = await self.store.call.remote("pg.revoke_api_keys", body.api_key, body.user_id)
        if not n:
            raise _error(404, "not_found", "no such active key")
        if body.api_key:
            self._keys.pop(body.api_key, None)
        else:
            for k in [k for k, (_, p) in self._keys.items() if p and p.get("user_id") == body.user_id]:
                del self._keys[k]
        log.info("ingress: %d API key(s) revoked (%s)", n, "one key" if body.api_key else f"user {body.user_id}")
        return {"revoked": n}

    @app.post("/v1/pairs/{user_id}/{character_id}/events")
    async def post_event(self, body: EventRequest, user_id: str = Path(pattern=ID_PATTERN),
                         character_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
        """Operators: let Nova open from her own thought, or continue, on the pair's event queue."""
        await self._operator(authorization)
        if (body.eigener_gedanke is None) == (body.user_prompt is None):
            raise _error(422, "invalid_request", "exactly one of eigener_gedanke / user_prompt must be set")
        await self._known_character(character_id)
        event = PairEventRequest.model_validate(body.model_dump())
        async with self._admitted(user_id, character_id):
            result = await self._call(user_id, character_id, lambda h: h.event.remote(event))
        if isinstance(result, EventDropped) and result.reason == "pending_agent":
            raise _error(409, "pending_agent", "event dropped: an order waits for the human's answer (pending_agent)")
        if isinstance(result, EventDropped):
            raise _error(429, "limit", f"event dropped: {result.reason} (counter {result.counter})")
        return turn_result(result).body()

    # ------------------------------------------------------------------ characters
    async def _character_or_404(self, character_id: str) -> dict:
        ch = await self.store.call.remote("charaktere.get", character_id)
        if ch is None:
            self._characters.pop(character_id, None)
            raise _unknown_character(character_id)
        return ch

    @app.get("/v1/characters")
    async def list_characters(self, authorization: str | None = Header(None)):
        """Every character (any key may list them)."""
        await self._principal(authorization)
        return {"characters": await self.store.call.remote("charaktere.list_all")}

    @app.post("/v1/characters", status_code=201, response_model=Character)
    async def create_character(self, body: CharacterCreate, authorization: str | None = Header(None)):
        await self._operator(authorization)
        fields = body.model_dump(exclude={"character_id"}, exclude_none=True)
        ch = await self.store.create_character.remote(body.character_id, fields, [])
        if ch is None:
            raise _error(409, "conflict", f"character {body.character_id!r} exists; "
                                          f"PATCH /v1/characters/{body.character_id} changes it")
        self._characters[body.character_id] = time.monotonic()
        log.info("ingress: character %s (%s) created", body.character_id, body.name)
        return ch

    @app.post("/v1/characters/import", status_code=201, response_model=CharacterImportResponse)
    async def import_character(self, request: Request,
                               character_id: str | None = Query(None, pattern=ID_PATTERN),
                               replace: bool = Query(False), authorization: str | None = Header(None)):
        """A Character Card (V1/V2/V3, JSON or PNG) as the raw body becomes a character; its
        lorebook becomes her background knowledge. The answer says what went where and what was
        kept without a place."""
        await self._operator(authorization)
        data = await request.body()  # its size is bounded by the BodyLimit middleware (the card limit)
        if not data:
            raise _error(422, "invalid_card", "empty body: send the card as JSON or PNG")
        try:
            card = await asyncio.to_thread(charakterkarte.lesen, data)
            cid = character_id or charakterkarte.character_id_aus(card.felder["name"])
        except charakterkarte.KarteFehler as e:
            raise _error(422, "invalid_card", str(e))
        ch = await self.store.create_character.remote(cid, {**card.felder, "karte_rest": card.karte_rest},
                                                      [w.model_dump() for w in card.wissen], replace)
        if ch is None:
            raise _error(409, "conflict", f"character {cid!r} exists; pass replace=true to overwrite it, "
                                          "or character_id=... for another id")
        self._characters[cid] = time.monotonic()
        log.info("ingress: character %s imported from a %s card (%s): %d knowledge entries; kept without a place: %s",
                 cid, card.quelle, card.format, len(card.wissen), card.nicht_uebernommen or "nothing")
        return {"character": ch, "format": card.format, "quelle": card.quelle, "abbildung": card.abbildung,
                "nicht_uebernommen": card.nicht_uebernommen, "wissen_eintraege": len(card.wissen)}

    @app.get("/v1/characters/{character_id}", response_model=Character)
    async def get_character(self, character_id: str = Path(pattern=ID_PATTERN),
                            authorization: str | None = Header(None)):
        await self._principal(authorization)
        return await self._character_or_404(character_id)

    @app.patch("/v1/characters/{character_id}", response_model=Character)
    async def patch_character(self, body: CharacterPatch, character_id: str = Path(pattern=ID_PATTERN),
                              authorization: str | None = Header(None)):
        await self._operator(authorization)
        fields = body.model_dump(exclude_none=True)
        if not fields:
            raise _error(422, "invalid_request", "no field to change")
        ch = await self.store.call.remote("charaktere.update", character_id, fields)
        if ch is None:
            raise _unknown_character(character_id)
        return ch

    @app.delete("/v1/characters/{character_id}", status_code=204)
    async def delete_character(self, character_id: str = Path(pattern=ID_PATTERN),
                               authorization: str | None = Header(None)):
        """Remove a character and her background knowledge; the pairs' own memories stay."""
        await self._operator(authorization)
        self._characters.pop(character_id, None)
        if not await self.store.call.remote("charaktere.delete", character_id):
            raise _unknown_character(character_id)
        log.info("ingress: character %s removed", character_id)
        return Response(status_code=204)

    @app.get("/v1/characters/{character_id}/export")
    async def export_character(self, character_id: str = Path(pattern=ID_PATTERN),
                               authorization: str | None = Header(None)):
        """The character as a Character Card V2 (JSON)."""
        await self._principal(authorization)
        ch = await self._character_or_404(character_id)
        wissen = await self.store.call.remote("charaktere.wissen", character_id)
        return charakterkarte.exportieren(ch, wissen)

    @app.get("/v1/pairs/{user_id}/{character_id}/greeting")
    async def greeting(self, user_id: str = Path(pattern=ID_PATTERN), character_id: str = Path(pattern=ID_PATTERN),
                       authorization: str | None = Header(None)):
        """The character's greeting. For a pair without any turn it becomes the first message of
        the conversation (stored once), so the character remembers having said it."""
        principal = await self._principal(authorization)
        self._owner(principal, user_id)
        ch = await self._character_or_404(character_id)
        text = einsetzen(ch["begruessung"], ch["name"], "du").strip()
        out = {"user_id": user_id, "character_id": character_id, "name": ch["name"], "begruessung": text or None,
               "neu_im_verlauf": False}
        if text:
            turn = {"rolle": "assistant", "sprecher": ch["name"], "inhalt": text, "turn_id": "begruessung",
                    "herkunft": "begruessung", "time": datetime.now(timezone.utc).isoformat()}
            out["neu_im_verlauf"] = await session.begruessen(await self._redis_client(), user_id, character_id, turn)
        return out

    # ------------------------------------------------------------------ files
    def _werkzeuge(self) -> erschliessung.Werkzeuge:
        """Indexing's calls through this replica's handles."""
        s = self.settings
        return erschliessung.Werkzeuge(
            chat=self.llm.chat.remote, model_name=self.llm.model_name.remote, embed=self.embedder.embed.remote,
            store=self.store.call.remote, prompts=PromptLibrary(), deadline_s=s.file_index_deadline_s,
            max_tokens=budget("erschliessung", s))

    @app.post("/v1/pairs/{user_id}/{character_id}/files", status_code=201, response_model=DateiUploadResponse)
    async def upload_file(self, request: Request, response: Response, user_id: str = Path(pattern=ID_PATTERN),
                          character_id: str = Path(pattern=ID_PATTERN), name: str | None = Query(None, max_length=1000),
                          content_type: str | None = Header(None), authorization: str | None = Header(None)):
        """A file (plain text, Markdown or PDF) as the raw body joins the pair's file index: read,
        its topic, summary and keywords written once, its chunks embedded. The same content again
        answers 200 with the stored file (`neu: false`) and indexes nothing."""
        principal = await self._principal(authorization)
        self._owner(principal, user_id)
        await self._known_character(character_id)
        data = await request.body()  # its size is bounded by the BodyLimit middleware (the file limit)
        try:
            dok = await asyncio.to_thread(dateien.lesen, data, content_type, name, self.settings.file_max_chars)
        except dateien.DateiFehler as e:
            raise _error(e.status, e.typ, str(e))
        async with self._admitted(user_id, character_id):
            out = await erschliessung.indizieren(self._werkzeuge(), dok, user_id, character_id)
        if not out["neu"]:
            response.status_code = 200
        return out

    @app.get("/v1/pairs/{user_id}/{character_id}/files", response_model=DateiListe)
    async def list_files(self, user_id: str = Path(pattern=ID_PATTERN), character_id: str = Path(pattern=ID_PATTERN),
                         authorization: str | None = Header(None)):
        """The pair's files, newest first."""
        principal = await self._principal(authorization)
        self._owner(principal, user_id)
        await self._known_character(character_id)
        return {"user_id": user_id, "character_id": character_id,
                "dateien": await self.store.call.remote("dateien.liste", user_id, character_id)}

    @app.delete("/v1/pairs/{user_id}/{character_id}/files/{datei_id}", status_code=204)
    async def delete_file(self, user_id: str = Path(pattern=ID_PATTERN), character_id: str = Path(pattern=ID_PATTERN),
                          datei_id: int = Path(ge=1, le=2**63 - 1), authorization: str | None = Header(None)):
        """Remove one of the pair's files with its chunks."""
        principal = await self._principal(authorization)
        self._owner(principal, user_id)
        await self._known_character(character_id)
        if not await self.store.call.remote("dateien.loeschen", user_id, character_id, datei_id):
            raise _error(404, "not_found", f"no file {datei_id} for {user_id}/{character_id}; "
                                           f"GET /v1/pairs/{user_id}/{character_id}/files lists them")
        log.info("ingress: file %d of %s:%s removed", datei_id, user_id, character_id)
        return Response(status_code=204)

    @app.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
    async def dashboard_page(self):
        """The operators' page. It carries no data: it reads the JSON endpoints with the operator
        key from its URL fragment (never sent to the server): /dashboard#key=..."""
        self._dashboard.ensure()
        return HTMLResponse(dashboard.page())

    @app.get("/v1/operator/dashboard")
    async def dashboard_json(self, window_s: float = Query(default=900.0, gt=0, le=7 * 24 * 3600),
                             authorization: str | None = Header(None)):
        """The dashboard's figures over the last `window_s` seconds."""
        await self._operator(authorization)
        self._dashboard.ensure()
        if not self._dashboard.sampler.samples:
            await self._dashboard.sampler.sample()
        return await dashboard.snapshot(self.store, await self._redis_client(), self._dashboard.sampler, window_s)

    @app.get("/v1/operator/pairs/{user_id}/{character_id}/turns")
    async def dashboard_pair(self, user_id: str = Path(pattern=ID_PATTERN), character_id: str = Path(pattern=ID_PATTERN),
                             limit: int = Query(default=10, ge=1, le=100), authorization: str | None = Header(None)):
        """One pair's last turns with each node's duration and decisions."""
        await self._operator(authorization)
        turns = await self.store.call.remote("dashboard.pair_turns", user_id, character_id, limit)
        return {"user_id": user_id, "character_id": character_id, "turns": turns}

    @app.get("/v1/operator/status")
    async def operator_status(self, authorization: str | None = Header(None)):
        await self._operator(authorization)
        from memory import outbox

        r = await self._redis_client()
        live = await r.hlen("pairs:live")
        return {"live_pairs": live, "outbox": await outbox.backlog(r),
                "llm": await self.llm.load.remote(), "embedder": await self.embedder.load.remote()}
