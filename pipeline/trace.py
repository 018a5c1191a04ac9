"""What one turn records while it runs: node rows and decision entries for `pipeline_log`,
events for streaming clients, and the time spent in LLM and embedding calls."""
from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timezone
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, TypeVar

from core.result import TurnTimings
from core.wire import NodeLogRow, SwitchLogRow

log = logging.getLogger("novaberg.pipeline")

T = TypeVar("T")


@dataclass(frozen=True)
class Slot(Generic[T]):
    """A place in one turn where work started early waits for the node that takes it: a node's
    turn-start or early-start work for its own `run` (`enricher.REWRITE`), or a read one node starts
    and another awaits (`enricher.SESSION`, which the router takes). A slot is a module constant the
    taker imports, typed by what it holds — never a string typed at the place of use; `of(...)` keys
    one per argument (the embedding of a text, the goals of a pair)."""

    name: str
    parts: tuple = ()

    def of(self, *parts: Any) -> "Slot[T]":
        return Slot(self.name, parts)



class TurnTrace:
    def __init__(self, user_id: str, character_id: str, turn_id: str,
                 events: asyncio.Queue | None = None):
        self.user_id = user_id
        self.character_id = character_id
        self.turn_id = turn_id
        self.rows: list[NodeLogRow | SwitchLogRow] = []
        """The turn's pipeline_log rows, in order (`seq` is the place in this list)."""
        self.events = events
        self.llm_ms = 0.0
        self.embed_ms = 0.0
        self.llm_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.node_ms: dict[str, float] = {}
        self.node_start_ms: dict[str, float] = {}
        """When each node first started, since the turn began (the reply starts with the responder)."""
        self.node_llm_ms: dict[str, float] = {}
        """Each node's time waiting for its model calls, as the pair actor saw them (the node's
        time less this is its own code; this less the LLM deployment's time is the call's hop)."""
        self.started = time.perf_counter()
        self._slots: dict[Slot, Any] = {}
        """What the turn's slots hold: lives exactly as long as this turn, inside the pair actor."""
        self.system_prompts: dict[str, str] = {}
        """The system message each node last sent to the LLM in this turn, by node (the leak guard
        compares the reply with what the model was told; a remote node's comes back with its result)."""
        self._after_first_call: Callable[[], Any] | None = None
        """What starts once this turn's first model call is on its way (the pair actor's `vorab`
        reads): the call goes out first, the reads beside it."""
        self.chain = "character"
        """Which chain is running: "human" or "character" (set by the runner)."""

    def start_once(self, slot: Slot[T], make: Callable[[], Awaitable[T]]) -> asyncio.Future[T]:
        """Start `make()` in `slot` once in this turn and return its future: a read a node starts
        at the turn's start (`vorab`), or the first of the two chains, is awaited by whoever asks
        later. A failure is raised to whoever awaits it; one that nobody awaits (the turn ended
        before the node) is not reported as an exception never retrieved."""
        fut = self._slots.get(_slot(slot))
        if fut is None:
            fut = asyncio.ensure_future(make())
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._slots[slot] = fut
        return fut

    def started_in(self, slot: Slot[T]) -> asyncio.Future[T] | None:
        """The future `start_once` started in `slot` in this turn, or None."""
        return self._slots.get(_slot(slot))

    def put(self, slot: Slot[T], value: T) -> None:
        """Hold `value` in `slot` for the rest of the turn."""
        self._slots[_slot(slot)] = value

    def get(self, slot: Slot[T]) -> T | None:
        """What `slot` holds in this turn, or None."""
        return self._slots.get(_slot(slot))

    def _now(self) -> str:
        return datetime.now(timezone.utc).isoformat()

    def emit(self, event: str, **data: Any) -> None:
        if self.events is not None:
            self.events.put_nowait({"event": event, **data})

    def node_row(self, node: str, duration_ms: float, outcome: str = "ok", start_ms: float | None = None) -> None:
        """A node's row; `start_ms` (since the turn began) and its end show which nodes overlapped."""
        self.node_ms[node] = self.node_ms.get(node, 0.0) + duration_ms
        inputs = {} if start_ms is None else {"start_ms": round(start_ms, 2), "end_ms": round(start_ms + duration_ms, 2)}
        self.rows.append(NodeLogRow(seq=len(self.rows), node=node, outcome=outcome,
                                    duration_ms=round(duration_ms, 3), inputs=inputs, at=self._now()))

    def decision(self, node: str, entscheidung: str, outcome: str, inputs: dict[str, Any] | None = None,
                 threshold: float | None = None) -> None:
        """A decision entry (art = switch): which branch a node took, on what, against what."""
        self.rows.append(SwitchLogRow(seq=len(self.rows), node=node, entscheidung=entscheidung, outcome=outcome,
                                      inputs=inputs or {}, threshold=threshold, at=self._now()))
        log.info("decision %s = %s (pair %s:%s, turn %s)", entscheidung, outcome, self.user_id,
                 self.character_id, self.turn_id)

    def add_rows(self, rows: list[NodeLogRow | SwitchLogRow]) -> None:
        """Rows recorded by a node that ran in a node deployment."""
        for r in rows:
            self.rows.append(r.model_copy(update={"seq": len(self.rows)}))

    def decisions(self, entscheidung: str | None = None) -> list[SwitchLogRow]:
        """The turn's decision entries so far, in order; with `entscheidung`, that decision's only."""
        return [r for r in self.rows if isinstance(r, SwitchLogRow)
                and (entscheidung is None or r.entscheidung == entscheidung)]

    def node_runs(self) -> list[NodeLogRow]:
        """The turn's node rows so far, in order."""
        return [r for r in self.rows if isinstance(r, NodeLogRow)]

    def prompt_sent(self, node: str, messages: list[dict[str, str]]) -> None:
        """Remember the system message of a call (see `system_prompts`)."""
        system = "\n\n".join(m["content"] for m in messages if m.get("role") == "system")
        if system:
            self.system_prompts[node] = system

    def after_first_call(self, start: Callable[[], Any]) -> None:
        """Run `start` once this turn's first model call has been sent (or at `call_sent`
        from whoever needs it to have run by then)."""
        self._after_first_call = start

    def call_sent(self) -> None:
        """A model call has been sent (or the reads are needed now): what waited for it runs, once."""
        start, self._after_first_call = self._after_first_call, None
        if start is None:
            return
        try:
            start()
        except Exception:  # the call that triggered it is not at fault; each node starts its own reads then
            log.exception("turn %s: fallback vorab_nicht_gestartet: the turn's early reads did not start; "
                          "each node reads when it runs", self.turn_id)

    def llm_done(self, ms: float, prompt_tokens: int, completion_tokens: int, node: str | None = None) -> None:
        self.llm_ms += ms
        if node is not None:
            self.node_llm_ms[node] = self.node_llm_ms.get(node, 0.0) + ms
        self.llm_calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens

    def timings(self) -> TurnTimings:
        """The turn's time so far (the result's `timings`)."""
        total = (time.perf_counter() - self.started) * 1000
        return TurnTimings(total_ms=round(total, 2), llm_ms=round(self.llm_ms, 2), embed_ms=round(self.embed_ms, 2),
                           llm_calls=self.llm_calls, prompt_tokens=self.prompt_tokens,
                           completion_tokens=self.completion_tokens,
                           nodes_ms={k: round(v, 2) for k, v in self.node_ms.items()},
                           nodes_start_ms={k: round(v, 2) for k, v in self.node_start_ms.items()},
                           nodes_llm_ms={k: round(v, 2) for k, v in self.node_llm_ms.items()})


def _slot(slot: Slot) -> Slot:
    if not isinstance(slot, Slot):
        raise TypeError(f"a turn's slots are keyed by Slot constants, not {slot!r}")
    return slot
