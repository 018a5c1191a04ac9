"""PairActor: one per (user, character) at any moment, a process named `pairhost:{hex}` that the
registry (actors/registry.py) binds to its pair under a fencing token; started ahead as a warm
spare, already connected, so a returning person does not wait for a new process.

It serialises the pair's turns (one at a time, in arrival order) while read-only calls (history,
status) are still answered; it holds what lives only for a turn; it exits after an idle timeout
and rebuilds from the stores on its next turn; Ray restarts it after a crash. It stays light:
no model, no torch, no database connection — Postgres work goes to the store deployment.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
import uuid
from typing import Any, AsyncIterator

import ray
from pydantic import TypeAdapter

from actors import registry
from actors.registry import pair_name
from actors.arrival import ArrivalOrder
from core.names import APP_NAME, NODES_DEPLOYMENT
from core.settings import Settings
from actors import ruecknahme as vorgaenge
from core.wire import (DraftEvent, ErrorEvent, EventDropped, FinalEvent, PairEventRequest, PairRuecknahmeRequest,
                       PairTurnRequest, RuecknahmeResult, TokenEvent, TurnFailure, TurnResult, TurnStreamEvent)
from memory import ausstehender_auftrag, outbox, redis_vorher, ruecknahme, schluessel_index, session
from pipeline import metrics
from pipeline.chains import CHARACTER_CHAIN, HUMAN_CHAIN, vorab_starten
from pipeline.runner import ChainRunner, NodeFailed
from pipeline.services import Deps, Services, transport
from pipeline.nodes.dispatcher import keep_human
from pipeline.reiz import stimulus_from_event
from core.state import Stimulus, TurnState
from pipeline.trace import TurnTrace

log = logging.getLogger("novaberg.pair")

HEAVY_MODULES = ("torch", "sentence_transformers", "llama_cpp", "psycopg", "trafilatura")
LIVE_PAIRS = "pairs:live"
MAX_SELF_TRIGGERS = 3
"""Self-triggered character turns per pair between two messages of the human."""
EVICTED_PAIRS = "pairs:evicted"
NODE_ERRORS = "errors:nodes"
"""Sorted set of failed nodes (score: time), member `{time}:{node}:{user}:{character}:{turn}`."""
_STREAM_EVENT: TypeAdapter[TurnStreamEvent] = TypeAdapter(TurnStreamEvent)
"""The events a turn's trace puts on its queue (node_started / node_finished / draft), typed."""


def kept_reply(result: TurnResult, drafted: str) -> TokenEvent:
    """The stream's `token` event: the committed reply, byte for byte, and whether the streamed
    draft was kept as it was (a client that showed it need not redraw it)."""
    reply = result.reply or ""
    return TokenEvent(text=reply, draft_kept=bool(drafted) and drafted.strip() == reply.strip())


def _von_ray_neu_gestartet() -> bool:
    """Whether Ray restarted this actor's process after a crash. False outside an actor (a test
    builds the class in-process): asked there, the runtime context would start Ray in the caller."""
    if not ray.is_initialized():
        return False
    try:
        return ray.get_runtime_context().was_current_actor_reconstructed
    except AssertionError:  # a driver, not an actor's worker
        return False


