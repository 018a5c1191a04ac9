"""Arrival order for a pair's turns.

Ray does not promise that an async actor starts its calls in the order they were sent, so turns
carry an arrival number taken at the ingress (Redis INCR per pair, the same across ingress
replicas). The pair actor runs one turn at a time, always the lowest waiting number; when the
next number in sequence is missing it waits a short grace for it (a request still in flight)
before going on (a request that never came).
"""
from __future__ import annotations

import asyncio
import heapq
import itertools


class ArrivalOrder:
    def __init__(self, grace_s: float = 0.25):
        self.grace_s = grace_s
        self._waiting: list[tuple[float, int, asyncio.Future]] = []
        self._tie = itertools.count()
        self._running = False
        self._last: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._primed = False

    @property
    def busy(self) -> bool:
        return self._running

    @property
    def primed(self) -> bool:
        return self._primed

    def prime(self, last_started: int | None) -> None:
        """The last number a previous incarnation of the actor started, so a fresh actor knows which
        number comes next (turns queued during its creation may reach it in any order)."""
        self._primed = True
        if last_started is not None and self._last is None:
            self._last = float(last_started)

    @property
    def last(self) -> float | None:
        return self._last

    async def acquire(self, seq: int | None) -> None:
        loop = asyncio.get_running_loop()
        key = float("inf") if seq is None else float(seq)
        fut = loop.create_future()
        heapq.heappush(self._waiting, (key, next(self._tie), fut))
        self._dispatch(force=False)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted just as it was cancelled: pass the turn on
            else:
                self._waiting = [w for w in self._waiting if w[2] is not fut]
                heapq.heapify(self._waiting)
            raise

    def release(self) -> None:
        self._running = False
        self._dispatch(force=False)

    def _dispatch(self, force: bool) -> None:
        while self._waiting and self._waiting[0][2].cancelled():
            heapq.heappop(self._waiting)
        if self._running or not self._waiting:
            return
        key = self._waiting[0][0]
        in_sequence = self._last is None or key == float("inf") or key <= self._last + 1
        if not in_sequence and not force:
            if self._timer is None:
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(self.grace_s, self._grace_over)
            return
        if self._last is None and not force and key != float("inf") and len(self._waiting) == 1:
            # the first turn this actor sees: give a sibling that was sent earlier a moment to arrive
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(min(self.grace_s, 0.05), self._grace_over)
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        _, _, fut = heapq.heappop(self._waiting)
        self._running = True
        if key != float("inf"):
            self._last = key if self._last is None else max(self._last, key)
        fut.set_result(None)

    def _grace_over(self) -> None:
        self._timer = None
        self._dispatch(force=True)
