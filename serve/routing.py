"""Routing a model call to the LLM replica that holds its pair's prompt prefix.

Every node's prompt for a pair starts with the same long prefix as its previous call; an engine
keeps such prefixes in its cache, but only on the replica that served them. `PairRouter` is Ray
Serve's request router for the LLM deployment (`llm_routing = "pair"`): it keys each call by
`ChatRequest.pair` (the pair travels with the request, never in the prompt) and sends it to the
pair's replica by bounded-load consistent hashing — a ring of points per replica, the pair's
replica the first one its hash meets; a replica holding more than `bound` × its share of the calls
in flight passes the call on to the next replica on the ring, so no replica takes more than about
1.25 × its share and a pair's overflow, too, lands on one stable second replica. Below `FLOOR` calls
in flight a replica takes the call whatever its share: a turn's calls of one pair fired at once stay
on the pair's replica when few calls are in flight. When the pair's
replica does not take the call (its queue is full, it died) the call goes to the less loaded of two
replicas drawn at random (Serve's power of two choices), logged as `fallback paar_ausweich`; a
replica that leaves hands its pairs to the next one on the ring (`fallback paar_replica_weg`).

The hashing (`PairRing`, `capacity`, `choose`) is plain Python; `PairRouter` puts it into Serve."""
from __future__ import annotations

import bisect
import hashlib
import logging
import math
from collections import Counter, OrderedDict
from typing import Any, Iterable, Mapping

from ray.serve._private.request_router.pow_2_router import PowerOfTwoChoicesRequestRouter
from ray.serve.request_router import LocalityMixin, MultiplexMixin, PendingRequest, ReplicaID, RequestRouter, \
    RunningReplica

log = logging.getLogger("novaberg.llm")

BOUND = 1.25
"""The most a replica may hold of the calls in flight, as a multiple of its share."""
FLOOR = 4
"""The calls a replica may hold before its bounded share counts: about the model calls one turn of
a pair fires at once. Without it the bound is tiny when few calls are in flight (⌈1.25 × 2 / 4⌉ = 1
with one call out of four replicas) and a turn's second parallel call already went to another
replica, which had never seen the pair's prefix; with many calls in flight the share is above it and
bounds the load alone."""
POINTS = 64
"""Points per replica on the ring (more: shares closer to even)."""
ROUTER_PATH = "serve.routing.PairRouter"
"""The router as Serve's config names it (`request_router_class`)."""
REMEMBERED = 4096
"""Calls being routed whose first choice this router remembers at most (a call's entry goes when
the call is done)."""


def _point(text: str) -> int:
    """A point on the ring: the same in every process (unlike `hash`)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


class PairRing:
    """Consistent hashing of pairs onto replicas: `POINTS` points per replica; a pair's order of
    replicas is the order in which its hash, walking the ring, meets them. A replica that comes or
    goes moves only the pairs next to its points."""

    def __init__(self, replicas: Iterable[str], points: int = POINTS):
        self.replicas = tuple(sorted(set(replicas)))
        ring = sorted((_point(f"{r}#{i}"), r) for r in self.replicas for i in range(points))
        self._points = [p for p, _ in ring]
        self._owners = [r for _, r in ring]

    def order(self, pair: str) -> list[str]:
        """All replicas, the pair's own first, then the others as its walk meets them."""
        if not self._owners:
            return []
        start = bisect.bisect(self._points, _point(pair))
        seen: dict[str, None] = {}
        for k in range(len(self._owners)):
            seen.setdefault(self._owners[(start + k) % len(self._owners)])
            if len(seen) == len(self.replicas):
                break
        return list(seen)


def capacity(loads: Mapping[str, int], bound: float = BOUND, floor: int = FLOOR) -> int:
    """The calls a replica may hold when the next call comes: `bound` × the mean with that call, and
    never fewer than `floor`."""
    return max(1, floor, math.ceil(bound * (sum(loads.values()) + 1) / max(len(loads), 1)))


def choose(ring: PairRing, pair: str, loads: Mapping[str, int], bound: float = BOUND,
           floor: int = FLOOR) -> tuple[str, int]:
    """The replica for the pair's next call and its place in the pair's order (0: the pair's own):
    the first replica on the pair's walk below `capacity`. `loads`: calls in flight per replica."""
    cap = capacity(loads, bound, floor)
    order = ring.order(pair)
    for place, replica in enumerate(order):
        if loads.get(replica, 0) < cap:
            return replica, place
    return order[0], 0  # not reached: the least loaded replica is below the mean


