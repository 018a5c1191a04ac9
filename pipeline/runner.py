"""The chain runner: executes an ordered chain of nodes over the typed turn state.

A node is a module in `pipeline/nodes/` with NAME, READS, WRITES and `async def run(state, deps)`
returning only the records it writes. Each node sees only the records it declared; what it returns
is checked against WRITES and assigned with validation. Where a node runs (in the pair actor or in
the stateless node deployment) is configuration (`Settings.remote_nodes`), not code.
"""
from __future__ import annotations

import asyncio
from functools import lru_cache
import logging
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Sequence

from core.errors import ChainError
from pipeline import schedule
from pipeline.nodes import node_module
from pipeline.schedule import SCHEDULES
from pipeline.services import Deps
from pipeline.state import RECORDS, Stimulus, TurnState

log = logging.getLogger("novaberg.runner")

@dataclass(frozen=True)
class Loop:
    """`head`, then while `weiter(state)` holds and fewer than `max_runden` rounds ran: `tail`, `head`."""

    head: tuple[str, ...]
    tail: tuple[str, ...]
    weiter: Callable[[TurnState], bool]
    max_runden: int
    name: str

    def names(self) -> tuple[str, ...]:
        return self.head + self.tail


@dataclass(frozen=True)
class Voraus:
    """The early start of a node that declares `VORAUS_OHNE`: its `voraus(state, deps)` runs once
    the steps it needs are done (not those writing the records it can do without), and the node
    waits for it (`pipeline/schedule.py`, `mit_voraus`)."""

    name: str

    def names(self) -> tuple[str, ...]:
        return (self.name,)


def _agent_requested(state: TurnState) -> bool:
    return bool(state.plan and state.plan.agent_name)


def _correction_due(state: TurnState) -> bool:
    return bool(state.urteil and not state.urteil.bestanden)


PLANNER_LOOP = Loop(("planner",), ("agent_dispatch",), _agent_requested, max_runden=4, name="planner_schleife")
TRIBUNAL_LOOP = Loop(("tribunal", "evaluate"), ("corrector",), _correction_due, max_runden=2, name="tribunal_schleife")

# NODES.md: the human's message is perceived and remembered first (its salience and the
# dispatcher's writes travel in the background job the character chain's dispatcher commits).
HUMAN_CHAIN: tuple = ("perzeption", "enricher", "ei_calc")
CHARACTER_CHAIN: tuple = (
    "db_zugriff", "ei_calc", "enricher", "emotionale_gravitation", "reducer", "sachlage", "erinnerungsanker",
    "router", PLANNER_LOOP, "gv_node", "haltungsraum", "verfasser", "responder", "thinker", TRIBUNAL_LOOP,
    "leckschutz", "perzeption_assistant", "ei_calc_persist", "dispatcher",
)
# Run by the outbox worker after the reply left: never on the reply's path.
BACKGROUND_CHAIN: tuple = ("salience", "zielbildung", "praegung", "selbstbild", "aufgriff", "zusammenfassung")


class NodeContractError(ChainError, RuntimeError):
    """A node returned a record it did not declare, or declared one that does not exist."""


class NodeFailed(ChainError, RuntimeError):
    def __init__(self, node: str, cause: BaseException):
        super().__init__(f"node {node} failed: {type(cause).__name__}: {cause}")
        self.node = node
        self.cause = cause


def load_node(name: str) -> ModuleType:
    mod = node_module(name)
    for attr in ("NAME", "READS", "WRITES", "run"):
        if not hasattr(mod, attr):
            raise NodeContractError(f"node module {name} lacks {attr}")
    bad = [r for r in (*mod.READS, *mod.WRITES) if r != "stimulus" and r not in RECORDS]
    if bad or "stimulus" in mod.WRITES:
        raise NodeContractError(f"node {name} declares unknown or read-only records: {bad or ['stimulus']}")
    return mod


