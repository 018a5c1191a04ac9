"""A node's declaration: one typed object per node module (`NODE = Node(...)`), validated when the
module is imported, so a misspelt field or an unknown record is an error there, never a feature
silently switched off.

    NODE = Node(name="verfasser", reads=("stimulus", "pair", "memory"), writes=("verfasser",))

    @NODE.runs
    async def run(state, deps) -> dict: ...

What a node may read and write (`reads`, `writes`: records of the turn state), which stores it
touches (`store_reads`, `store_writes`: for the data schedule, `pipeline/schedule.py`), and its
starts ahead of its place: an early start (`early_without`: the records or stores it can do
without at first; `@NODE.early_start` binds the function) and reads or a model call at the turn's
start (`at_start_reads`, `model_call_at_start`; `@NODE.at_turn_start`). The chains
(`pipeline/chains.py`) list these objects and check at import that every one is complete.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Awaitable, Callable, Mapping

from core.errors import ChainError
from core.state import RECORDS

Run = Callable[[Any, Any], Awaitable[dict[str, Any]]]
"""`run(state, deps)`: the records the node writes, by name."""


class NodeDeclarationError(ChainError, ValueError):
    """A node's declaration names an unknown record, contradicts itself, or lacks a function."""


@dataclass(frozen=True, eq=False)
class Node:
    name: str
    reads: tuple[str, ...]
    """The records the node sees (`stimulus` included); reading another one is an error."""
    writes: tuple[str, ...]
    """The records the node returns; returning another one is an error."""
    store_reads: tuple[str, ...] = ()
    """The stores it reads (the operation's module, e.g. `timeline`, or a Redis part: `session`)."""
    store_writes: tuple[str, ...] = ()
    optional_reads: Mapping[str, str] = field(default_factory=dict)
    """Reads the human chain may leave unwritten, each with its reason (the character chain writes them)."""
    early_without: tuple[str, ...] = ()
    """Records or stores its early start can do without: it starts once the rest is there."""
    at_start_reads: tuple[str, ...] = ()
    """The store reads it starts at the turn's start (nothing the turn runs before it writes them)."""
    model_call_at_start: bool = False
    """Its model call starts at the turn's start (from its `at_turn_start` function)."""
    waits_for_all: bool = False
    """It runs after every step before it (the dispatcher: the commit)."""
    self_logged: bool = False
    """It writes its own pipeline_log row (the dispatcher's must be in the job it commits)."""
    run: Run | None = None
    early: Callable[[Any, Any], Awaitable[Any]] | None = None
    """`early(state, deps)`: the early start's work; the node's `run` finds its result in the trace."""
    at_start: Callable[[Any, Any], None] | None = None
    """`at_start(deps, stimulus)`: starts the reads (and the model call) at the turn's start."""

    def __post_init__(self) -> None:
        for name in ("reads", "writes", "store_reads", "store_writes", "early_without", "at_start_reads"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, (tuple, list)):
                self._fail(f"{name} must be a tuple of names, not {value!r}")
            object.__setattr__(self, name, tuple(value))
        object.__setattr__(self, "optional_reads", MappingProxyType(dict(self.optional_reads)))
        unknown = [r for r in (*self.reads, *self.writes) if r != "stimulus" and r not in RECORDS]
        if unknown:
            self._fail(f"unknown records {unknown}")
        if "stimulus" in self.writes:
            self._fail("the stimulus is read-only")
        checks = (("optional_reads", set(self.optional_reads), set(self.reads)),
                  ("early_without", set(self.early_without), set(self.reads) | set(self.store_reads)),
                  ("at_start_reads", set(self.at_start_reads), set(self.store_reads)))
        for name, given, allowed in checks:
            if not given <= allowed:
                self._fail(f"{name} names {sorted(given - allowed)}, which it does not read")

    def _fail(self, why: str):
        raise NodeDeclarationError(f"node {self.name}: {why}")

    @property
    def module(self) -> str:
        """The module its `run` lives in (the contract check reads its source)."""
        return self.run.__module__ if self.run else ""

    def _bind(self, slot: str, fn: Callable) -> Callable:
        if getattr(self, slot) is not None:
            self._fail(f"{slot} bound twice")
        object.__setattr__(self, slot, fn)
        return fn

    def runs(self, fn: Run) -> Run:
        """Decorator: the node's `run(state, deps)`."""
        return self._bind("run", fn)

    def early_start(self, fn: Callable) -> Callable:
        """Decorator: the early start's `early(state, deps)` (needs `early_without`)."""
        return self._bind("early", fn)

    def at_turn_start(self, fn: Callable) -> Callable:
        """Decorator: `at_start(deps, stimulus)`, run when the turn starts."""
        return self._bind("at_start", fn)

    def check_complete(self) -> None:
        """Every function its declaration promises is bound (the chains call it at import)."""
        if self.run is None:
            self._fail("no `run` (decorate it with @NODE.runs)")
        if self.early_without and self.early is None:
            self._fail("early_without without an early start (@NODE.early_start)")
        if (self.at_start_reads or self.model_call_at_start) and self.at_start is None:
            self._fail("reads or a model call at the turn's start without @NODE.at_turn_start")

    def __repr__(self) -> str:
        return f"Node({self.name!r})"
