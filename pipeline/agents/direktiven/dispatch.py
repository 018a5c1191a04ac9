"""Directives agent: absolute instructions of the user for this pair, added or lifted."""
from __future__ import annotations

from pipeline.agents.agent import Agent, schreibschluessel
from core.state import AgentResult


async def dispatch_direktiven(state, deps) -> AgentResult:
    auftrag = state.plan.auftrag
    aktion, p = auftrag.aktion, auftrag.parameter
    s = state.stimulus
    text = str(p.get("text") or "").strip()
    if aktion == "anlegen" and text:
        did = await deps.store.beziehung.add_directive(s.user_id, s.character_id, text,
                                    **schreibschluessel(state, "direktiven"))
        return AgentResult(agent_name="direktiven", status="abgeschlossen",
                           ergebnis={"aktion": "anlegen", "id": did, "beschreibung": f"Vorgabe gemerkt: {text}"})
    if aktion == "aufheben" and text:
        current = await deps.store.beziehung.directives(s.user_id, s.character_id)
        match = [d for d in current if text.lower() in d.text.lower()]
        if not match:
            return AgentResult(agent_name="direktiven", status="verworfen", ergebnis={"grund": "keine passende Vorgabe"})
        await deps.store.beziehung.set_directive_active(s.user_id, s.character_id, match[0].id, False,
                                                        turn_id=s.turn_id)
        return AgentResult(agent_name="direktiven", status="abgeschlossen",
                           ergebnis={"aktion": "aufheben", "id": match[0].id, "beschreibung": f"Vorgabe aufgehoben: {match[0].text}"})
    fehlt, angabe = ("text", "der Wortlaut der Vorgabe") if not text else ("aktion", "ob sie gemerkt oder aufgehoben wird")
    return AgentResult(agent_name="direktiven", status="rueckfrage", ergebnis={
        "frage": "Welche Vorgabe genau soll ich mir merken oder aufheben?", "fehlt": fehlt, "angabe": angabe})


AGENT = Agent(name="direktiven", dispatch=dispatch_direktiven, bedarf=("plan",))
"""Reads its order (the `plan` record) besides the stimulus; nothing else reaches it."""
