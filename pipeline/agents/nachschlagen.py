"""What the agents `wissen` and `dateien` share (seed 001, *Query Rewriting*: the services that get
`such_vektor` as their declared need): the turn's search key out of the memory record their
declaration names, and the result of a look-up, whose hits the planner writes into [AUFGABE]
(`fundstellen`; seed 004 §3.5: the agent's result reaches the responder as the planner's block)."""
from __future__ import annotations

import logging

from core.state import AgentResult

log = logging.getLogger("novaberg.agent.nachschlagen")

AKTION = "suchen"
"""The one action of a look-up agent."""


def suchschluessel(state, deps, agent: str) -> list[float] | None:
    """The turn's search key (`MemoryRecord.such_vektor`), or None with the named fallback
    `kein_suchschluessel`: the turn searched no memory (the enricher's pre-check found the pair's
    KZG, LZG, library and files empty), so there is nothing near a key to read."""
    key = state.memory.such_vektor if state.memory is not None else None
    if key is None:
        log.info("agent %s: fallback kein_suchschluessel: this turn searched no memory, nothing is read", agent)
        deps.trace.decision("agent_dispatch", f"agent_dispatch.{agent}_schluessel", "kein_suchschluessel", {})
    return key


def nachgesehen(agent: str, ids: list, beschreibung: str, fundstellen: str) -> AgentResult:
    """A finished look-up: the hits' ids, what was done in a few words, and the hits as text for
    [AUFGABE] (empty: nothing found)."""
    return AgentResult(agent_name=agent, status="abgeschlossen", ergebnis={
        "aktion": AKTION, "treffer": ids, "beschreibung": beschreibung, "fundstellen": fundstellen})
