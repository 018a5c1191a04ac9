"""An agent's declaration: one typed object per agent module (`AGENT = Agent(...)`), validated when
the module is imported, as a node's is (`pipeline/node.py`).

    AGENT = Agent(name="notizen", dispatch=dispatch_notizen, bedarf=("plan",))

What the agent is called (the planner's orders name it), its `dispatch(state, deps) ->
AgentResult`, the turn records it reads besides the stimulus (`bedarf`; seed 003,
`BaseAgent.invoke`), and two optional parts: `ergaenzen`, its rule for completing its pending
order from the human's next message, and `vorwaermen`, what its first order would load, run off
the turn's path. The registry (`pipeline/agents/__init__.py`) lists the declarations and checks
them together (`verzeichnis`) when it is imported.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Awaitable, Callable, Iterable

from core.errors import ConfigError
from core.state import RECORDS

Dispatch = Callable[[Any, Any], Awaitable[Any]]
"""`dispatch(state, deps) -> AgentResult`: the order carried out."""

Ergaenzen = Callable[[dict, list, str, str, datetime], "dict | None"]
"""`ergaenzen(parameter, fehlt, text, tz, jetzt)`: what the human's message, sent at `jetzt`,
supplies of the pending order's missing parameters, or None."""

BEDARF_STANDARD = ("plan",)
"""What an agent reads when its declaration names nothing else: its order (the stimulus always)."""


@dataclass(frozen=True, eq=False)
class Agent:
    name: str
    """The agent's name: the planner's orders name it, its results carry it."""
    dispatch: Dispatch
    """`async dispatch(state, deps) -> AgentResult`."""
    bedarf: tuple[str, ...] = BEDARF_STANDARD
    """The turn records it reads besides the stimulus; only those reach it."""
    ergaenzen: Ergaenzen | None = None
    """Its rule for its pending order (memory/ausstehender_auftrag.py); without one the planner's
    model alone completes it."""
    vorwaermen: Callable[[], None] | None = None
    """What its first order would load (a library, its language data), run once per process in a
    thread of its own (`pipeline.agents.vorwaermen_starten`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            self._fail("its name must be a word (letters, digits, _)")
        if not inspect.iscoroutinefunction(self.dispatch):
            self._fail(f"dispatch must be an async function, not {self.dispatch!r}")
        if isinstance(self.bedarf, str) or not isinstance(self.bedarf, (tuple, list)) or not self.bedarf:
            self._fail(f"bedarf must be a non-empty tuple of records, not {self.bedarf!r}")
        object.__setattr__(self, "bedarf", tuple(self.bedarf))
        unknown = [r for r in self.bedarf if r != "stimulus" and r not in RECORDS]
        if unknown:
            self._fail(f"bedarf names unknown records {unknown}")
        for part in ("ergaenzen", "vorwaermen"):
            value = getattr(self, part)
            if value is not None and not callable(value):
                self._fail(f"{part} must be a function or None, not {value!r}")

    def _fail(self, why: str):
        raise ConfigError(f"agent {self.name!r}: {why}")

    def __repr__(self) -> str:
        return f"Agent({self.name!r})"


def verzeichnis(declared: Iterable[Agent]) -> dict[str, Agent]:
    """The declared agents by name, checked together: each entry an `Agent`, no name twice.
    Raises ConfigError naming what is wrong."""
    out: dict[str, Agent] = {}
    for a in declared:
        if not isinstance(a, Agent):
            raise ConfigError(f"the agent registry lists {a!r}, which is no Agent declaration "
                              "(an agent module declares `AGENT = Agent(...)`)")
        if a.name in out:
            raise ConfigError(f"the agent registry lists two agents named {a.name!r}")
        out[a.name] = a
    return out


def schreibschluessel(state, agent: str) -> dict[str, str]:
    """The idempotency key of an agent's write in this turn: the turn and the step (the agent and
    how many agent results came before it). The same turn run again writes nothing twice."""
    n = len(state.plan.agent_results) if state.plan else 0
    return {"turn_id": state.stimulus.turn_id, "schritt": f"{agent}:{n}"}