def pair_of(request: PendingRequest | None) -> tuple[bool, str | None]:
    """(whether the call is a model call, the pair it belongs to): `ChatRequest.pair` of its first
    argument; a model call without a pair answers (True, None), any other call (False, None)."""
    arg = request.args[0] if request is not None and request.args else None
    pair = getattr(arg, "pair", None)
    return hasattr(arg, "messages"), pair if isinstance(pair, str) and pair else None


class PairRouter(LocalityMixin, MultiplexMixin, RequestRouter):
    """The LLM deployment's router by pair (module docstring). Calls without a pair (the model's
    name, the counters, health) go by Serve's power of two choices."""

    def initialize_state(self, bound: float = BOUND, points: int = POINTS, floor: int = FLOOR, **_: Any) -> None:
        self._bound = bound
        self._floor = floor
        self._ring_points = points
        self._ring: PairRing | None = None
        self._in_flight: Counter[ReplicaID] = Counter()
        self._first: OrderedDict[str, str] = OrderedDict()
        """Per call being routed: the replica chosen first ("" once its fallback is logged)."""
        self._without_pair = False
        self._fallbacks = 0
        """Calls that went to the fallback; the log names the 1st, 2nd, 4th, 8th … (not every call)."""

    def _ring_over(self, ids: Iterable[str]) -> PairRing:
        ids = tuple(sorted(ids))
        if self._ring is None or self._ring.replicas != ids:
            gone = set(self._ring.replicas if self._ring else ()) - set(ids)
            for replica in sorted(gone):
                log.warning("llm: fallback paar_replica_weg: replica %s left the LLM deployment; its pairs go to "
                            "the next replica on the ring", replica)
            self._ring = PairRing(ids, self._ring_points)
        return self._ring

    async def _known(self, replicas: list[RunningReplica]) -> None:
        """Every replica's calls in flight known before the bound is drawn: those without an entry in
        Serve's queue-length cache are asked (as Ray Serve LLM's prefix-aware router asks them).
        Unknown, a replica counted as empty: the mean fell, and the pair's own replica — the only
        one this caller had asked — seemed over its share and lost the call."""
        if not self._use_replica_queue_len_cache:
            return
        unknown = [r for r in replicas if self._replica_queue_len_cache.get(r.replica_id) is None]
        if unknown:
            await self._probe_queue_lens(unknown, 0)

    def _load(self, replica: RunningReplica) -> int:
        cached = self._replica_queue_len_cache.get(replica.replica_id) if self._use_replica_queue_len_cache else None
        return max(cached or 0, self._in_flight[replica.replica_id])

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        """First the pair's replica alone; asked again for the same call (that replica did not
        take it), the pair's replica and after it the power of two choices."""
        model_call, pair = pair_of(pending_request)
        if pair is None or not candidate_replicas:
            if model_call and pair is None and not self._without_pair:
                self._without_pair = True
                log.warning("llm: fallback ohne_paar: a model call carries no pair (ChatRequest.pair); such calls "
                            "go by power of two choices")
            return await PowerOfTwoChoicesRequestRouter.choose_replicas(self, candidate_replicas, pending_request)
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        await self._known(candidate_replicas)
        chosen, _ = choose(self._ring_over(by_id), pair, {u: self._load(r) for u, r in by_id.items()}, self._bound,
                           self._floor)
        call = pending_request.metadata.internal_request_id
        if call not in self._first:
            self._first[call] = chosen
            while len(self._first) > REMEMBERED:
                self._first.popitem(last=False)
            return [[by_id[chosen]]]
        first, self._first[call] = self._first[call], ""  # logged once per call
        if first:
            self._fallbacks += 1
            if self._fallbacks & (self._fallbacks - 1) == 0:
                why = "is gone" if first not in by_id else "did not take it (full or not answering)"
                log.warning("llm: fallback paar_ausweich: pair %s's replica %s %s; the call goes to the less loaded "
                            "of two (%d calls so far)", pair, first, why, self._fallbacks)
        fallback = await PowerOfTwoChoicesRequestRouter.choose_replicas(self, candidate_replicas, pending_request)
        return [[by_id[chosen]], *fallback]

    def on_send_request(self, replica_id: ReplicaID) -> None:
        super().on_send_request(replica_id)
        self._in_flight[replica_id] += 1

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        super().on_request_completed(replica_id, internal_request_id)
        self._first.pop(internal_request_id, None)
        if self._in_flight[replica_id] > 0:
            self._in_flight[replica_id] -= 1

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self._in_flight.pop(replica_id, None)
