"""Activating a pair: the handle of its one actor, bound to it under the registry's fencing token
(actors/registry.py), and the reserve of warm spares activations take their processes from.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray

from actors.pair import PairActorRemote
from actors.registry import (BESITZ, HOST_PREFIX, LEBT, RESERVE, RESERVE_LOCK, Eintrag, PairSuperseded,
                             beanspruchen, eintrag, fassung, freigeben, host_name, pair_name, reserve_key, sperren)
from core.settings import Settings

log = logging.getLogger("novaberg.registry")


def handle_by_name(name: str, settings: Settings):
    """The live actor of that name in the namespace, or None."""
    try:
        return ray.get_actor(name, namespace=settings.namespace)
    except ValueError:
        return None


def host_starten(settings: Settings, name: str | None = None):
    """A pair process of no pair yet (detached: it must not die with whoever started it)."""
    placement: dict[str, Any] = {"resources": settings.pair_resources} if settings.pair_resources else {}
    if settings.pair_spread:
        placement["scheduling_strategy"] = "SPREAD"
    # no task events: Ray would record every call of every pair and send them to the GCS for its
    # state API, which nothing here reads — as Serve does for its replicas
    name = name or host_name()
    return name, PairActorRemote.options(name=name, namespace=settings.namespace, lifetime="detached",
                                         enable_task_events=False, **placement
                                         ).remote(settings, name)


async def _ersatz(redis, settings: Settings, pair: str) -> tuple[str, Any]:
    """A spare from the reserve, or a process started now (fallback `kein_ersatz`)."""
    while (raw := await redis.lpop(reserve_key())) is not None:
        name = raw.decode() if isinstance(raw, bytes) else raw
        h = await asyncio.to_thread(handle_by_name, name, settings)
        if h is not None:
            return name, h
        log.warning("registry: spare %s in the reserve is gone; taking the next", name)
    log.warning("registry: fallback kein_ersatz: no warm spare for %s; starting its process now", pair)
    return await asyncio.to_thread(host_starten, settings)  # a creation blocks: not on the caller's loop


def _weg(h) -> None:
    """A process no one will use (a spare that failed or was left over): it goes."""
    try:
        ray.kill(h, no_restart=True)
    except Exception:
        pass


async def _binden(h, user_id: str, character_id: str, token: int) -> None:
    """Bind, waiting out a process that is unavailable for a moment (a restart, a slow reply): only
    a process that is certainly dead is passed over, a live one is never replaced."""
    for attempt in range(5):
        try:
            await h.binden.remote(user_id, character_id, token)
            return
        except ray.exceptions.ActorUnavailableError:
            if attempt == 4:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))


async def aktivieren(redis, settings: Settings, user_id: str, character_id: str) -> Any:
    """The handle of the pair's one actor, bound to the pair: the registry's live actor, or a
    spare claimed for it when the registry names none or a dead one. Raises PairSuperseded when no
    actor could be bound (the pair is being erased, or the races did not settle)."""
    pair = pair_name(user_id, character_id)
    tot = (ray.exceptions.ActorDiedError, PairSuperseded)
    for _ in range(6):
        stand = await eintrag(redis, pair)
        if stand is not None and (h := await asyncio.to_thread(handle_by_name, stand.aktor, settings)) is not None:
            try:
                await _binden(h, user_id, character_id, stand.token)
                return h
            except tot as e:
                log.warning("registry: %s's actor %s did not take it (%s); claiming the pair anew", pair,
                            stand.aktor, type(e).__name__)
        name, h = await _ersatz(redis, settings, pair)
        try:
            won, neu = await beanspruchen(redis, pair, stand, name)
        except BaseException:
            _weg(h)  # neither claimed nor back in the reserve
            raise
        if not won:  # another caller activated the pair meanwhile (or an erasure locks it): the spare goes back
            await redis.rpush(reserve_key(), name)
            continue
        try:
            await _binden(h, user_id, character_id, neu.token)
            return h
        except tot as e:  # killed during the hand-over: the next round claims past it
            log.warning("registry: %s's new actor %s failed while taking it (%s)", pair, name, type(e).__name__)
            _weg(h)
    raise PairSuperseded(f"{pair}: no actor could be bound to it")


def pair_actor(settings: Settings, user_id: str, character_id: str):
    """The actor the registry holds for the pair (for operators' tools and tests; never
    activates). Raises ValueError when none is registered or it is gone, as `ray.get_actor` does."""
    from redis import Redis

    r = Redis.from_url(settings.redis_url)
    try:
        stand = Eintrag.lesen(r.hget(BESITZ, pair_name(user_id, character_id)))
    finally:
        r.close()
    if stand is None:
        raise ValueError(f"no actor serves {pair_name(user_id, character_id)}")
    return ray.get_actor(stand.aktor, namespace=settings.namespace)


async def anhalten(redis, settings: Settings, im_bereich) -> list[str]:
    """Stop the pair actors of the pairs `im_bereich(user_id, character_id)` accepts (erasure):
    each pair is locked against new claims first (for `registry.SPERRE_S`, or until the erasure
    unlocks it with `entsperren`), then its entry goes and its process is killed. Returns the pairs
    locked (a process stopped for each that was alive)."""
    gesperrt = []
    for k, raw in (await redis.hgetall(BESITZ)).items():
        pair = k.decode() if isinstance(k, bytes) else k
        parts = pair.split(":")
        stand = Eintrag.lesen(raw)
        if len(parts) != 3 or stand is None or not im_bereich(parts[1], parts[2]):
            continue
        await sperren(redis, pair)
        gesperrt.append(pair)
        await freigeben(redis, pair, stand)
        if (h := await asyncio.to_thread(handle_by_name, stand.aktor, settings)) is not None:
            await asyncio.to_thread(_weg, h)
    return gesperrt


# ---------------------------------------------------------------------- the reserve
async def auffuellen(redis, settings: Settings, pruefen: bool = False) -> int:
    """Start spares until the reserve holds `pair_spares`, at most `pair_spares_parallel` at once,
    each connected before it is offered (one caller at a time, by a lock with a lease). `pruefen`:
    names of spares that died are dropped from the reserve first. Returns how many were added."""
    mein = host_name()  # the lock's value: only its holder releases it
    if settings.pair_spares <= 0:
        return 0
    await lebenszeichen(redis, settings)  # every round, lock or not: a keeper of another version may hold it
    if not await redis.set(RESERVE_LOCK, mein, nx=True, ex=120):
        return 0
    try:
        key = reserve_key()
        if pruefen:
            await alte_fassungen_raeumen(redis, settings)
        for raw in await redis.lrange(key, 0, -1) if pruefen else ():
            name = raw.decode() if isinstance(raw, bytes) else raw
            if await asyncio.to_thread(handle_by_name, name, settings) is None:
                await redis.lrem(key, 0, raw)
        fehlen = settings.pair_spares - await redis.llen(key)
        added = 0
        while fehlen > 0:
            n = min(fehlen, settings.pair_spares_parallel)
            added += await _spares_starten(redis, settings, n)
            await redis.expire(RESERVE_LOCK, 120)
            await lebenszeichen(redis, settings)  # a refill may outlast the mark
            fehlen -= n
        return added
    finally:
        await redis.eval(_LOCK_FREI, 1, RESERVE_LOCK, mein)


async def lebenszeichen(redis, settings: Settings) -> None:
    """This version's reserve has a keeper: its spares stay (for three checks, renewed by each)."""
    await redis.set(LEBT + fassung(), "1", ex=max(int(settings.pair_spares_check_s * 3), 30))


