"""The chain runner: executes an ordered chain of nodes over the typed turn state.

A node is a module in `pipeline/nodes/` with NAME, READS, WRITES and `async def run(state, deps)`
returning only the records it writes. Each node sees only the records it declared; what it returns
is checked against WRITES and assigned with validation. Where a node runs (in the pair actor or in
the stateless node deployment) is configuration (`Settings.remote_nodes`), not code.
"""
from __future__ import annotations

import importlib
import logging
import time
from types import ModuleType
from typing import Any, Sequence

from pipeline.services import Deps
from pipeline.state import RECORDS, TurnState

log = logging.getLogger("novaberg.runner")

# The first chain of the spine; the full 24-node chain replaces it node by node.
CHARACTER_CHAIN: tuple[str, ...] = ("db_zugriff", "enricher", "responder", "dispatcher")


class NodeContractError(RuntimeError):
    """A node returned a record it did not declare, or declared one that does not exist."""


class NodeFailed(RuntimeError):
    def __init__(self, node: str, cause: BaseException):
        super().__init__(f"node {node} failed: {type(cause).__name__}: {cause}")
        self.node = node
        self.cause = cause


def load_node(name: str) -> ModuleType:
    mod = importlib.import_module(f"pipeline.nodes.{name}")
    for attr in ("NAME", "READS", "WRITES", "run"):
        if not hasattr(mod, attr):
            raise NodeContractError(f"node module {name} lacks {attr}")
    bad = [r for r in (*mod.READS, *mod.WRITES) if r != "stimulus" and r not in RECORDS]
    if bad or "stimulus" in mod.WRITES:
        raise NodeContractError(f"node {name} declares unknown or read-only records: {bad or ['stimulus']}")
    return mod


def view_for(state: TurnState, reads: Sequence[str]) -> TurnState:
    """The state as the node may see it: only the records it declared to read."""
    return TurnState.model_construct(**{r: getattr(state, r) for r in reads})


def apply_update(state: TurnState, node: ModuleType, update: dict[str, Any]) -> None:
    extra = set(update) - set(node.WRITES)
    if extra:
        raise NodeContractError(f"node {node.NAME} returned undeclared records {sorted(extra)}")
    for key, value in update.items():
        setattr(state, key, value)  # validate_assignment checks the type


class ChainRunner:
    def __init__(self, chain: Sequence[str] = CHARACTER_CHAIN, remote: Sequence[str] = (), nodes_handle=None):
        self.nodes = [load_node(n) for n in chain]
        self.remote = set(remote)
        unknown = self.remote - set(chain)
        if unknown:
            log.warning("runner: remote_nodes names nodes outside the chain: %s", sorted(unknown))
        if self.remote and nodes_handle is None:
            raise ValueError("remote nodes configured but no node deployment handle given")
        self.nodes_handle = nodes_handle

    async def run(self, state: TurnState, deps: Deps) -> TurnState:
        trace = deps.trace
        for node in self.nodes:
            name = node.NAME
            trace.emit("node_started", node=name)
            t0 = time.perf_counter()
            try:
                if name in self.remote:
                    update = await self._run_remote(node, state, deps)
                else:
                    update = await node.run(view_for(state, node.READS), deps)
                apply_update(state, node, update)
            except NodeContractError:
                raise
            except Exception as e:  # a failed node ends the turn; nothing is committed
                log.exception("runner: node %s failed on turn %s of %s:%s", name, trace.turn_id,
                              trace.user_id, trace.character_id)
                raise NodeFailed(name, e) from e
            ms = (time.perf_counter() - t0) * 1000
            if not getattr(node, "SELF_LOGGED", False):
                trace.node_row(name, ms)
            trace.emit("node_finished", node=name, ms=round(ms, 2))
            _observe_node(name, ms)
        return state

    async def _run_remote(self, node: ModuleType, state: TurnState, deps: Deps) -> dict[str, Any]:
        view = view_for(state, node.READS)
        payload = {r: getattr(view, r).model_dump(mode="json") for r in node.READS if getattr(view, r) is not None}
        payload["stimulus"] = state.stimulus.model_dump(mode="json")
        out = await self.nodes_handle.run_node.remote(node.NAME, payload)
        deps.trace.add_rows(out["rows"])
        deps.trace.llm_ms += out["llm_ms"]
        deps.trace.embed_ms += out["embed_ms"]
        fields = TurnState.model_fields
        return {k: fields[k].annotation.__args__[0].model_validate(v) if v is not None else None
                for k, v in out["update"].items()}


def _observe_node(name: str, ms: float) -> None:
    from pipeline import metrics

    metrics.node_latency(name, ms)
