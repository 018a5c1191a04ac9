"""praegung (background): imprint — create long-term memory nodes from the turn, link them to the
anchors that resonated, and let the human's profile grow slowly.

Once per turn: the nodes carry the turn as their source (`quelle`). A redelivered job finds them
(`lzg.knoten_der_quelle`) and neither asks the model nor writes (`praegung.ergebnis` =
`schon_erledigt`); two deliveries racing past that check are settled by `lzg.add_nodes_einmal`,
which inserts a source's nodes under a lock only while it has none. The synapses follow the new
nodes only, the human's core grows through its own step (`praegung:{turn_id}`)."""
from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field

from pipeline.llm_json import ask_json
from pipeline.node import Node
from pipeline.services import Deps
from pipeline.state import HintergrundRecord, Stimulus, TurnState, current_reply

NAME = "praegung"
ENTSCHEIDUNG = "praegung.ergebnis"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "draft", "pruefung", "urteil", "perzeption", "memory", "hintergrund"),
    writes=(),
)
MAX_NEU = 2
SYNAPSE_GEWICHT = 0.5
MENSCH_KERN_SAETZE = 5
"""Sentences the human's core keeps; the oldest is dropped for a new one."""
MENSCH_THEMEN_SAETZE = 3
"""Sentences of what occupies the human just now (`mensch_themen`): short-lived, like Nova's
`nova_adaptiv` — three turns that named a concern, then the oldest gives way."""

log = logging.getLogger("novaberg.node.praegung")


class _Erinnerung(BaseModel):
    model_config = ConfigDict(extra="ignore")
    inhalt: str
    dimension: str = "erlebnis"


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    erinnerungen: list[_Erinnerung] = Field(default_factory=list)
    profil_mensch: str = ""
    beschaeftigt_mensch: str = ""


def _erinnerungen(answer: _Antwort | None, outcome: str, state: TurnState) -> tuple[list[dict], str]:
    """What to remember, and where it came from: the model's memories, or — without a usable answer
    or with nothing in it — the turn's core as it is (the named fallback `kern`)."""
    s, h = state.stimulus, state.hintergrund or HintergrundRecord()
    neu = [e.model_dump() for e in (answer.erinnerungen if answer else [])[:MAX_NEU] if e.inhalt.strip()]
    if neu:
        return neu, "modell"
    log.warning("praegung: fallback kern: the model gave no memory (%s); the turn's core is remembered as it is "
                "(%s:%s, turn %s)", outcome, s.user_id, s.character_id, s.turn_id)
    return [{"inhalt": (h.kern or s.text)[:300], "dimension": "erlebnis"}], f"kern_{outcome}"


def _schon_erledigt(deps: Deps, s: Stimulus, ids: list[int], wie: str) -> dict:
    log.info("praegung: turn %s imprinted already (a redelivered job, %s): nodes %s; nothing written", s.turn_id,
             wie, ids)
    deps.trace.decision(NAME, ENTSCHEIDUNG, "schon_erledigt", {"knoten": ids, "erkannt": wie})
    return {}


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    # once per turn: the turn's nodes carry it as their source; a second delivery finds them
    schon = await deps.store.lzg.knoten_der_quelle(s.user_id, s.character_id, s.turn_id)
    if schon:
        return _schon_erledigt(deps, s, schon, "vorab")
    h = state.hintergrund or HintergrundRecord()
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "kern": h.kern or s.text, "mensch": s.text,
        "antwort": current_reply(state)})
    neu, quelle = _erinnerungen(answer, outcome, state)
    emotion = state.perzeption.emotion if state.perzeption else None
    arousal = state.perzeption.arousal if state.perzeption else None
    nodes = []
    for e in neu:
        vec = await deps.embedder.embed(deps.trace, e["inhalt"])
        nodes.append({"inhalt": e["inhalt"], "embedding": vec, "dimension": e["dimension"][:30], "beobachter": "nova",
                      "emotion": emotion, "arousal": arousal, "quelle": s.turn_id})
    out = await deps.store.lzg.add_nodes_einmal(s.user_id, s.character_id, s.turn_id, nodes)
    if not out["neu"]:  # a second delivery raced past the check: the source's lock decided
        return _schon_erledigt(deps, s, out["ids"], "beim_schreiben")
    ids = out["ids"]
    resonanz = (state.memory.lzg_resonanz or {}).get("ids", [])[:3] if state.memory else []
    edges = [(new, old, SYNAPSE_GEWICHT) for new in ids for old in resonanz]
    if edges:
        await deps.store.lzg.add_synapses(edges, "praegung")
        await deps.store.lzg.touch(resonanz, turn=(s.user_id, s.character_id, s.turn_id))
    saetze = {feld: text.strip()[:200] for feld, text in (
        ("mensch_kern", answer.profil_mensch if answer else ""), ("mensch_themen", answer.beschaeftigt_mensch if answer else ""))
        if text.strip()}
    if saetze:
        # slow growth, once per turn: each new sentence joins the last few of its field, oldest dropped
        grenzen = {"mensch_kern": MENSCH_KERN_SAETZE, "mensch_themen": MENSCH_THEMEN_SAETZE}
        await deps.store.beziehung.profil_wachsen(s.user_id, s.character_id, f"{NAME}:{s.turn_id}", saetze,
                                                  {f: grenzen[f] for f in saetze})
    deps.trace.decision(NAME, ENTSCHEIDUNG, quelle, {"knoten": ids, "kanten": len(edges)})
    return {}
