"""Agent registry (seed 003): every folder `pipeline/agents/{name}/` with a `dispatch.py` that
defines `dispatch_{name}(state, deps) -> AgentResult` is an agent. No central if/elif: a new
agent is a new folder."""
from __future__ import annotations

import importlib
import logging
import pkgutil
from functools import lru_cache
from typing import Awaitable, Callable

log = logging.getLogger("novaberg.agents")

Dispatch = Callable[..., Awaitable]


@lru_cache(maxsize=1)
def registry() -> dict[str, Dispatch]:
    found: dict[str, Dispatch] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.ispkg:
            continue
        try:
            mod = importlib.import_module(f"{__name__}.{info.name}.dispatch")
        except ImportError as e:
            log.warning("agents: %s has no usable dispatch.py (%s); not registered", info.name, e)
            continue
        fn = getattr(mod, f"dispatch_{info.name}", None)
        if fn is None:
            log.warning("agents: %s/dispatch.py defines no dispatch_%s; not registered", info.name, info.name)
            continue
        found[info.name] = fn
    return found


def get_dispatch(name: str) -> Dispatch | None:
    return registry().get(name)


def schreibschluessel(state, agent: str) -> dict[str, str]:
    """The idempotency key of an agent's write in this turn: the turn and the step (the agent and
    how many agent results came before it). The same turn run again writes nothing twice."""
    n = len(state.plan.agent_results) if state.plan else 0
    return {"turn_id": state.stimulus.turn_id, "schritt": f"{agent}:{n}"}
