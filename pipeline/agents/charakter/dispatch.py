"""Character agent: instructions that shape the character (at most three active; a fourth asks
the human to consolidate, seed 004)."""
from __future__ import annotations

from pipeline.agents import schreibschluessel
from pipeline.state import AgentResult


async def dispatch_charakter(state, deps) -> AgentResult:
    p = state.plan.auftrag.parameter
    s = state.stimulus
    text = str(p.get("text") or "").strip()
    if not text:
        return AgentResult(agent_name="charakter", status="rueckfrage",
                           ergebnis={"frage": "Wie genau soll sich die Figur veraendern?"})
    current = await deps.store.call("charakter.instructions", s.user_id, s.character_id)
    if len(current) >= deps.services.memory_cfg.max_active_instructions:
        return AgentResult(agent_name="charakter", status="rueckfrage", ergebnis={
            "frage": "Es gibt schon drei Anweisungen: " + "; ".join(c["text"] for c in current)
                     + ". Welche sollen zusammengefasst oder ersetzt werden?"})
    iid = await deps.store.call("charakter.add_instruction", s.user_id, s.character_id, text,
                                deps.services.memory_cfg.max_active_instructions, **schreibschluessel(state, "charakter"))
    return AgentResult(agent_name="charakter", status="abgeschlossen",
                       ergebnis={"aktion": "anweisung", "id": iid, "beschreibung": f"Anweisung aufgenommen: {text}"})
