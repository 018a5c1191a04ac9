"""The chain runner: executes an ordered chain of nodes over the typed turn state.

A node is declared by one object (`pipeline/node.py`: `NODE = Node(name=…, reads=…, writes=…)` in
its module under `pipeline/nodes/`, with `@NODE.runs async def run(state, deps)` returning only the
records it writes); the chains (`pipeline/chains.py`) list those objects. Each node sees only the
records it declared; what it returns is checked against `writes` and assigned with validation. Where a node runs (in the pair actor or in
the stateless node deployment) is configuration (`Settings.remote_nodes`), not code.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from core.errors import ChainError
from core.wire import NodeRunRequest, NodeRunResult, TurnRecords
from pipeline import schedule
from pipeline.node import Node
from pipeline.schedule import SCHEDULES
from pipeline.services import Deps
from core.state import TurnState

log = logging.getLogger("novaberg.runner")

@dataclass(frozen=True)
class Loop:
    """`head`, then while `again(state)` holds and fewer than `max_rounds` rounds ran: `tail`, `head`."""

    head: tuple[Node, ...]
    tail: tuple[Node, ...]
    again: Callable[[TurnState], bool]
    max_rounds: int
    name: str

    def nodes(self) -> tuple[Node, ...]:
        return self.head + self.tail

    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes())


@dataclass(frozen=True)
class EarlyStart:
    """The early start of a node that declares `early_without`: its `early(state, deps)` runs once
    the steps it needs are done (not those writing the records it can do without), and the node
    waits for it (`pipeline/schedule.py`, `with_early_starts`)."""

    name: str

    def names(self) -> tuple[str, ...]:
        return (self.name,)


class NodeContractError(ChainError, RuntimeError):
    """A node returned a record it did not declare, or declared one that does not exist."""


class NodeFailed(ChainError, RuntimeError):
    def __init__(self, node: str, cause: BaseException):
        super().__init__(f"node {node} failed: {type(cause).__name__}: {cause}")
        self.node = node
        self.cause = cause

    def __reduce__(self):  # crosses Ray's process boundaries: rebuilt from its own arguments
        return type(self), (self.node, self.cause)


class NodeView:
    """The turn state as one node may see it: the records it declared in `reads`. Reading any other
    record is an error (never a silent None), and a node never assigns to the state: it returns
    the records it writes."""

    __slots__ = ("_state", "_reads", "_node")

    def __init__(self, state: TurnState, reads: Sequence[str], node: str = "?"):
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_reads", frozenset(reads))
        object.__setattr__(self, "_node", node)

    def __getattr__(self, name: str) -> Any:
        if name in self._reads:
            return getattr(self._state, name)
        if name in TurnState.model_fields:
            raise NodeContractError(f"node {self._node} reads the record {name!r} it did not declare in its reads")
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise NodeContractError(f"node {self._node} assigned {name!r}: a node returns the records it writes")

    def narrow(self, reads: Sequence[str], node: str) -> "NodeView":
        """The same state seen through fewer records: those of `reads` this view has (an agent's
        declared need within its node's reads)."""
        return NodeView(self._state, tuple(self._reads & set(reads)), node)


def _names(step) -> tuple[str, ...]:
    return step.names() if isinstance(step, (Loop, EarlyStart)) else (step.name,)


def steps_names(steps: Sequence) -> list[str]:
    """The names of the nodes of `steps`, in order (a loop's head, then its tail)."""
    return [n for step in steps for n in _names(step)]


def _access(step, nodes: Mapping[str, Node]) -> schedule.Access:
    if isinstance(step, EarlyStart):
        return schedule.early_access(nodes[step.name])
    if isinstance(step, Loop):
        return schedule.step_access(step.names(), nodes)
    return schedule.node_access(step)


def with_early_starts(chain: Sequence, nodes: Mapping[str, Node], remote: Sequence[str] = ()) -> list:
    """`chain` with an early start (`EarlyStart`) for each of its nodes that declares `early_without`,
    placed right after the last step it needs. A node run in the node deployment starts nothing
    early (its model call happens there)."""
    steps = list(chain)
    for step in list(steps):
        if isinstance(step, Loop) or step.name in remote or not step.early_without:
            continue
        at = steps.index(step)
        early = schedule.early_access(step)
        last = max((i for i in range(at) if _access(steps[i], nodes).conflicts(early)), default=-1)
        steps.insert(last + 1, EarlyStart(step.name))
    return steps


def view_for(state: TurnState, reads: Sequence[str], node: str = "?") -> NodeView:
    """The state as the node may see it: only the records it declared to read."""
    return NodeView(state, reads, node)


async def run_node(node: Node, state: TurnState, deps: Deps) -> dict[str, Any]:
    """One node through the contract the runner enforces: it sees its declared records, and what
    it returns is checked against `writes` and assigned to the state with validation."""
    update = await node.run(view_for(state, node.reads, node.name), deps)
    apply_update(state, node, update)
    return update


def apply_update(state: TurnState, node: Node, update: dict[str, Any]) -> None:
    extra = set(update) - set(node.writes)
    if extra:
        raise NodeContractError(f"node {node.name} returned undeclared records {sorted(extra)}")
    for key, value in update.items():
        setattr(state, key, value)  # validate_assignment checks the type


class ChainRunner:
    """Runs a chain over the turn state. `schedule="data"` (the default) runs each step as soon as
    the steps it depends on by data are done (`pipeline/schedule.py`), side by side where nothing
    conflicts; `"written"` runs them one after another in the written order — the same result."""

    def __init__(self, chain: Sequence = (), remote: Sequence[str] = (), nodes_handle=None,
                 name: str = "character", schedule: str = "data", ausklingen: bool = False):
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}: one of {SCHEDULES}")
        self.name = name
        self.schedule = schedule
        self.ausklingen = ausklingen
        """When a node fails, the nodes already running finish before the chain fails (the
        background chain: a node cut off between two of its writes could find the first on the
        job's next delivery and skip the second); a turn's chain cancels them, it ends at once."""
        bad = [s for s in chain if not isinstance(s, (Node, Loop))]
        if bad:
            raise TypeError(f"a chain lists Node objects and loops, not {bad!r}")
        self.nodes = list(chain)
        self._modules = {n.name: n for s in chain for n in (s.nodes() if isinstance(s, Loop) else (s,))}
        self._waits: tuple[tuple, list[frozenset[int]]] = ((), [])
        self.remote = set(remote)
        self._steps: tuple[tuple, list] = ((), [])
        names = {n for s in chain for n in _names(s)}
        unknown = self.remote - names
        if unknown:
            log.warning("runner: remote_nodes names nodes outside the chain: %s", sorted(unknown))
        if self.remote and nodes_handle is None:
            raise ValueError("remote nodes configured but no node deployment handle given")
        self.nodes_handle = nodes_handle

    async def run(self, state: TurnState, deps: Deps) -> TurnState:
        deps.trace.chain = self.name
        if self.schedule == "written":
            for step in self.nodes:
                await self._step(step, state, deps)
            return state
        tasks: list[asyncio.Task] = []
        begonnen: set[asyncio.Task] = set()  # the steps that started their node
        for step, before in zip(self.steps, self.waits_for):
            tasks.append(asyncio.ensure_future(self._after([tasks[i] for i in before], step, state, deps, begonnen)))
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:  # a failed node ends the turn: nothing after it runs
                if not (self.ausklingen and t in begonnen):
                    t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return state

    @property
    def steps(self) -> list:
        """The steps the data schedule runs: the chain's, and the early start of each node that can do
        without some of its records at first (`EarlyStart`; none in the written order); derived again
        when the steps change."""
        key = tuple(map(id, self.nodes))
        if self._steps[0] != key:
            early = self.schedule == "data"
            self._steps = (key, with_early_starts(self.nodes, self._modules, self.remote) if early else list(self.nodes))
        return self._steps[1]

    @property
    def waits_for(self) -> list[frozenset[int]]:
        """For each step, the earlier steps it waits for (by data); derived again when the steps change."""
        key = tuple(map(id, self.steps))
        if self._waits[0] != key:
            self._waits = (key, schedule.dependencies([_access(s, self._modules) for s in self.steps]))
        return self._waits[1]

    async def _after(self, before: list[asyncio.Task], step, state: TurnState, deps: Deps,
                     begonnen: set[asyncio.Task]) -> None:
        if before:  # shielded: a step cancelled while it waits must not cancel the steps it waits for
            await asyncio.gather(*map(asyncio.shield, before))
        begonnen.add(asyncio.current_task())
        await self._step(step, state, deps)

    async def _step(self, step, state: TurnState, deps: Deps) -> None:
        if isinstance(step, Loop):
            await self._loop(step, state, deps)
        elif isinstance(step, EarlyStart):
            self._early(self._modules[step.name], state, deps)
        else:
            await self._node(step, state, deps)

    @staticmethod
    def _early(node: Node, state: TurnState, deps: Deps) -> None:
        """A node's early start: it sees what it may read without the records it waits not for."""
        try:
            node.early(view_for(state, schedule.early_reads(node), node.name), deps)
        except Exception:
            log.warning("runner: fallback voraus_nicht_gestartet: %s started nothing early on turn %s of %s:%s; it "
                        "does all its work when it runs", node.name, deps.trace.turn_id, deps.trace.user_id,
                        deps.trace.character_id, exc_info=True)

    async def _loop(self, loop: Loop, state: TurnState, deps: Deps) -> None:
        for n in loop.head:
            await self._node(n, state, deps)
        runden = 0
        while loop.again(state):
            if runden >= loop.max_rounds:
                log.warning("runner: %s stopped at its limit of %d rounds (pair %s:%s, turn %s)", loop.name,
                            loop.max_rounds, deps.trace.user_id, deps.trace.character_id, deps.trace.turn_id)
                deps.trace.decision(loop.name, f"{loop.name}.grenze", "erreicht", {"runden": runden},
                                    threshold=loop.max_rounds)
                break
            runden += 1
            for n in loop.tail + loop.head:
                await self._node(n, state, deps)

    async def _node(self, node: Node, state: TurnState, deps: Deps) -> None:
        trace = deps.trace
        name = node.name
        t0 = time.perf_counter()
        start_ms = (t0 - trace.started) * 1000
        trace.node_start_ms.setdefault(name, start_ms)
        trace.emit("node_started", node=name, at_ms=round(start_ms, 2))
        try:
            if name in self.remote:
                apply_update(state, node, await self._run_remote(node, state, deps))
            else:
                await run_node(node, state, deps)
        except NodeContractError:
            raise
        except Exception as e:  # a failed node ends the turn; nothing is committed
            log.exception("runner: node %s failed on turn %s of %s:%s", name, trace.turn_id,
                          trace.user_id, trace.character_id)
            raise NodeFailed(name, e) from e
        ms = (time.perf_counter() - t0) * 1000
        if not node.self_logged:
            trace.node_row(name, ms, start_ms=start_ms)
        trace.emit("node_finished", node=name, ms=round(ms, 2), at_ms=round(start_ms + ms, 2))
        _observe_node(name, ms)

    async def _run_remote(self, node: Node, state: TurnState, deps: Deps) -> dict[str, Any]:
        records = TurnRecords(**{**{r: getattr(state, r) for r in node.reads if getattr(state, r) is not None},
                                 "stimulus": state.stimulus})
        out: NodeRunResult = await self.nodes_handle.run_node.remote(
            NodeRunRequest(node=node.name, records=records, chain=deps.trace.chain))
        trace = deps.trace
        trace.add_rows(out.rows)
        trace.llm_ms += out.llm_ms
        trace.embed_ms += out.embed_ms
        trace.llm_calls += out.llm_calls
        trace.prompt_tokens += out.prompt_tokens
        trace.completion_tokens += out.completion_tokens
        trace.system_prompts.update(out.system_prompts)
        return out.update.set_records()


def schedule_deps(chain: Sequence, nodes: Mapping[str, Node]) -> list[frozenset[int]]:
    """The steps each step of `chain` (early starts included) waits for, from the nodes' declared
    reads and writes."""
    return schedule.dependencies([_access(s, nodes) for s in chain])


def _observe_node(name: str, ms: float) -> None:
    from pipeline import metrics

    metrics.node_latency(name, ms)
