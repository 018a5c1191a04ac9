"""Agent registry (seed 003): every agent module `pipeline/agents/{name}/dispatch.py` declares
`AGENT = Agent(...)` (`pipeline/agents/agent.py`), and `DECLARED` below lists them. No central
if/elif: a new agent is a new folder with its declaration, and one line here. Importing this
module checks the list (`verzeichnis`): a declaration missing its parts, or a name twice, is a
ConfigError here, never a turn's surprise."""
from __future__ import annotations

import logging
import threading
from typing import Callable

from pipeline.agents.agent import (BEDARF_STANDARD, Agent, Dispatch, Ergaenzen, schreibschluessel,
                                   verzeichnis)
from pipeline.agents.charakter.dispatch import AGENT as _CHARAKTER
from pipeline.agents.dateien.dispatch import AGENT as _DATEIEN
from pipeline.agents.direktiven.dispatch import AGENT as _DIREKTIVEN
from pipeline.agents.notizen.dispatch import AGENT as _NOTIZEN
from pipeline.agents.timeline.dispatch import AGENT as _TIMELINE
from pipeline.agents.wissen.dispatch import AGENT as _WISSEN

__all__ = ["AGENTS", "Agent", "BEDARF_STANDARD", "DECLARED", "Dispatch", "Ergaenzen", "bedarf", "ergaenzung",
           "get_dispatch", "registry", "schreibschluessel", "vorwaermen_starten"]

log = logging.getLogger("novaberg.agents")

DECLARED: tuple[Agent, ...] = (_CHARAKTER, _DIREKTIVEN, _NOTIZEN, _TIMELINE, _WISSEN, _DATEIEN)
"""Every agent, in the order the planner knows them."""

AGENTS: dict[str, Agent] = verzeichnis(DECLARED)
"""The declared agents by name, checked when this module is imported."""

_DISPATCH: dict[str, Dispatch] = {name: a.dispatch for name, a in AGENTS.items()}


def registry() -> dict[str, Dispatch]:
    """Every agent's dispatch by its name."""
    return _DISPATCH


def get_dispatch(name: str) -> Dispatch | None:
    return registry().get(name)


def ergaenzung(name: str) -> Ergaenzen | None:
    """An agent's rule for its pending order (memory/ausstehender_auftrag.py), where its
    declaration has one: `ergaenzen(parameter, fehlt, text, tz, jetzt)` returns what the human's
    message, sent at `jetzt`, supplies of the missing parameters, or None. An agent without one is
    completed by the planner's model alone."""
    a = AGENTS.get(name)
    return a.ergaenzen if a is not None else None


def bedarf(name: str) -> tuple[str, ...]:
    """The turn records an agent declared it needs (`Agent.bedarf`; seed 003, `BaseAgent.invoke`):
    only those reach it, besides the stimulus."""
    a = AGENTS.get(name)
    return a.bedarf if a is not None else BEDARF_STANDARD


_gewaermt: set[str] = set()
_gewaermt_lock = threading.Lock()


def vorwaermen_starten() -> list[threading.Thread]:
    """Each agent's `vorwaermen()` (what its first order would load: a library, its language
    data), once per process, in a thread of its own: the planner starts them beside its model
    call on a turn that may delegate, so the first order of a pair's process does not pay them on
    the turn's path. Returns the threads started now (none when all ran before)."""
    threads = []
    with _gewaermt_lock:
        for name, a in AGENTS.items():
            if a.vorwaermen is None or name in _gewaermt:
                continue
            _gewaermt.add(name)
            t = threading.Thread(target=_vorwaermen, args=(name, a.vorwaermen), name=f"vorwaermen-{name}",
                                 daemon=True)
            t.start()
            threads.append(t)
    return threads


def _vorwaermen(name: str, warm: Callable[[], None]) -> None:
    try:
        warm()
    except Exception:
        log.warning("agents: fallback kalt_beim_ersten_auftrag: %s could not warm up; its first order loads "
                    "what it needs on the turn's path", name, exc_info=True)
