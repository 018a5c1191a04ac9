"""Agent registry (seed 003): every folder `pipeline/agents/{name}/` with a `dispatch.py` that
defines `dispatch_{name}(state, deps) -> AgentResult` is an agent. No central if/elif: a new
agent is a new folder."""
from __future__ import annotations

import importlib
import logging
import pkgutil
import threading
from datetime import datetime
from functools import lru_cache
from typing import Awaitable, Callable

log = logging.getLogger("novaberg.agents")

Dispatch = Callable[..., Awaitable]


@lru_cache(maxsize=1)
def registry() -> dict[str, Dispatch]:
    return {name: fn for name, (fn, _) in _agents().items()}


@lru_cache(maxsize=1)
def _agents() -> dict[str, tuple[Dispatch, Callable[[], None] | None]]:
    """Every agent's dispatch and, where its dispatch.py defines one, its `vorwaermen()`."""
    found: dict[str, tuple[Dispatch, Callable[[], None] | None]] = {}
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
        found[info.name] = (fn, getattr(mod, "vorwaermen", None))
    return found


_gewaermt: set[str] = set()
_gewaermt_lock = threading.Lock()


def vorwaermen_starten() -> list[threading.Thread]:
    """Each agent's `vorwaermen()` (what its first order would load: a library, its language
    data), once per process, in a thread of its own: the planner starts them beside its model
    call on a turn that may delegate, so the first order of a pair's process does not pay them on
    the turn's path. Returns the threads started now (none when all ran before)."""
    threads = []
    with _gewaermt_lock:
        for name, (_, warm) in _agents().items():
            if warm is None or name in _gewaermt:
                continue
            _gewaermt.add(name)
            t = threading.Thread(target=_vorwaermen, args=(name, warm), name=f"vorwaermen-{name}", daemon=True)
            t.start()
            threads.append(t)
    return threads


def _vorwaermen(name: str, warm: Callable[[], None]) -> None:
    try:
        warm()
    except Exception:
        log.warning("agents: fallback kalt_beim_ersten_auftrag: %s could not warm up; its first order loads "
                    "what it needs on the turn's path", name, exc_info=True)


def get_dispatch(name: str) -> Dispatch | None:
    return registry().get(name)


Ergaenzen = Callable[[dict, list, str, str, datetime], "dict | None"]


def ergaenzung(name: str) -> Ergaenzen | None:
    """An agent's rule for its pending order (memory/ausstehender_auftrag.py), where its
    dispatch.py defines one: `ergaenzen(parameter, fehlt, text, tz, jetzt)` returns what the
    human's message, sent at `jetzt`, supplies of the missing parameters, or None. An agent without one is completed by the
    planner's model alone."""
    if name not in registry():
        return None
    return getattr(importlib.import_module(f"{__name__}.{name}.dispatch"), "ergaenzen", None)


BEDARF_STANDARD = ("plan",)
"""What an agent gets when its dispatch.py declares no `BEDARF`: its order (the stimulus always)."""


def bedarf(name: str) -> tuple[str, ...]:
    """The turn records an agent declared it needs (`BEDARF` in its dispatch.py; seed 003,
    `BaseAgent.invoke`): only those reach it, besides the stimulus."""
    if name not in registry():
        return BEDARF_STANDARD
    return tuple(getattr(importlib.import_module(f"{__name__}.{name}.dispatch"), "BEDARF", BEDARF_STANDARD))


def schreibschluessel(state, agent: str) -> dict[str, str]:
    """The idempotency key of an agent's write in this turn: the turn and the step (the agent and
    how many agent results came before it). The same turn run again writes nothing twice."""
    n = len(state.plan.agent_results) if state.plan else 0
    return {"turn_id": state.stimulus.turn_id, "schritt": f"{agent}:{n}"}
