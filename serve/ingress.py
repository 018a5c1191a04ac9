"""The HTTP ingress (FastAPI through `serve.ingress`): the app, its error handlers and body limits,
and the `Ingress` deployment, which holds what the routes share: it authenticates, admits a turn
against its bounds, finds the pair's actor by name and forwards; it never runs a node itself.

The routes live in `serve/routes/`, one router per resource (turns, characters, files, OpenAI,
operator); they reach the replica's `Ingress` through `serve.routes.common.ingress`."""

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray import serve
from ray.actor import ActorHandle
from ray.serve.handle import DeploymentHandle

from actors import activation, registry
from actors.registry import pair_name
from core.bestand import Charakter
from core.names import INGRESS_DEPLOYMENT
from core.settings import OPENAI_MESSAGES_CEILING, Settings
from core.wire import ErrorEvent, PairTurnRequest, RestartEvent, TurnFailure, TurnResult, TurnStreamEvent
from memory import erasure, schluessel_index
from memory.clients import StoreOps
from memory.redis_client import StoreRedis
from pipeline.services import StoreClient, transport
from serve import dashboard
from serve.auth_limit import AuthFailureLimit
from serve.body_budget import BodyBudget
from serve.body_limit import BodyLimit
from serve.direct_front import reuse_the_port
from serve.store_away import StoreAway
from serve.routes import characters, common, files, openai, operator, turns, users
from serve.routes.common import ACTOR_GONE, error, turn_failed, unknown_character  # noqa: F401 (turn_failed)

log = logging.getLogger("novaberg.ingress")

app = FastAPI(title="Novaberg", version="0.1.0",
              description="Talk to a character whose memory lives server-side, one actor per (user, character).")

_LIMITS = {"body": 1024 * 1024, "card": 8 * 1024 * 1024, "file": 10 * 1024 * 1024, "auth_failures": 60,
           "auth_failures_address": 600, "body_bytes_key": 32 * 1024 * 1024, "body_bytes_address": 256 * 1024 * 1024}
"""Set from the settings when a replica starts (the middleware is registered at import)."""


def _limit(path: str) -> int:
    """The body limit of a route: a card import and a file upload have their own."""
    if path.endswith("/characters/import"):
        return _LIMITS["card"]
    if path.endswith("/files"):
        return _LIMITS["file"]
    return _LIMITS["body"]


app.add_middleware(BodyLimit, limits=_limit)
app.add_middleware(BodyBudget, budgets=lambda: (_LIMITS["body_bytes_key"], _LIMITS["body_bytes_address"]))


def set_limits(settings: Settings) -> None:
    """The middleware's limits from the settings, set once a replica starts."""
    _LIMITS.update(body=settings.max_body_bytes, card=settings.character_card_max_bytes, file=settings.file_max_bytes,
                   auth_failures=settings.auth_failures_per_minute,
                   auth_failures_address=settings.auth_failures_per_address_per_minute,
                   body_bytes_key=settings.body_bytes_per_key_per_minute,
                   body_bytes_address=settings.body_bytes_per_address_per_minute)


def _auth_failures() -> int:
    """Failed authentications one address may have a minute with one presented key."""
    return _LIMITS["auth_failures"]


def _auth_failures_address() -> int:
    """Failed authentications one address may have a minute over all keys."""
    return _LIMITS["auth_failures_address"]


def _key_known(key: str) -> bool | None:
    """What this replica's key cache holds of a key, without a lookup (`Ingress.key_known`)."""
    return None if common._running is None else common._running.key_known(key)


app.add_middleware(AuthFailureLimit, per_minute=_auth_failures, per_address=_auth_failures_address, known=_key_known)
app.add_middleware(StoreAway)  # outermost of ours: a store away anywhere beneath answers 503
reuse_the_port()  # in the ingress replica's process, before Serve starts its server (Settings.http_front)

_KEY_CACHE_S = 30.0
_CHARACTER_CACHE_S = 10.0
"""How long a replica trusts that a character exists; a removal reaches other replicas within it."""

T = TypeVar("T")

