"""Files agent (seed 001, *Query Rewriting*: the service `dateien`, which gets `such_vektor` as its
declared need): looks up the files the person gave with the turn's search key — the file index's
dense channel without a floor, at most eight files (`pipeline.dienste.dateien`) — and hands them
on for [AUFGABE], labelled as the person's files: what a file says is not Nova's memory, and the
label says so (seed 001 §3.1a)."""
from __future__ import annotations

from pipeline import dienste
from pipeline.agents.agent import Agent
from pipeline.agents.nachschlagen import nachgesehen, suchschluessel
from core.state import AgentResult

KOPF = "Aus den Dateien, die Person B gegeben hat (nicht ihre Erinnerung):"


async def dispatch_dateien(state, deps) -> AgentResult:
    key = suchschluessel(state, deps, "dateien")
    hits = [] if key is None else await dienste.dateien(deps, state.stimulus, key, "agent_dispatch")
    if not hits:
        return nachgesehen("dateien", [], "in den Dateien nachgesehen, nichts zu diesem Gegenstand", "")
    zeilen = [f"- Datei {h.datei or h.pfad}: {h.titel}" + (f" — {h.zusammenfassung}" if h.zusammenfassung else "")
              + (f"\n  {h.auszug}" if h.auszug else "") for h in hits]
    anzahl = f"{len(hits)} {'Datei' if len(hits) == 1 else 'Dateien'}"
    return nachgesehen("dateien", [h.id for h in hits], f"in den Dateien nachgesehen, {anzahl} zu diesem Gegenstand",
                       KOPF + "\n" + "\n".join(zeilen))


AGENT = Agent(name="dateien", dispatch=dispatch_dateien, bedarf=("plan", "memory"))
"""Reads its order and the turn's memory record, for the search key `such_vektor` (seed 001: "denen
`such_vektor` als angemeldeter Bedarf mitwandert"); nothing else reaches it."""
