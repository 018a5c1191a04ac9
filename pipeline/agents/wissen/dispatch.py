"""Library agent (seed 001, *Query Rewriting*: the service `wissen`, which gets `such_vektor` as
its declared need): looks up the pair's library with the turn's search key — the library's own
query and threshold, at most five entries (`pipeline.dienste.wissen`) — and hands the entries on
for [AUFGABE]."""
from __future__ import annotations

from pipeline import dienste
from pipeline.agents.agent import Agent
from pipeline.agents.nachschlagen import nachgesehen, suchschluessel
from core.state import AgentResult

INHALT_ZEICHEN = 500
"""Text of one library entry in [AUFGABE] (as much as the Thinker's tool shows)."""


async def dispatch_wissen(state, deps) -> AgentResult:
    key = suchschluessel(state, deps, "wissen")
    hits = [] if key is None else await dienste.wissen(deps, state.stimulus, key, "agent_dispatch")
    if not hits:
        return nachgesehen("wissen", [], "in ihrer Bibliothek nachgesehen, nichts zu diesem Gegenstand", "")
    zeilen = [f"- {h.titel}: {h.inhalt[:INHALT_ZEICHEN]}" for h in hits]
    anzahl = f"{len(hits)} {'Eintrag' if len(hits) == 1 else 'Eintraege'}"
    return nachgesehen("wissen", [h.id for h in hits], f"in ihrer Bibliothek nachgesehen, {anzahl} zu diesem Gegenstand",
                       "Aus ihrer Bibliothek (was sie selbst erarbeitet hat):\n" + "\n".join(zeilen))


AGENT = Agent(name="wissen", dispatch=dispatch_wissen, bedarf=("plan", "memory"))
"""Reads its order and the turn's memory record, for the search key `such_vektor` (seed 001: "denen
`such_vektor` als angemeldeter Bedarf mitwandert"); nothing else reaches it."""
