"""Scheduling by data: which step of a chain waits for which.

A chain is written in the order the seeds give (NODES.md). Each node declares the records it
reads and writes (`Node.reads`, `writes`) and, where it touches a store inside the turn, the stores it
reads and writes (`store_reads`, `store_writes`: the operation's module, e.g. `timeline`, or the Redis
area, e.g. `session`). A step waits for every earlier step it conflicts with — one writes what
the other reads or writes, on a record or on a store — and for nothing else, so steps without a
conflict run side by side and the turn's result is the one the written order gives. A node that
sets `waits_for_all` (the dispatcher, which commits the turn) waits for every step before it. A loop
(planner ⇄ agent dispatch, tribunal ⇄ corrector) is one step: its nodes stay a loop. A node that
declares `early_without` (records or stores it can do without at first) gets an early start as a step
of its own, placed right after the last step it needs (`early_access`); the node itself waits for it and
decides in `run` whether what started early holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

if TYPE_CHECKING:
    from pipeline.node import Node

SCHEDULES = ("data", "written")
"""`data`: steps run as soon as the steps they depend on are done; `written`: one after another
in the written order (the reference the data schedule must equal)."""


@dataclass(frozen=True)
class Access:
    """What one step reads and writes: records of the turn state and stores."""

    reads: frozenset[str]
    writes: frozenset[str]
    store_reads: frozenset[str]
    store_writes: frozenset[str]
    barrier: bool = False
    """The step waits for every earlier step (the commit: a turn with a failed node commits nothing)."""

    def conflicts(self, later: "Access") -> bool:
        """Whether `later` (written after this step) must wait for it."""
        return bool(later.barrier or self.writes & (later.reads | later.writes) or self.reads & later.writes
                    or self.store_writes & (later.store_reads | later.store_writes)
                    or self.store_reads & later.store_writes)


def node_access(node: Node) -> Access:
    reads = frozenset(r for r in node.reads if r != "stimulus")  # the stimulus is never written
    if node.early_without:
        reads |= {early_mark(node.name)}  # the node waits for its early start, where the chain has one
    return Access(reads, frozenset(node.writes), frozenset(node.store_reads), frozenset(node.store_writes),
                  node.waits_for_all)


def early_mark(name: str) -> str:
    """What a node's early start "writes" and the node reads: the node waits for it."""
    return f"early:{name}"


def early_reads(node: Node) -> tuple[str, ...]:
    """What a node's early start may read: its reads but the records named in `early_without`."""
    return tuple(r for r in node.reads if r not in node.early_without)


def early_access(node: Node) -> Access:
    """A node's early start (`early_without`, its `early(state, deps)`): it waits for the writers of
    what it reads but the records and stores named there, writes nothing of the turn, and the node
    waits for it."""
    reads = frozenset(r for r in early_reads(node) if r != "stimulus")
    stores = frozenset(s for s in node.store_reads if s not in node.early_without)
    return Access(reads, frozenset({early_mark(node.name)}), stores, frozenset())


def step_access(names: Sequence[str], nodes: Mapping[str, Node]) -> Access:
    """A step's access: one node's, or the union over a loop's nodes."""
    parts = [node_access(nodes[n]) for n in names]
    return Access(*(frozenset().union(*(getattr(p, f) for p in parts))
                    for f in ("reads", "writes", "store_reads", "store_writes")), any(p.barrier for p in parts))


def dependencies(accesses: Sequence[Access]) -> list[frozenset[int]]:
    """For each step, the earlier steps it waits for."""
    return [frozenset(i for i in range(j) if accesses[i].conflicts(accesses[j])) for j in range(len(accesses))]


def critical_path(deps: Sequence[frozenset[int]], cost: Callable[[int], float]) -> float:
    """The longest chain of dependent steps, summed by `cost` (e.g. LLM calls × latency)."""
    finish: list[float] = []
    for j, before in enumerate(deps):
        finish.append(max((finish[i] for i in before), default=0.0) + cost(j))
    return max(finish, default=0.0)


def waves(deps: Sequence[frozenset[int]]) -> list[list[int]]:
    """The steps grouped by how many dependent steps lie before them (what runs side by side)."""
    level: list[int] = []
    for before in deps:
        level.append(max((level[i] + 1 for i in before), default=0))
    return [[j for j, lv in enumerate(level) if lv == k] for k in range(max(level, default=-1) + 1)]