async def reserven(redis) -> dict[str, str]:
    """Every reserve list in Redis by its version ("" for the list of a release before versions)."""
    out = {RESERVE: ""} if await redis.type(RESERVE) in (b"list", "list") else {}
    async for raw in redis.scan_iter(match=RESERVE + ":*", count=100):
        key = raw.decode() if isinstance(raw, bytes) else raw
        if key != RESERVE_LOCK and await redis.type(key) in (b"list", "list"):
            out[key] = key[len(RESERVE) + 1:]
    return out


async def alte_fassungen_raeumen(redis, settings: Settings) -> int:
    """The reserves of other versions of the code whose keepers are all gone (a deployment of new
    code replaced them): their spares go, unused (fallback `alte_fassung`). A version whose keeper
    still lives (a rolling update) keeps its reserve. Returns the spares that went."""
    weg = 0
    for key, alt in (await reserven(redis)).items():
        if alt == fassung() or (alt and await redis.exists(LEBT + alt)):
            continue
        namen = []
        while (n := await redis.lpop(key)) is not None:
            namen.append(n.decode() if isinstance(n, bytes) else n)
        for name in namen:
            if (h := await asyncio.to_thread(handle_by_name, name, settings)) is not None:
                _weg(h)
        if namen:
            log.warning("registry: fallback alte_fassung: %d spares of code version %s, whose keepers are gone, "
                        "go unused (this version: %s)", len(namen), alt, fassung())
        weg += len(namen)
    return weg


