"""Notes agent: create, change, delete, find a note of the user."""
from __future__ import annotations

from pipeline.agents.agent import Agent, schreibschluessel
from pipeline.llm_json import liste
from core.state import AgentResult

AKTIONEN = ("anlegen", "aendern", "loeschen", "finden")


def _turn(state) -> tuple[str, str]:
    """(character_id, turn_id): the note as it was is kept for taking the turn back."""
    return state.stimulus.character_id, state.stimulus.turn_id


async def dispatch_notizen(state, deps) -> AgentResult:
    auftrag = state.plan.auftrag
    aktion, p = auftrag.aktion, auftrag.parameter
    user = state.stimulus.user_id
    name = str(p.get("name") or "").strip()
    if aktion not in AKTIONEN:
        return AgentResult(agent_name="notizen", status="rueckfrage", ergebnis={
            "frage": "Was genau soll mit der Notiz geschehen: anlegen, aendern oder loeschen?", "fehlt": "aktion",
            "angabe": "was mit der Notiz geschehen soll"})
    if not name:
        return AgentResult(agent_name="notizen", status="rueckfrage", ergebnis={
            "frage": "Wie soll die Notiz heissen?", "fehlt": "name", "angabe": "der Name der Notiz"})
    if aktion == "anlegen":
        nid = await deps.store.notizen.create(user, name, str(p.get("inhalt") or ""),
                                    str(p.get("zusammenfassung") or p.get("inhalt") or "")[:200],
                                    liste(p.get("themen")), **schreibschluessel(state, "notizen"))
        return AgentResult(agent_name="notizen", status="abgeschlossen",
                           ergebnis={"aktion": "anlegen", "id": nid, "beschreibung": f"Notiz '{name}' angelegt"})
    found = await deps.store.notizen.find_by_keyword(user, name)
    if aktion == "finden":
        return AgentResult(agent_name="notizen", status="abgeschlossen",
                           ergebnis={"aktion": "finden", "notizen": [n.model_dump() for n in found],
                                     "beschreibung": f"{len(found)} Notiz(en) zu '{name}' gefunden"})
    if not found:
        return AgentResult(agent_name="notizen", status="verworfen",
                           ergebnis={"grund": f"keine Notiz mit dem Namen '{name}'"})
    target = found[0]
    if aktion == "aendern":
        await deps.store.notizen.update(user, target.id, turn=_turn(state),
                                        inhalt=str(p.get("inhalt") or target.inhalt))
        return AgentResult(agent_name="notizen", status="abgeschlossen",
                           ergebnis={"aktion": "aendern", "id": target.id, "beschreibung": f"Notiz '{target.name}' geaendert"})
    await deps.store.notizen.delete(user, target.id, turn=_turn(state))
    return AgentResult(agent_name="notizen", status="abgeschlossen",
                       ergebnis={"aktion": "loeschen", "id": target.id, "beschreibung": f"Notiz '{target.name}' geloescht"})


AGENT = Agent(name="notizen", dispatch=dispatch_notizen, bedarf=("plan",))
"""Reads its order (the `plan` record) besides the stimulus; nothing else reaches it."""