class NodeView:
    """The turn state as one node may see it: the records it declared in READS. Reading any other
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
            raise NodeContractError(f"node {self._node} reads the record {name!r} it did not declare in READS")
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise NodeContractError(f"node {self._node} assigned {name!r}: a node returns the records it writes")


def _names(step) -> tuple[str, ...]:
    if isinstance(step, (Loop, Voraus)):
        return step.names()
    return (step,) if isinstance(step, str) else (step.NAME,)


def _access(step, modules) -> schedule.Access:
    if isinstance(step, Voraus):
        return schedule.voraus_access(modules[step.name])
    if isinstance(step, (str, Loop)):
        return schedule.step_access(_names(step), modules)
    return schedule.node_access(step)


def mit_voraus(chain: Sequence, modules, remote: Sequence[str] = ()) -> list:
    """`chain` with an early start (`Voraus`) for each of its nodes that declares `VORAUS_OHNE`,
    placed right after the last step it needs. A node run in the node deployment starts nothing
    early (its model call happens there)."""
    steps = list(chain)
    for step in list(steps):
        if isinstance(step, Loop):
            continue
        mod = modules[step] if isinstance(step, str) else step
        if mod.NAME in remote or not getattr(mod, "VORAUS_OHNE", ()):
            continue
        at = steps.index(step)
        early = schedule.voraus_access(mod)
        last = max((i for i in range(at) if _access(steps[i], modules).conflicts(early)), default=-1)
        steps.insert(last + 1, Voraus(mod.NAME))
    return steps


@lru_cache(maxsize=None)
def _vorab_nodes(remote: tuple[str, ...]) -> tuple[ModuleType, ...]:
    """The in-process nodes of the two chains that define `vorab`, found once per process."""
    names = dict.fromkeys(n for chain in (HUMAN_CHAIN, CHARACTER_CHAIN) for step in chain for n in _names(step))
    return tuple(mod for name, mod in ((n, load_node(n)) for n in names) if name not in remote and hasattr(mod, "vorab"))


def vorab_starten(deps: Deps, stimulus: Stimulus, remote: Sequence[str] = ()) -> list[str]:
    """At a turn's start, every node of the two chains that defines `vorab(deps, stimulus)` starts
    the reads it needs nothing of this turn for (declared as `VORAB_READS`; nothing the turn runs
    before the node writes them), so they run beside perzeption's model call instead of on the
    reply's path. A node in the node deployment (`remote`) starts nothing: its reads happen there.
    Returns the nodes that started reads."""
    mods = _vorab_nodes(tuple(remote))
    for mod in mods:
        mod.vorab(deps, stimulus)
    return [mod.NAME for mod in mods]


def view_for(state: TurnState, reads: Sequence[str], node: str = "?") -> NodeView:
    """The state as the node may see it: only the records it declared to read."""
    return NodeView(state, reads, node)


async def run_node(node: ModuleType, state: TurnState, deps: Deps) -> dict[str, Any]:
    """One node through the contract the runner enforces: it sees its declared records, and what
    it returns is checked against WRITES and assigned to the state with validation."""
    update = await node.run(view_for(state, node.READS, node.NAME), deps)
    apply_update(state, node, update)
    return update


def apply_update(state: TurnState, node: ModuleType, update: dict[str, Any]) -> None:
    extra = set(update) - set(node.WRITES)
    if extra:
        raise NodeContractError(f"node {node.NAME} returned undeclared records {sorted(extra)}")
    for key, value in update.items():
        setattr(state, key, value)  # validate_assignment checks the type


class ChainRunner:
    """Runs a chain over the turn state. `schedule="daten"` (the default) runs each step as soon as
    the steps it depends on by data are done (`pipeline/schedule.py`), side by side where nothing
    conflicts; `"reihe"` runs them one after another in the written order — the same result."""

    def __init__(self, chain: Sequence = CHARACTER_CHAIN, remote: Sequence[str] = (), nodes_handle=None,
                 name: str = "character", schedule: str = "daten"):
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}: one of {SCHEDULES}")
        self.name = name
        self.schedule = schedule
        self.nodes = [s if isinstance(s, Loop) else load_node(s) for s in chain]
        self._modules = {n: load_node(n) for s in chain for n in _names(s)}
        self._waits: tuple[tuple, list[frozenset[int]]] = ((), [])
        self.remote = set(remote)
        self._steps: tuple[tuple, list] = ((), [])
        names = {n for s in chain for n in _names(s)}
        unknown = self.remote - names
        if unknown:
            log.warning("runner: remote_nodes names nodes outside the chain: %s", sorted(unknown))
        if self.remote and nodes_handle is None:
            raise ValueError("remote nodes configured but no node deployment handle given")
        if tuple(chain) in (HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN):
            _check_chains()
        self.nodes_handle = nodes_handle

    async def run(self, state: TurnState, deps: Deps) -> TurnState:
        deps.trace.chain = self.name
        if self.schedule == "reihe":
            for step in self.nodes:
                await self._step(step, state, deps)
            return state
        tasks: list[asyncio.Task] = []
        for step, before in zip(self.steps, self.waits_for):
            tasks.append(asyncio.ensure_future(self._after([tasks[i] for i in before], step, state, deps)))
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:  # a failed node ends the turn: nothing after it runs
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return state

    @property
    def steps(self) -> list:
        """The steps the data schedule runs: the chain's, and the early start of each node that can do
        without some of its records at first (`Voraus`; none in the written order); derived again
        when the steps change."""
        key = tuple(map(id, self.nodes))
        if self._steps[0] != key:
            early = self.schedule == "daten"
            self._steps = (key, mit_voraus(self.nodes, self._modules, self.remote) if early else list(self.nodes))
        return self._steps[1]

    @property
    def waits_for(self) -> list[frozenset[int]]:
        """For each step, the earlier steps it waits for (by data); derived again when the steps change."""
        key = tuple(map(id, self.steps))
        if self._waits[0] != key:
            self._waits = (key, schedule.dependencies([_access(s, self._modules) for s in self.steps]))
        return self._waits[1]

    async def _after(self, before: list[asyncio.Task], step, state: TurnState, deps: Deps) -> None:
        if before:
            await asyncio.gather(*before)
        await self._step(step, state, deps)

    async def _step(self, step, state: TurnState, deps: Deps) -> None:
        if isinstance(step, Loop):
            await self._loop(step, state, deps)
        elif isinstance(step, Voraus):
            self._voraus(self._modules[step.name], state, deps)
        else:
            await self._node(step, state, deps)

    @staticmethod
    def _voraus(node: ModuleType, state: TurnState, deps: Deps) -> None:
        """A node's early start: it sees what it may read without the records it waits not for."""
        try:
            node.voraus(view_for(state, schedule.voraus_reads(node), node.NAME), deps)
        except Exception:
            log.warning("runner: fallback voraus_nicht_gestartet: %s started nothing early on turn %s of %s:%s; it "
                        "does all its work when it runs", node.NAME, deps.trace.turn_id, deps.trace.user_id,
                        deps.trace.character_id, exc_info=True)

    async def _loop(self, loop: Loop, state: TurnState, deps: Deps) -> None:
        for n in loop.head:
            await self._node(self._modules[n], state, deps)
        runden = 0
        while loop.weiter(state):
            if runden >= loop.max_runden:
                log.warning("runner: %s stopped at its limit of %d rounds (pair %s:%s, turn %s)", loop.name,
                            loop.max_runden, deps.trace.user_id, deps.trace.character_id, deps.trace.turn_id)
                deps.trace.decision(loop.name, f"{loop.name}.grenze", "erreicht", {"runden": runden},
                                    threshold=loop.max_runden)
                break
            runden += 1
            for n in loop.tail + loop.head:
                await self._node(self._modules[n], state, deps)

    async def _node(self, node: ModuleType, state: TurnState, deps: Deps) -> None:
        trace = deps.trace
        name = node.NAME
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
        if not getattr(node, "SELF_LOGGED", False):
            trace.node_row(name, ms, start_ms=start_ms)
        trace.emit("node_finished", node=name, ms=round(ms, 2), at_ms=round(start_ms + ms, 2))
        _observe_node(name, ms)

    async def _run_remote(self, node: ModuleType, state: TurnState, deps: Deps) -> dict[str, Any]:
        payload = {r: getattr(state, r).model_dump(mode="json") for r in node.READS if getattr(state, r) is not None}
        payload["stimulus"] = state.stimulus.model_dump(mode="json")
        out = await self.nodes_handle.run_node.remote(node.NAME, payload, deps.trace.chain)
        deps.trace.add_rows(out["rows"])
        deps.trace.llm_ms += out["llm_ms"]
        deps.trace.embed_ms += out["embed_ms"]
        # a replica of a release before these keys (a rolling update) reports none
        calls, prompt_tokens, completion_tokens = out.get("usage", (0, 0, 0))
        deps.trace.llm_calls += calls
        deps.trace.prompt_tokens += prompt_tokens
        deps.trace.completion_tokens += completion_tokens
        deps.trace.system_prompts.update(out.get("system_prompts", {}))
        fields = TurnState.model_fields
        return {k: fields[k].annotation.__args__[0].model_validate(v) if v is not None else None
                for k, v in out["update"].items()}