_LOCK_FREI = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


async def _spares_starten(redis, settings: Settings, n: int) -> int:
    """`n` spares, started in threads (an actor's creation blocks its caller, and the caller is an
    ingress's loop), each offered once connected; one that does not come up within 120 s goes."""
    made = await asyncio.gather(*(asyncio.to_thread(host_starten, settings) for _ in range(n)),
                                return_exceptions=True)
    batch = [m for m in made if not isinstance(m, BaseException)]
    for m in made:
        if isinstance(m, BaseException):
            log.warning("registry: a spare could not be started: %s", m)
    warm = await asyncio.gather(*(asyncio.wait_for(h.vorwaermen.remote(), 120) for _, h in batch),
                                return_exceptions=True)
    added = 0
    for (name, h), ok in zip(batch, warm):
        if isinstance(ok, BaseException):
            log.warning("registry: spare %s did not come up (%s); it goes", name, type(ok).__name__)
            _weg(h)
            continue
        await redis.rpush(reserve_key(), name)
        added += 1
    return added


async def reserve_stand(redis) -> dict[str, int]:
    """The registry as the dashboard and the operator status show it: processes bound to a pair,
    and warm spares waiting for the next activation."""
    bound, ready = await asyncio.gather(redis.hlen(BESITZ), redis.llen(reserve_key()))
    return {"bound": int(bound), "spares_ready": int(ready)}


class Nachfuellen:
    """The reserve's keeper in a process with an event loop (an ingress replica): refills after
    every activation and every `pair_spares_check_s`."""

    def __init__(self, redis_factory, settings: Settings):
        self._redis_factory, self._settings = redis_factory, settings
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()

    def anstossen(self, wecken: bool = True) -> None:
        """Start the keeper (needs a running loop); `wecken`: refill now (a spare was just taken)."""
        if self._settings.pair_spares <= 0:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        if wecken:
            self._wake.set()

    async def _run(self) -> None:
        pruefen = True
        while True:
            try:
                self._wake.clear()  # a wake-up during the refill is kept for the next round
                await auffuellen(await self._redis_factory(), self._settings, pruefen=pruefen)
                try:
                    await asyncio.wait_for(self._wake.wait(), self._settings.pair_spares_check_s)
                    pruefen = False
                    await self._nach_dem_turn()
                except asyncio.TimeoutError:
                    pruefen = True
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("registry: refilling the reserve failed; trying again", exc_info=True)
                await asyncio.sleep(1.0)

    async def _nach_dem_turn(self) -> None:
        """A spare was just taken, for a turn that runs now: a process started beside it would take
        the turn's CPU, so the refill waits `pair_spares_refill_delay_s` — unless the reserve has
        fallen below half its size."""
        redis = await self._redis_factory()
        if await redis.llen(reserve_key()) * 2 >= self._settings.pair_spares:
            await asyncio.sleep(self._settings.pair_spares_refill_delay_s)


def alle_stoppen(settings: Settings) -> None:
    """Every pair process of the namespace and the registry's keys (the deployment goes)."""
    for a in ray.util.list_named_actors(all_namespaces=True):
        if a["namespace"] == settings.namespace and a["name"].startswith(HOST_PREFIX):
            if (h := handle_by_name(a["name"], settings)) is not None:
                ray.kill(h, no_restart=True)
    from redis import Redis

    try:
        r = Redis.from_url(settings.redis_url)
        keys = [k for pattern in (RESERVE + ":*", LEBT + "*") for k in r.scan_iter(match=pattern, count=100)]
        r.delete(BESITZ, RESERVE_LOCK, RESERVE, *keys)
        r.close()
    except Exception:
        log.warning("registry: the registry's keys could not be cleared", exc_info=True)
