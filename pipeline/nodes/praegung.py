"""praegung (background): imprint — create long-term memory nodes from the turn, link them to the
anchors that resonated, and let the human's profile grow slowly."""
from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field

from pipeline.llm_json import ask_json
from pipeline.services import Deps
from pipeline.state import HintergrundRecord, TurnState, current_reply

NAME = "praegung"
READS = ("stimulus", "pair", "draft", "pruefung", "urteil", "perzeption", "memory", "hintergrund")
WRITES = ()
MAX_NEU = 2
SYNAPSE_GEWICHT = 0.5
MENSCH_KERN_SAETZE = 5
"""Sentences the human's core keeps; the oldest is dropped for a new one."""

log = logging.getLogger("novaberg.node.praegung")


class _Erinnerung(BaseModel):
    model_config = ConfigDict(extra="ignore")
    inhalt: str
    dimension: str = "erlebnis"


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    erinnerungen: list[_Erinnerung] = Field(default_factory=list)
    profil_mensch: str = ""


async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    h = state.hintergrund or HintergrundRecord()
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "kern": h.kern or s.text, "mensch": s.text,
        "antwort": current_reply(state)})
    if answer is None or not answer.erinnerungen:
        # without a usable answer the turn's core is remembered as it is
        neu = [{"inhalt": (h.kern or s.text)[:300], "dimension": "erlebnis"}]
        quelle = f"kern_{outcome}"
    else:
        neu = [e.model_dump() for e in answer.erinnerungen[:MAX_NEU] if e.inhalt.strip()]
        quelle = "modell"
    emotion = state.perzeption.emotion if state.perzeption else None
    arousal = state.perzeption.arousal if state.perzeption else None
    nodes = []
    for e in neu:
        vec = await deps.embedder.embed(deps.trace, e["inhalt"])
        nodes.append({"inhalt": e["inhalt"], "embedding": vec, "dimension": e["dimension"][:30], "beobachter": "nova",
                      "emotion": emotion, "arousal": arousal, "quelle": s.turn_id})
    ids = await deps.store.call("lzg.add_nodes", s.user_id, s.character_id, nodes)
    resonanz = (state.memory.lzg_resonanz or {}).get("ids", [])[:3] if state.memory else []
    edges = [(new, old, SYNAPSE_GEWICHT) for new in ids for old in resonanz]
    if edges:
        await deps.store.call("lzg.add_synapses", edges, "praegung")
        await deps.store.call("lzg.touch", resonanz)
    if answer is not None and answer.profil_mensch.strip():
        # slow growth, once per turn: the new sentence joins the last few, oldest dropped
        await deps.store.call("charakter.profil_wachsen", s.user_id, s.character_id, f"{NAME}:{s.turn_id}",
                              {"mensch_kern": answer.profil_mensch.strip()[:200]}, {"mensch_kern": MENSCH_KERN_SAETZE})
    deps.trace.decision(NAME, "praegung.ergebnis", quelle, {"knoten": ids, "kanten": len(edges)})
    return {}