def schedule_deps(chain: Sequence, modules: dict[str, ModuleType]) -> list[frozenset[int]]:
    """The steps each step of `chain` (early starts included) waits for, from the nodes' declared
    reads and writes."""
    return schedule.dependencies([_access(s, modules) for s in chain])


_CHECKED: set[tuple] = set()
"""The declarations the chains were found sound with in this process (a pair actor builds two
runners: the check runs once, and again only when a declaration changed)."""


def _check_chains() -> None:
    """The product's chains, checked when one is built: every read has a writer upstream, every
    written record a reader (pipeline/contract.py; the field-level check runs in the test suite)."""
    from pipeline import contract
    from pipeline.nodes.dispatcher import BACKGROUND_RECORDS

    names = {n for c in (HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN) for s in c
             for n in _names(s)}
    key = (tuple(BACKGROUND_RECORDS),) + tuple(sorted((n, tuple(m.READS), tuple(m.WRITES))
                                                      for n in names for m in (load_node(n),)))
    if key in _CHECKED:
        return
    gaps = contract.record_check(HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN, BACKGROUND_RECORDS)
    if gaps:
        raise NodeContractError("the chains break the node contract: " + "; ".join(map(str, gaps)))
    _CHECKED.add(key)


def _observe_node(name: str, ms: float) -> None:
    from pipeline import metrics

    metrics.node_latency(name, ms)