# admission and arrival in one round trip, atomically. KEYS: the user's leases, the pair's leases,
# the pair's arrival counter, the user's pairs (memory/schluessel_index.py); ARGV: lease, now,
# lease_s, keep (s), the user's bound, the pair's bound, whether to draw an arrival number, the
# character. Returns {admitted, user's count, pair's count, arrival}:
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
redis.call('SADD', KEYS[4], ARGV[8])
if ARGV[7] == '1' then seq = redis.call('INCR', KEYS[3]) end
return {1, n[1], n[2], seq}
"""


@app.exception_handler(RequestValidationError)
async def _invalid(request: Request, exc: RequestValidationError):
    if any(e.get("type") == "too_long" and tuple(e.get("loc", ()))[-1:] == ("messages",) for e in exc.errors()):
        return JSONResponse(status_code=413, content={"error": {"type": "too_large", "message": (
            f"messages: more than {OPENAI_MESSAGES_CEILING}; the history lives server-side: send the latest part "
            "of the conversation")}})
    details = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
    # of the branches of a union, the one that says what is wrong rather than which type it expected
    first = next((d for d in details if d["msg"].startswith("Value error")), details[0] if details else
                 {"loc": [], "msg": "invalid request"})
    where = ".".join(str(x) for x in first["loc"] if x != "body") or "request"
    return JSONResponse(status_code=422, content={"error": {"type": "invalid_request",
                                                            "message": f"{where}: {first['msg']}",
                                                            "details": details}})


@app.exception_handler(HTTPException)
async def _http_error(request: Request, exc: HTTPException):
    detail = exc.detail if isinstance(exc.detail, dict) else {"type": "error", "message": str(exc.detail)}
    return JSONResponse(status_code=exc.status_code, content={"error": detail}, headers=exc.headers)


# before `serve.ingress(app)` below: it freezes the app as it is then
for _routes in (common, turns, openai, operator, characters, files, users):
    app.include_router(_routes.router)


@serve.deployment(name=INGRESS_DEPLOYMENT)
@serve.ingress(app)
class Ingress:
    """The replica's shared state and calls; the routes use it as `serve.ports.IngressPort`."""

    settings: Settings
    store: DeploymentHandle
    llm: DeploymentHandle
    embedder: DeploymentHandle
    store_ops: StoreOps
    streams: dict[str, int]
    dashboard_loop: dashboard.DashboardLoop

    def __init__(self, settings: Settings, store, llm, embedder, web=None, nodes=None, *, hintergrund: bool = False):
        self.settings = settings
        if hintergrund:  # deployed by Serve config: no `novaberg up` makes the workers and the pixie
            from actors.pixie import start_pixie
            from actors.worker import start_workers

            start_workers(self.settings)
            start_pixie(self.settings)
        self.store, self.llm, self.embedder = (transport(h, self.settings) for h in (store, llm, embedder))
        self.store_ops = StoreClient(self.store)
        """The store's typed operations (memory/clients.py) over the store deployment."""
        self._pairs: dict[str, Any] = {}
        self._keys: OrderedDict[str, tuple[float, dict | None]] = OrderedDict()
        self._owned: set[asyncio.Task] = set()
        """Turns that hold their admission lease until the pair actor has finished them."""
        self._refused: OrderedDict[str, tuple[float, dict | None]] = OrderedDict()
        """Refused key strings, cached apart: random keys cannot evict the valid ones."""
        self._characters: dict[str, float] = {}
        self._revocation: tuple[float, Any] = (float("-inf"), None)
        """When this replica last read the revocation counter (`erasure.REVOCATION_KEY`), and what it read."""
        self.streams: dict[str, int] = {}
        """Open event streams per user on this replica."""
        # through the module itself: Serve carries this class to the replica by value, and a name
        # of the module written here would be a copy of it, not what the middleware reads
        import serve.ingress as module

        module.set_limits(self.settings)
        self._redis = None
        self._admission = None
        self.dashboard_loop = dashboard.DashboardLoop(
            self.store_ops, self.redis_client, dashboard.LoadSampler(llm, embedder),
            interval_s=self.settings.dashboard_sample_s, window_s=self.settings.dashboard_window_s)
        self.reserve = activation.Nachfuellen(self.redis_client, self.settings)
        """The warm spares' keeper: refills the reserve after activations and on a timer."""
        try:  # the gauges are published from the start when the replica has its loop already
            self.dashboard_loop.ensure()
            self.reserve.anstossen()
        except RuntimeError:
            pass  # no running loop yet: the first dashboard request starts it
        common.bind(self)

    # ------------------------------------------------------------------ auth
    async def principal(self, authorization: str | None) -> dict:
        parts = (authorization or "").split(None, 1)
        if len(parts) != 2 or parts[0].lower() != "bearer" or not parts[1].strip():
            raise error(401, "unauthorized", "missing bearer API key")
        key = parts[1].strip()
        now = time.monotonic()
        cache = self._keys if key in self._keys else self._refused
        hit = cache.get(key)
        if hit is not None and cache is self._keys and await self._revoked_since(now):
            hit = None  # a key was revoked somewhere since: every cached valid key is looked up again
        if hit is None or now - hit[0] > _KEY_CACHE_S:
            cache.pop(key, None)
            hit = (now, await self.store.lookup_api_key.remote(key))
            cache = self._keys if hit[1] is not None else self._refused
            cache[key] = hit
            while len(cache) > self.settings.key_cache_size:  # each bounded
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
        if hit[1] is None:
            raise error(401, "unauthorized", "unknown or revoked API key")
        return hit[1]

    async def _revoked_since(self, now: float) -> bool:
        """Whether a key was revoked (or a user erased) on any replica since this one last looked:
        the revocation counter, read at most every `key_revocation_check_ms`. Changed: the cached
        valid keys are forgotten. Unreadable (Redis away): the cache answers as it is, by the name
        `widerruf_ungelesen`, and the counter is read again at the next request."""
        gelesen, stand = self._revocation
        if (now - gelesen) * 1000 < self.settings.key_revocation_check_ms:
            return False
        try:
            neu = await (await self.redis_client()).get(erasure.REVOCATION_KEY)
        except Exception as e:
            log.warning("ingress: fallback widerruf_ungelesen: the revocation counter cannot be read (%s); the key "
                        "cache answers as it is", type(e).__name__)
            return False
        self._revocation = (now, neu)
        if neu == stand:
            return False
        self._keys.clear()
        return True

    async def revoke(self, api_key: str | None = None, user_id: str | None = None, alle: bool = False) -> None:
        """Revoked (one key, a user's keys, or `alle`: a key by its id): this replica forgets them
        now, and every other replica at its next request (the revocation counter moves)."""
        if alle:
            self.forget_all_keys()
        else:
            self.forget_keys(api_key=api_key, user_id=user_id)
        await (await self.redis_client()).incr(erasure.REVOCATION_KEY)

    def key_known(self, key: str) -> bool | None:
        """What the key cache holds of a key within its time: True valid, False refused, None nothing."""
        hit = self._keys.get(key) or self._refused.get(key)
        if hit is None or time.monotonic() - hit[0] > _KEY_CACHE_S:
            return None
        return hit[1] is not None

    async def operator(self, authorization: str | None) -> dict:
        principal = await self.principal(authorization)
        if not principal["is_operator"]:
            raise error(403, "forbidden", "operator key required")
        return principal

    def owner(self, principal: dict, user_id: str) -> None:
        if principal["is_operator"]:
            return
        if principal["user_id"] != user_id:
            raise error(403, "forbidden", "this API key does not reach that user's pairs")

    def forget_keys(self, api_key: str | None = None, user_id: str | None = None) -> None:
        """Revoked: one key, or every key of a user, leaves this replica's key cache at once."""
        if api_key:
            self._keys.pop(api_key, None)
            self._refused.pop(api_key, None)
        else:
            for k in [k for k, (_, p) in self._keys.items() if p and p.get("user_id") == user_id]:
                del self._keys[k]

    def forget_all_keys(self) -> None:
        """A key revoked by its id: this replica looks every key up again."""
        self._keys.clear()

    def validate_text(self, text: str) -> str:
        if not text.strip():
            raise error(422, "invalid_request", "text: must not be empty")
        if len(text) > self.settings.max_text_chars:
            raise error(422, "invalid_request",
                        f"text: longer than {self.settings.max_text_chars} characters ({len(text)})")
        return text

    async def redis_client(self) -> StoreRedis:
        if self._redis is None:
            from memory.redis_client import verbinden

            self._redis = verbinden(self.settings.redis_url, self.settings.redis_reconnect_s)
            self.reserve.anstossen(wecken=False)  # the replica's loop runs now: the reserve fills
        return self._redis

    # ------------------------------------------------------------------ admission
    @staticmethod
    def _inflight_keys(user_id: str, character_id: str) -> tuple[str, str]:
        # sorted sets of leases; not the counters (strings) the names `inflight:*` held before
        return f"inflight:leases:user:{user_id}", f"inflight:leases:pair:{user_id}:{character_id}"

    async def admit(self, user_id: str, character_id: str, ankunft: bool = False) -> tuple[str, int | None]:
        """Count a turn against its user's and its pair's bounds (across ingress replicas, in
        Redis); beyond either: 429 with Retry-After. Returns the turn's lease, which `release`
        gives back, and with `ankunft` the turn's arrival number for its pair (the same sequence
        across ingress replicas; drawn only when the turn is admitted). Each bound is a sorted set
        of leases scored by their start: a lease that was never given back (its replica died, or
        Redis was down at the release) expires after `admission_lease_s` on its own, however often
        the user calls again meanwhile. One round trip: `_ZULASSEN` does all of it at once."""
        r = await self.redis_client()
        if self._admission is None:
            self._admission = r.register_script(_ZULASSEN)
        s = self.settings
        lease = uuid.uuid4().hex
        user_key, pair_key = self._inflight_keys(user_id, character_id)
        ok, u, q, seq = await self._admission(
            keys=[user_key, pair_key, f"pair:seq:{user_id}:{character_id}", schluessel_index.paare_key(user_id)],
            args=[lease, repr(time.time()), repr(float(s.admission_lease_s)), int(s.admission_lease_s) + 1,
                  s.max_turns_in_flight_per_user, s.max_turns_queued_per_pair, int(ankunft), character_id])
        if not ok:
            what = (f"user {user_id} has {s.max_turns_in_flight_per_user} turns in flight"
                    if u > s.max_turns_in_flight_per_user else
                    f"pair {user_id}/{character_id} has {s.max_turns_queued_per_pair} turns waiting")
            raise HTTPException(429, detail={"type": "limit", "message": f"{what}; try again shortly"},
                                headers={"Retry-After": "2"})
        return lease, (int(seq) if ankunft else None)

    async def release(self, user_id: str, character_id: str, lease: str) -> None:
        r = await self.redis_client()
        async with r.pipeline(transaction=False) as p:
            for key in self._inflight_keys(user_id, character_id):
                p.zrem(key, lease)
            await p.execute()

    def _own(self, work: Awaitable[T]) -> asyncio.Task[T]:
        """A task the request's cancellation does not reach (a client that hung up); kept until done."""
        task = asyncio.ensure_future(work)
        self._owned.add(task)
        task.add_done_callback(self._owned.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: the caller may be gone
        return task

    async def run_turn(self, user_id: str, character_id: str, text: str, turn_id: str, *, name: str | None = None,
                       received_at: datetime | None = None) -> TurnResult | TurnFailure:
        """A message's turn: admitted (429 beyond the bounds), handed to the pair's actor, and its
        admission lease held until the actor has finished it, whatever becomes of the caller — a
        client that hangs up frees no place while its turn still runs."""
        lease, seq = await self.admit(user_id, character_id, ankunft=True)
        request = PairTurnRequest(text=text, turn_id=turn_id, seq=seq, name=name, received_at=received_at)

        async def owned() -> TurnResult | TurnFailure:
            try:
                return await self.call(user_id, character_id, lambda h: h.turn.remote(request))
            finally:
                await self.release(user_id, character_id, lease)

        return await asyncio.shield(self._own(owned()))

    async def run_stream(self, user_id: str, character_id: str, text: str, turn_id: str, *, name: str | None = None,
                         received_at: datetime | None = None) -> AsyncIterator[TurnStreamEvent]:
        """A message's turn as events: admitted here (429 before any byte of the answer), then the
        pair actor's stream is read to its end by a task of its own, which gives the lease back;
        a client that leaves early stops reading, not the turn, and frees no place before it ends."""
        lease, seq = await self.admit(user_id, character_id, ankunft=True)
        request = PairTurnRequest(text=text, turn_id=turn_id, seq=seq, name=name, received_at=received_at)
        queue: asyncio.Queue[TurnStreamEvent | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for ev in self.stream(user_id, character_id, request):
                    queue.put_nowait(ev)
            finally:
                queue.put_nowait(None)
                await self.release(user_id, character_id, lease)

        task = self._own(pump())

        async def events() -> AsyncIterator[TurnStreamEvent]:
            while (ev := await queue.get()) is not None:
                yield ev
            if not task.done():
                await asyncio.shield(task)
            if task.exception() is not None:
                raise task.exception()

        return events()

    @asynccontextmanager
    async def admitted(self, user_id: str, character_id: str, ankunft: bool = False) -> AsyncIterator[int | None]:
        lease, seq = await self.admit(user_id, character_id, ankunft)
        try:
            yield seq
        finally:
            await self.release(user_id, character_id, lease)

    # ------------------------------------------------------------------ characters
    async def known_character(self, character_id: str) -> None:
        """404 for a character that does not exist, before any pair actor is made for it."""
        now = time.monotonic()
        seen = self._characters.get(character_id)
        if seen is not None and now - seen < _CHARACTER_CACHE_S:
            return
        if await self.store_ops.charaktere.exists(character_id):
            if len(self._characters) > 10_000:
                self._characters.clear()
            self._characters[character_id] = now
            return
        self._characters.pop(character_id, None)
        raise unknown_character(character_id)

    async def character_or_404(self, character_id: str) -> Charakter:
        ch = await self.store_ops.charaktere.get(character_id)
        if ch is None:
            self._characters.pop(character_id, None)
            raise unknown_character(character_id)
        return ch

    def remember_character(self, character_id: str) -> None:
        """Made here: this replica knows at once that the character exists."""
        self._characters[character_id] = time.monotonic()

    def forget_character(self, character_id: str) -> None:
        self._characters.pop(character_id, None)

    # ------------------------------------------------------------------ pair actors
    async def _pair(self, user_id: str, character_id: str):
        """The pair's bound actor: this replica's handle, or one the registry activates (a warm
        spare, actors/registry.py); the reserve refills beside it."""
        k = f"{user_id}\x00{character_id}"
        h = self._pairs.get(k)
        if h is None:
            if len(self._pairs) > 10_000:
                self._pairs.clear()
            h = await activation.aktivieren(await self.redis_client(), self.settings, user_id, character_id)
            self._pairs[k] = h
            self.reserve.anstossen()
        return h

    async def live_pair(self, user_id: str, character_id: str) -> ActorHandle | None:
        """The pair's actor when one is alive, else None; never creates one."""
        h = self._pairs.get(f"{user_id}\x00{character_id}")
        if h is not None:
            return h
        stand = await registry.eintrag(await self.redis_client(), pair_name(user_id, character_id))
        return None if stand is None else await asyncio.to_thread(activation.handle_by_name, stand.aktor, self.settings)

    def forget(self, user_id: str, character_id: str) -> None:
        self._pairs.pop(f"{user_id}\x00{character_id}", None)

    async def erase(self, user_id: str | None = None, character_id: str | None = None) -> dict[str, int]:
        """Erase everything stored about a user, or about every pair of a character
        (memory/erasure.py): a user is marked erased first (no write for them is taken from then
        on) and their keys are revoked on every replica; the pairs are locked against activation
        (each of a user's, live or not) and their live actors stop; the background jobs a worker
        holds for the user are waited for (`erasure_wait_held_s`); then the queued jobs and the
        Redis keys go, then the Postgres rows. Returns what went, by store."""
        r = await self.redis_client()
        bekannt = None
        if user_id is not None:
            await self._als_geloescht_markieren(r, user_id)
            bekannt = await self.store_ops.erasure.bekannte_paare(user_id)
        gesperrt = await self._paare_sperren(r, user_id, bekannt)
        gestoppt = await activation.anhalten(r, self.settings, lambda u, c: self._in_scope([u, c], user_id, character_id))
        gesperrt = sorted(set(gesperrt) | set(await self._paare_sperren(r, user_id, bekannt, gestoppt)))
        for k in [k for k in self._pairs if self._in_scope(k.split("\x00"), user_id, character_id)]:
            self._pairs.pop(k, None)
        if user_id is not None:
            await erasure.gehaltene_abwarten(r, user_id, self.settings.erasure_wait_held_s,
                                             self.settings.outbox_claim_idle_ms)
        gone = await erasure.erase_keys(r, user_id, character_id, bekannt=bekannt)
        gone.update(await self.store_ops.erasure.erase_rows(user_id, character_id))
        for pair in gesperrt:  # locked since the erasure began: a new conversation may begin
            await registry.entsperren(r, pair)
        gone["actors"] = len(gestoppt)
        log.info("ingress: erased %s: %d pair actors stopped, %d rows, %d keys and entries",
                 f"user {user_id}" if user_id is not None else f"the pairs of character {character_id}", len(gestoppt),
                 sum(n for k, n in gone.items() if k.startswith("pg:")),
                 sum(n for k, n in gone.items() if k.startswith("redis:")))
        return gone

    async def _als_geloescht_markieren(self, r, user_id: str) -> None:
        """A user's erasure begins: the mark in Redis and in Postgres (memory/erasure.py), then the
        user's keys revoked in Postgres and on every replica (the revocation counter moves)."""
        frist_s = self.settings.erasure_mark_hours * 3600
        await erasure.markieren_redis(r, user_id, frist_s)
        await self.store_ops.erasure.markieren(user_id, frist_s)
        await self.store_ops.pg.revoke_api_keys(None, user_id, None)
        await self.revoke(user_id=user_id)

    async def _paare_sperren(self, r, user_id: str | None, bekannt: dict[str, list[str]] | None,
                             auch: list[str] = ()) -> list[str]:
        """Lock a user's pairs (the key index's and Postgres', live or not) and `auch` against
        activation for the erasure's time (its wait for held jobs, and its deletes beyond). Returns them."""
        paare = [pair_name(user_id, c) for c in await erasure.paare_von(r, user_id, bekannt)] if user_id is not None else []
        paare = sorted(set(paare) | set(auch))
        frist = int(self.settings.erasure_wait_held_s) + registry.SPERRE_S
        for pair in paare:
            await r.set(registry.GESPERRT + pair, "1", ex=frist)
        return paare

    @staticmethod
    def _in_scope(pair: list[str], user_id: str | None, character_id: str | None) -> bool:
        return (user_id is not None and pair[0] == user_id) or (character_id is not None and pair[1:] == [character_id])

    async def call(self, user_id: str, character_id: str, send: Callable[[Any], Awaitable[T]]) -> T:
        """Call the pair's actor: `send` calls one of its methods on the handle, e.g.
        `lambda h: h.turn.remote(request)` (`actors.pair.PairActor.turn`). When the actor is gone
        (evicted or crashed), drop the handle and retry. Retrying a turn is safe: the turn_id was
        fixed before the first attempt."""
        last: Exception | None = None
        for attempt in range(4):
            try:
                return await send(await self._pair(user_id, character_id))
            except ACTOR_GONE as e:
                last = e
                self.forget(user_id, character_id)
                log.warning("ingress: pair %s:%s actor gone during a call (attempt %d): retrying", user_id,
                            character_id, attempt + 1)
                # at once the first time: mostly a handle of an actor that was evicted while idle,
                # for which waiting helps nothing (the registry resolves the pair anew)
                await asyncio.sleep(0.2 * attempt)
        raise error(503, "unavailable", f"pair actor unavailable: {type(last).__name__}")

    async def stream(self, user_id: str, character_id: str,
                     request: PairTurnRequest) -> AsyncIterator[TurnStreamEvent]:
        """The turn's events from `actors.pair.PairActor.turn_stream`. When the actor dies on the
        way, the turn runs again (after a `restart` event once events were sent); when it stays
        gone, an `error` event ends the stream."""
        for attempt in range(4):
            started = False
            try:
                h = await self._pair(user_id, character_id)
                gen = h.turn_stream.options(num_returns="streaming").remote(request)
                async for ref in gen:
                    ev = await ref
                    started = True
                    yield ev
                return
            except ACTOR_GONE:
                self.forget(user_id, character_id)
                log.warning("ingress: pair %s:%s actor gone while streaming (attempt %d)", user_id,
                            character_id, attempt + 1)
                if started:
                    yield RestartEvent(reason="pair actor restarted; the turn runs again")
                await asyncio.sleep(0.2 * attempt)  # at once the first time, as in `call`
        yield ErrorEvent(failure=TurnFailure(node=None, message="pair actor unavailable"))