class PairActor:
    def __init__(self, settings: Settings, name: str):
        # construction is cheap; connections come up with `vorwaermen` or the first call
        self.name = name
        self.user_id: str | None = None
        self.character_id: str | None = None
        self._token: int | None = None
        """The fencing token the registry bound this process to its pair under (`binden`)."""
        self.settings = settings
        self._services: Services | None = None
        self._human: ChainRunner | None = None
        self._character: ChainRunner | None = None
        self._order = ArrivalOrder()  # one turn at a time, in arrival order
        self._inflight = 0
        self._messages = 0
        """The human's turns this actor holds, running or waiting; bounded on its own (`_refuse`)."""
        self._last = time.monotonic()
        self._turns = 0
        self._watch: asyncio.Task | None = None
        self._started = time.time()
        self._history_checked = False
        self._evicting = False
        """Set, before its first await, by the idle eviction: no call starts any more."""
        self._neu = _von_ray_neu_gestartet()
        """Ray restarted this process (it crashed): it serves no pair until it is bound again."""
        if self._neu:  # called again, it is bound again; called by nobody, it must not stay forever
            self._watch = asyncio.get_running_loop().create_task(self._idle_watch())

    # ------------------------------------------------------------------ plumbing
    def _verbinden(self) -> Services:
        if self._services is None:
            self._services = Services.connect(self.settings)
            nodes_handle = None
            if self.settings.remote_nodes:
                from ray import serve

                nodes_handle = transport(serve.get_deployment_handle(NODES_DEPLOYMENT, app_name=APP_NAME),
                                         self.settings)
            remote = self.settings.remote_nodes
            plan = self.settings.schedule
            self._human = ChainRunner(HUMAN_CHAIN, remote=remote, nodes_handle=nodes_handle, name="human", schedule=plan)
            self._character = ChainRunner(CHARACTER_CHAIN, remote=remote, nodes_handle=nodes_handle, name="character",
                                          schedule=plan)
        return self._services

    def _ensure(self) -> Services:
        """The connections of a process that serves its pair (a call to one that serves none, e.g.
        restarted by Ray since it was bound, is refused: the caller binds it again)."""
        if self.user_id is None or self._evicting:
            raise registry.PairSuperseded(f"{self.name} serves no pair (started anew, or leaving)")
        services = self._verbinden()
        if self._watch is None or self._watch.done():
            self._watch = asyncio.get_running_loop().create_task(self._idle_watch())
        return services

    async def vorwaermen(self) -> int:
        """A spare gets ready before any pair needs it: the deployments' handles, the chains, and
        one cheap call over each handle a turn uses at once (a handle's first call sets up its
        routing and its channel to a replica: without it the first turn's model calls were slower)."""
        services = self._verbinden()
        calls = [services.llm.handle.load.remote(), services.embedder.handle.load.remote(),
                 services.store.handle.ready.remote(), services.redis.ping()]
        for name, out in zip(("llm", "embedder", "store", "redis"), await asyncio.gather(*calls, return_exceptions=True)):
            if isinstance(out, BaseException):
                log.warning("pair process %s: warming the %s handle failed (%s); its first call sets it up", self.name,
                            name, type(out).__name__)
        return os.getpid()

    async def binden(self, user_id: str, character_id: str, token: int) -> int:
        """Serve the pair under `token`, when the registry's entry says so (the fence)."""
        self._bindbar(user_id, character_id, token)
        if (self.user_id, self.character_id, self._token) == (user_id, character_id, token):
            return os.getpid()
        services = self._verbinden()
        stand = await registry.eintrag(services.redis, pair_name(user_id, character_id))
        if stand != registry.Eintrag(self.name, token):
            raise registry.PairSuperseded(f"{pair_name(user_id, character_id)} is not {self.name}'s under token "
                                          f"{token} (the registry holds {stand})")
        self._bindbar(user_id, character_id, token)  # again: another binding may have come in meanwhile
        self.user_id, self.character_id, self._token = user_id, character_id, token
        services.zaun = (registry.BESITZ, pair_name(user_id, character_id), stand.wert)  # every commit's fence
        self._last = time.monotonic()
        if self._watch is None or self._watch.done():  # bound, never called: the idle eviction frees it all the same
            self._watch = asyncio.get_running_loop().create_task(self._idle_watch())
        log.info("pair %s: served by %s under token %d", pair_name(user_id, character_id), self.name, token)
        return os.getpid()

    def _bindbar(self, user_id: str, character_id: str, token: int) -> None:
        """A process serves one pair in its life, and never under an older token than it holds."""
        if self._evicting:
            raise registry.PairSuperseded(f"{self.name} is leaving")
        mine = (self.user_id, self.character_id)
        if self.user_id is not None and mine != (user_id, character_id):
            raise registry.PairSuperseded(f"{self.name} serves {pair_name(*mine)} already")
        if self._token is not None and token < self._token:
            raise registry.PairSuperseded(f"token {token} is older than {self._token}")

    async def _fence(self, services: Services) -> None:
        """The fence: this process still serves the pair under its token (before anything is
        written for the pair: a turn, a taking back, a self-trigger's count)."""
        stand = await registry.eintrag(services.redis, pair_name(self.user_id, self.character_id))
        if stand != registry.Eintrag(self.name, self._token):
            raise self._abgeloest(stand)

    def _abgeloest(self, stand: registry.Eintrag | None, *, beim_commit: bool = False) -> registry.PairSuperseded:
        """The registry gave the pair to another process: this one serves it no more and exits.
        `beim_commit`: the commit's own fence refused the turn (what the registry holds is not read)."""
        pair = pair_name(self.user_id, self.character_id)
        wo = "the commit's fence refused its turn" if beim_commit else f"the registry holds {stand or 'no entry'}"
        log.warning("pair %s: fallback abgeloest: %s held token %s, %s; exiting", pair, self.name, self._token, wo)
        self.user_id = self.character_id = self._token = None
        me = ray.get_runtime_context().current_actor
        asyncio.get_running_loop().call_later(1.0, lambda: ray.kill(me, no_restart=True))
        return registry.PairSuperseded(f"{pair} is served by another process now")

    def _enter(self) -> None:
        self._inflight += 1
        self._last = time.monotonic()

    def _leave(self) -> None:
        self._inflight -= 1
        self._last = time.monotonic()

    async def _idle_watch(self) -> None:
        timeout = self.settings.pair_idle_timeout_s
        while True:
            await asyncio.sleep(min(timeout / 4, 5.0))
            if self._inflight or time.monotonic() - self._last <= timeout:
                continue
            if self.user_id is not None:
                self._evicting = True  # before the first await: no call starts from here on
                await self._evict()
                return
            if not self._neu:
                continue
            try:
                if not await self._verwaist():
                    return  # a spare in the reserve: it waits there by design
            except Exception:  # Redis away for a moment: the next round looks again
                log.warning("pair process %s: could not check whether it is left over; looking again", self.name,
                            exc_info=True)

    async def _verwaist(self) -> bool:
        """A process Ray restarted, bound to no pair and called by nobody for the idle timeout: it
        gives up the entries that still name it and exits (fallback `verwaist`) — unless it waits
        in the reserve as a spare. False: it stays."""
        r = self._verbinden().redis
        if await registry.in_reserve(r, self.name):
            return False
        if self.user_id is not None or self._inflight or self._evicting:
            return True  # bound or called meanwhile: the watch goes on
        self._evicting = True  # before the next await: no call or binding starts from here on
        try:
            stale = await registry.eintraege_von(r, self.name)
            for pair, stand in stale.items():
                if await registry.freigeben(r, pair, stand):
                    await r.hdel(LIVE_PAIRS, pair)
        except Exception:
            stale = {}
            log.warning("pair process %s: could not give up its entries", self.name, exc_info=True)
        log.warning("pair process %s: fallback verwaist: restarted by Ray, bound to no pair and called by nobody "
                    "for %.0fs; gives up %s and exits", self.name, self.settings.pair_idle_timeout_s,
                    ", ".join(stale) or "no entry")
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
        return True

    async def _evict(self) -> None:
        name = pair_name(self.user_id, self.character_id)
        log.info("pair %s idle for %.0fs: evicting itself", name, self.settings.pair_idle_timeout_s)
        try:
            r = self._services.redis
            await registry.freigeben(r, name, registry.Eintrag(self.name, self._token))
            await r.hdel(LIVE_PAIRS, name)
            await r.zadd(EVICTED_PAIRS, {name: time.time()})
        except Exception:
            log.warning("pair %s: could not record its eviction", name, exc_info=True)
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    # ------------------------------------------------------------------ turns
    def _refuse(self, request: PairTurnRequest) -> TurnFailure | None:
        """The pair's own bound on its queue, whatever admission let through (a caller other than
        the ingress, or leases that expired): beyond `max_turns_queued_per_pair` turns held, a
        turn is refused before anything of it is stored."""
        bound = self.settings.max_turns_queued_per_pair
        if self._messages < bound:
            return None
        log.warning("pair %s:%s: %d turns held, turn %s refused (fallback warteschlange_voll)", self.user_id,
                    self.character_id, self._messages, request.turn_id)
        return TurnFailure(turn_id=request.turn_id, message=f"the pair holds {self._messages} turns already; "
                           "try again shortly", refused=True)

    async def turn(self, request: PairTurnRequest) -> TurnResult | TurnFailure:
        if (refused := self._refuse(request)) is not None:
            return refused
        self._enter()
        self._messages += 1
        try:
            return await self._turn_locked(request, None)
        finally:
            self._messages -= 1
            self._leave()

    async def turn_stream(self, request: PairTurnRequest) -> AsyncIterator[TurnStreamEvent]:
        """Events while the turn runs (node_started / node_finished / draft), then the kept reply
        (`token`) and `final`, or `error`.

        `draft` events carry the responder's text as it is written: provisional, because the
        Thinker, the tribunal and corrector and the leak guard may still change it. Once the turn
        is committed, one `token` event carries the reply exactly as stored (`draft_kept` says
        whether it is the draft unchanged): what a client keeps showing is what Nova remembers."""
        if (refused := self._refuse(request)) is not None:
            yield ErrorEvent(failure=refused)
            return
        self._enter()
        self._messages += 1
        try:
            q: asyncio.Queue = asyncio.Queue()
            task = asyncio.get_running_loop().create_task(self._turn_locked(request, q))
            drafted: list[str] = []

            def seen(raw: dict[str, Any]) -> TurnStreamEvent:
                ev = _STREAM_EVENT.validate_python(raw)
                if isinstance(ev, DraftEvent):
                    drafted.append(ev.text)
                return ev

            while True:
                getter = asyncio.ensure_future(q.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield seen(getter.result())
                    continue
                getter.cancel()
                while not q.empty():
                    yield seen(q.get_nowait())
                result = task.result()
                if isinstance(result, TurnFailure):
                    yield ErrorEvent(failure=result)
                    return
                yield kept_reply(result, "".join(drafted))
                yield FinalEvent(result=result)
                return
        finally:
            self._messages -= 1
            self._leave()

    async def _prime(self, services: Services) -> None:
        if not self._order.primed:
            raw = await services.redis.get(self._seq_key())
            self._order.prime(int(raw) if raw is not None else 0)

    async def _turn_locked(self, request: PairTurnRequest | None, events: asyncio.Queue | None,
                           stimulus: Stimulus | None = None,
                           aus_turn: str | None = None) -> TurnResult | TurnFailure | EventDropped:
        """A turn in its place in the arrival order: a message of the human (`request`), or an
        event's `stimulus` (no arrival number; `aus_turn`: the turn a planned impulse came from)."""
        services = self._ensure()
        seq = request.seq if request else None
        turn_id = stimulus.turn_id if stimulus else (request.turn_id or uuid.uuid4().hex)
        await self._prime(services)
        await self._order.acquire(seq)
        try:
            stored, genommen = await self._begin(services, turn_id, seq,
                                                  (stimulus.ursprung_turn_id or aus_turn) if stimulus else None)
            if not self._history_checked:
                await self._check_history(services)
            if genommen:
                return self._zurueckgenommen(turn_id, genommen, stimulus)
            if stored is not None:
                log.info("pair %s:%s: turn %s answered from its stored result", self.user_id,
                         self.character_id, turn_id)
                return TurnResult.model_validate({**stored.body(), "replayed": True})
            return await self._run_chain(services, turn_id, request, events, stimulus)
        finally:
            self._order.release()

    async def _begin(self, services: Services, turn_id: str, seq: int | None,
                     ursprung: str | None = None) -> tuple[TurnResult | None, str | None]:
        """A turn's start: the fence (this process still serves the pair), then in one round trip the
        arrival number it starts under (a new actor of the pair continues after it), the stored result of a turn_id that ran before, and which of the
        turn and the turn it continues (`ursprung`) was taken back, if one was."""
        ids = [t for t in (turn_id, ursprung) if t]
        await self._fence(services)  # first: a process the registry replaced writes nothing, not even the place
        async with services.redis.pipeline(transaction=False) as p:
            if seq is not None:
                p.set(self._seq_key(), int(self._order.last))
            p.get(session.result_key(self.user_id, self.character_id, turn_id))
            p.smismember(ruecknahme.zurueckgenommen_key(self.user_id, self.character_id), ids)
            raw, hits = (await p.execute())[-2:]
        return session.result_from(raw), next((t for t, hit in zip(ids, hits) if hit), None)

    def _zurueckgenommen(self, turn_id: str, genommen: str, stimulus: Stimulus | None) -> TurnFailure | EventDropped:
        """A turn_id that was taken back runs no more: an event that continues such a turn is
        dropped, a message under such an id is refused (it asks for a new one)."""
        log.warning("pair %s:%s: turn %s not run: turn %s was taken back (fallback zurueckgenommen)", self.user_id,
                    self.character_id, turn_id, genommen)
        if stimulus is not None:
            return EventDropped(reason="zurueckgenommen")
        return TurnFailure(turn_id=turn_id, zurueckgenommen=True,
                           message=f"turn {turn_id} was taken back; send the message "
                           "again under a new turn_id")

    async def _check_history(self, services: Services) -> None:
        """Once per actor: a session history Redis lost is rebuilt from the turns in Postgres."""
        n = await session.verlauf_wiederherstellen(
            services.redis, lambda limit: services.store.pg.recent_turn_records(self.user_id,
                                                              self.character_id, limit),
            self.user_id, self.character_id, self.settings.session_keep_turns)
        if n:
            log.warning("pair %s:%s: fallback verlauf_aus_postgres: the session history was empty in Redis; "
                        "%d entries rebuilt from the stored turns", self.user_id, self.character_id, n)
        self._history_checked = True
        for v in await vorgaenge.offene(services, self.user_id, self.character_id):
            log.warning("pair %s:%s: fallback ruecknahme.fortgesetzt: %s %s was cut short; finishing it", self.user_id,
                        self.character_id, v.art, v.op_id)
            await self._weiter(services, v)

    async def _run_chain(self, services: Services, turn_id: str, request: PairTurnRequest | None,
                         events: asyncio.Queue | None, stimulus: Stimulus | None = None) -> TurnResult | TurnFailure:
        t0 = time.perf_counter()
        stimulus = stimulus or Stimulus(user_id=self.user_id, character_id=self.character_id, turn_id=turn_id,
                                        user_prompt=request.text, herkunft="user", person_name=request.name,
                                        **({"received_at": request.received_at, "datiert": True}
                                           if request.received_at else {}))
        state = TurnState(stimulus=stimulus)
        trace = TurnTrace(self.user_id, self.character_id, turn_id, events)
        # Redis writes beside the turn instead of on its path: the dashboard's registry of live pairs
        # and, once the human's message is perceived, the self-trigger count starting again
        nebenher = [asyncio.ensure_future(self._alive(services))]
        try:
            deps = Deps(services, trace)
            # the nodes' reads that need nothing of this turn start beside perzeption's model call,
            # once that call is on its way (issued before it, they delayed it by several ms)
            trace.after_first_call(lambda: vorab_starten(deps, stimulus, self.settings.remote_nodes))
            if stimulus.herkunft != "user" or "perzeption" in self.settings.remote_nodes:
                trace.call_sent()  # no model call of this actor's comes first: the reads start now
            if stimulus.herkunft == "user":
                # a message of the human: perceive and remember it, then Nova answers
                await self._human.run(state, deps)
                nebenher.append(asyncio.ensure_future(self._reset(services, turn_id)))
            trace.call_sent()  # the first node made no model call (its fallback): the reads start now
            await self._character.run(state, deps)
        except NodeFailed as e:
            if isinstance(e.cause, registry.PairSuperseded):  # the commit's fence: the new process runs the turn
                raise self._abgeloest(None, beim_commit=True) from e
            metrics.turn_finished("error")
            metrics.node_error(e.node)
            await self._record_error(services, e.node, turn_id)
            kept = await self._keep_human(state, deps, e.node)
            return TurnFailure(turn_id=turn_id, node=e.node, message=str(e), message_kept=kept,
                               ausfall=outbox.is_outage(e))
        finally:
            await asyncio.gather(*nebenher)  # each logs its own failure
        self._turns += 1
        ms = (time.perf_counter() - t0) * 1000
        metrics.turn_latency(self.character_id, ms)
        metrics.turn_finished("ok")
        self._consume_self_trigger(state)
        result = state.dispatch.result.body()
        result["timings"] = {**result.get("timings", {}), **trace.timings().model_dump()}
        result["replayed"] = not state.dispatch.committed
        return TurnResult.model_validate(result)

    async def _keep_human(self, state: TurnState, deps: Deps, node: str) -> bool:
        """Nova's chain failed: the human's message is kept all the same (the dispatcher's
        `keep_human`); a failure to keep it is logged and reported to the client as not kept."""
        try:
            return await keep_human(state, deps, node)
        except Exception:
            log.exception("pair %s:%s: turn %s failed in %s and the human's message could not be kept",
                          self.user_id, self.character_id, state.stimulus.turn_id, node)
            return False

    async def _alive(self, services: Services) -> None:
        try:
            await services.redis.hset(LIVE_PAIRS, pair_name(self.user_id, self.character_id), time.time())
        except Exception:
            log.warning("pair registry update failed", exc_info=True)

    async def _reset(self, services: Services, turn_id: str) -> None:
        """The human spoke: Nova's self-triggers count from zero again (MAX_SELF_TRIGGERS)."""
        try:
            await redis_vorher.festhalten(services.redis, self.user_id, self.character_id, turn_id,
                                          self._self_trigger_key())
            await services.redis.delete(self._self_trigger_key())
        except Exception:
            log.warning("pair %s:%s: the self-trigger count was not reset: the next self-triggers may reach "
                        "their limit early", self.user_id, self.character_id, exc_info=True)

    async def _record_error(self, services: Services, node: str, turn_id: str) -> None:
        """A failed turn commits nothing, so its node is counted here for the dashboard."""
        try:
            # the turn enters the key index first: taking it back reads the node errors from there on
            await schluessel_index.merken(services.redis, self.user_id, self.character_id, turn_id)
            now = time.time()
            await services.redis.zadd(NODE_ERRORS, {f"{now:.6f}:{node}:{self.user_id}:{self.character_id}:{turn_id}": now})
            await services.redis.zremrangebyscore(NODE_ERRORS, 0, now - 7 * 24 * 3600)
        except Exception:
            log.warning("could not record the failed node %s", node, exc_info=True)

    # ------------------------------------------------------------------ events without a message
    def _seq_key(self) -> str:
        return f"pair:seqstarted:{self.user_id}:{self.character_id}"

    def _self_trigger_key(self) -> str:
        return f"selftrigger:{self.user_id}:{self.character_id}"

    async def _self_trigger_zaehlen(self, services: Services, request: PairEventRequest) -> int:
        """The pair's self-trigger count with this one: a follow-up delivered again (its first run
        failed, or its worker died) counts once, by its turn id; one without an id always counts."""
        turn_id = stimulus_from_event(self.user_id, self.character_id, request.model_dump(), "self_trigger").turn_id \
            if request.turn_id else uuid.uuid4().hex
        return await selbst_anstoss_zaehlen(services.redis, self._self_trigger_key(), turn_id)

    def _consume_self_trigger(self, state: TurnState) -> None:
        """The event consumer of seed 000 §3.5: every arrival is logged, present or not; a set
        self-trigger went into the outbox with the turn's commit (`selbst_anstoss`), and a worker
        brings it back to this pair's queue as a `continue` event, after the current turn."""
        p = state.pruefung
        present = p is not None
        value = p.self_trigger if p else None
        log.info("pair %s:%s: self-trigger in result — present=%s, value=%s (turn %s)%s", self.user_id,
                 self.character_id, present, value, state.stimulus.turn_id,
                 ", handed to the outbox with the turn" if value and state.dispatch and state.dispatch.committed
                 else "")

    async def event(self, request: PairEventRequest) -> TurnResult | TurnFailure | EventDropped:
        """A `continue` event (a self-trigger) or an `impulse` (Nova's own thought): the character
        chain alone, with exactly one of user_prompt / eigener_gedanke."""
        self._enter()
        try:
            services = self._ensure()
            await self._fence(services)  # before the self-trigger's count: a replaced process counts nothing
            kind = request.kind
            if kind == "continue" and await self._answered_before(services, request):
                herkunft = "self_trigger"  # delivered again: the stored result answers, nothing counts twice
            elif kind == "continue":
                # seed 000 §3.5, the event consumer's locks: an order waiting for the human's answer
                # (pending_agent) before MAX_SELF_TRIGGERS — a blocked self-trigger uses up none of them
                if await ausstehender_auftrag.offen(services.redis, self.user_id, self.character_id):
                    log.warning("pair %s:%s: self-trigger dropped: an order waits for the human's answer "
                                "(pending_agent)", self.user_id, self.character_id)
                    return EventDropped(reason="pending_agent")
                n = await self._self_trigger_zaehlen(services, request)
                if n > MAX_SELF_TRIGGERS:
                    log.warning("pair %s:%s: self-trigger dropped at the limit (%d of %d)", self.user_id,
                                self.character_id, n, MAX_SELF_TRIGGERS)
                    return EventDropped(reason="max_self_triggers", counter=n)
                herkunft = "self_trigger"
            elif kind == "impulse":
                herkunft = "eigener_impuls"
            else:
                raise ValueError(f"unknown event kind {kind!r}")
            log.info("pair %s:%s: %s event arrived (turn %s, retry=%s)", self.user_id, self.character_id, kind,
                     request.turn_id, request.thinker_unsicher_retry)
            stimulus = stimulus_from_event(self.user_id, self.character_id,
                                           {**request.model_dump(), "turn_id": request.turn_id or uuid.uuid4().hex},
                                           herkunft)
            return await self._turn_locked(None, None, stimulus, request.aus_turn)
        finally:
            self._leave()

    async def _answered_before(self, services: Services, request: PairEventRequest) -> bool:
        """Whether this event's turn has a stored result already (a follow-up delivered twice)."""
        if not request.turn_id:
            return False  # a new event: its turn id is drawn when it runs
        turn_id = stimulus_from_event(self.user_id, self.character_id, request.model_dump(), "self_trigger").turn_id
        return await session.stored_result(services.redis, self.user_id, self.character_id, turn_id) is not None

    # ------------------------------------------------------------------ taking turns back
    async def zuruecknehmen(self, request: PairRuecknahmeRequest) -> RuecknahmeResult:
        """Take turns back in the pair's turn order (actors/ruecknahme.py): `rewind` the last
        messages and all after them, `regenerate` the last reply, `edit` the last message — for
        the latter two the new turn is answered under the same hold, before any later message."""
        self._enter()
        try:
            services = self._ensure()
            await self._prime(services)
            await self._order.acquire(None)
            try:
                await self._fence(services)
                if not self._history_checked:
                    await self._check_history(services)
                return await self._vorgang(services, request)
            finally:
                self._order.release()
        finally:
            self._leave()

    async def _vorgang(self, services: Services, request: PairRuecknahmeRequest) -> RuecknahmeResult:
        v = await vorgaenge.laden(services, self.user_id, self.character_id, request.op_id)
        if v is not None and v.stand == "fertig" and v.ergebnis is not None:
            return v.ergebnis.model_copy(update={"by_store": {}})
        if v is None:
            if request.turn_id and (wieder := await self._schon_beantwortet(services, request)) is not None:
                return wieder
            eintraege = await session.load_turns(services.redis, self.user_id, self.character_id,
                                                 self.settings.session_keep_turns + session.FENSTER_BLOCK)
            v = vorgaenge.planen(eintraege, request, request.turn_id or uuid.uuid4().hex)
            if v is None:
                return RuecknahmeResult(op_id=request.op_id, art=request.art, zurueckgenommen=[], nichts=True)
            if v.turn_id in v.zurueckgenommen:  # the new turn would run under an id it takes back
                v.turn_id = uuid.uuid4().hex
                log.warning("pair %s:%s: %s %s names turn %s, which it takes back; the new turn runs as %s "
                            "(fallback neue_turn_id)", self.user_id, self.character_id, request.art, request.op_id,
                            request.turn_id, v.turn_id)
            await vorgaenge.speichern(services, self.user_id, self.character_id, v)
        return await self._weiter(services, v)

    async def _schon_beantwortet(self, services: Services, request: PairRuecknahmeRequest) -> RuecknahmeResult | None:
        """A regenerate or edit whose new turn id has answered already is a retry: the stored
        result again, nothing taken back (a retry never becomes another regenerate)."""
        stored = await session.stored_result(services.redis, self.user_id, self.character_id, request.turn_id)
        if stored is None:
            return None
        log.info("pair %s:%s: %s %s names turn %s, which has answered: its stored result again (a retry)",
                 self.user_id, self.character_id, request.art, request.op_id, request.turn_id)
        return RuecknahmeResult(op_id=request.op_id, art=request.art, zurueckgenommen=[],
                             turn=TurnResult.model_validate({**stored.body(), "replayed": True}))

    async def _weiter(self, services: Services, v: vorgaenge.Vorgang) -> RuecknahmeResult:
        """An operation from where it stands to its end."""
        by_store: dict[str, int] = {}
        if v.stand == "begonnen":
            by_store = await vorgaenge.ausfuehren(services, self.user_id, self.character_id, v)
            v.stand = "zurueckgenommen"
            await vorgaenge.speichern(services, self.user_id, self.character_id, v)
        out = RuecknahmeResult(op_id=v.op_id, art=v.art, zurueckgenommen=v.zurueckgenommen, by_store=by_store)
        if v.turn_id:
            stored, _ = await self._begin(services, v.turn_id, None)
            if stored is not None:
                out.turn = TurnResult.model_validate({**stored.body(), "replayed": True})
            else:
                request = PairTurnRequest(text=v.text or "", turn_id=v.turn_id, name=v.name, received_at=v.received_at)
                done = await self._run_chain(services, v.turn_id, request, None)
                if isinstance(done, TurnFailure):
                    out.failure = done
                else:
                    out.turn = done
        v.stand, v.ergebnis = "fertig", out
        await vorgaenge.speichern(services, self.user_id, self.character_id, v)
        return out

    # ------------------------------------------------------------------ read-only calls
    async def history(self, limit: int = 50) -> list[dict[str, Any]]:
        self._enter()
        try:
            services = self._ensure()
            return await session.load_turns(services.redis, self.user_id, self.character_id, limit)
        finally:
            self._leave()

    def status(self) -> dict[str, Any]:
        if self.user_id is None:
            raise registry.PairSuperseded(f"{self.name} serves no pair")
        return {"process": self.name, "token": self._token, "user_id": self.user_id, "character_id": self.character_id, "turns_here": self._turns,
                "busy": self._order.busy, "inflight": self._inflight,
                "idle_s": round(time.monotonic() - self._last, 2), "up_s": round(time.time() - self._started, 2),
                "pid": os.getpid(),
                # what must never load in a pair actor (it lives in the shared deployments)
                "heavy_imports": [m for m in HEAVY_MODULES if m in sys.modules]}


_SELBST_EINMAL = """
local was = redis.call('GET', KEYS[2])
if was then return tonumber(was) end
local n = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], n, 'EX', ARGV[1])
return n
"""
"""Count a self-trigger once per follow-up: the count, and under its mark the count it was given
(a follow-up delivered again is judged by that, not by later ones)."""


async def selbst_anstoss_zaehlen(redis, key: str, turn_id: str, ttl_s: int = 24 * 3600) -> int:
    """The count under `key` with the follow-up `turn_id`, counted once however often it comes."""
    return int(await redis.eval(_SELBST_EINMAL, 2, key, f"{key}:gezaehlt:{turn_id}", ttl_s))

PairActorRemote = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)(PairActor)
