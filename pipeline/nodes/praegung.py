"""praegung (background): imprint — write the exchange to long-term memory, with the memories
distilled from it, link those to the anchors that resonated, and let the human's profile grow slowly.

The exchange goes through long-term memory's one write (`lzg.episode_schreiben`, the same as an
import's, memory/LESEPFAD.md "One write path"): both sides verbatim and dated in the pair's time
zone, linked `nachbar` to each other and to the previous exchange of the same session (said at most
`SITZUNG_LUECKE_S` before); the model's memories (or the turn's core on fallback) linked to the
exchange they came from.

Once per turn: every node carries the turn as its source (`quelle`). A redelivered job finds them
(`lzg.knoten_der_quelle`) and neither asks the model nor writes (`praegung.ergebnis` =
`schon_erledigt`); two deliveries racing past that check are settled by the write, which inserts a
source's nodes under a lock only while it has none. The synapses from the new memories to the
resonating anchors, and the anchors' restarted curves, are written in the nodes' transaction: a
delivery cut off after the nodes leaves nothing undone that the next one would skip. The human's
core grows before that, through its own step (`praegung:{turn_id}`), which a delivery after a cut
finds done."""
from __future__ import annotations

import logging

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from core.wire import Aeusserung, Episode, Verdichtung, knoten_text
from memory.session import PERSON_B
from pipeline.llm_json import ask_json
from pipeline.node import Node
from pipeline.services import Deps
from core.state import Erinnerung, HintergrundRecord, Stimulus, TurnState, current_reply

NAME = "praegung"
ENTSCHEIDUNG = "praegung.ergebnis"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "draft", "pruefung", "urteil", "perzeption", "memory", "hintergrund"),
    writes=(),
)
MAX_NEU = 2
SYNAPSE_GEWICHT = 0.5
SITZUNG_LUECKE_S = 6 * 3600
"""An exchange continues the session of the one before when that was said at most six hours earlier
(LoCoMo's sessions, the measure of the read path, lie days apart; a conversation's turns minutes).
Set, not measured: the seeds name no session boundary for long-term memory."""
MENSCH_KERN_SAETZE = 5
"""Sentences the human's core keeps; the oldest is dropped for a new one."""
MENSCH_THEMEN_SAETZE = 3
"""Sentences of what occupies the human just now (`mensch_themen`): short-lived, like Nova's
`nova_adaptiv` — three turns that named a concern, then the oldest gives way."""
ABLOESBAR = 8
"""The recalled memories praegung is shown with short ids, to name those the turn replaces or ends."""

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
    abgeloest: list[Annotated[str, WithJsonSchema({"type": "string", "maxLength": 4})]] = Field(
        default_factory=list, json_schema_extra={"maxItems": 2})
    """The short ids (`E1` …) of the recalled memories this turn replaces or ends (a change, a
    correction); the engine's schema bounds them (two short ids), the validation does not."""


def _gesehen(state: TurnState) -> list[Erinnerung]:
    """The memories recalled for the turn that the model may name as replaced: the current ones, at
    most `ABLOESBAR`, in the read's order (their short ids `E1` … are their places here)."""
    r = state.memory.lzg_resonanz if state.memory else None
    return [e for e in (r.erinnerungen if r else []) if not e.gueltig_bis][:ABLOESBAR]


def _erinnerungen_block(gesehen: list[Erinnerung]) -> str:
    return "\n".join(f"E{i}: {e.inhalt[:200]}" for i, e in enumerate(gesehen, 1)) or "(keine)"


def _abgeloest(answer: _Antwort | None, gesehen: list[Erinnerung], s: Stimulus) -> list[Erinnerung]:
    """The recalled memories the answer names as replaced or ended; a name that is none of the short
    ids shown is left out (the named fallback `abloesung_unbekannt`)."""
    kurz = {f"E{i}": e for i, e in enumerate(gesehen, 1)}
    out: dict[int, Erinnerung] = {}
    for name in (answer.abgeloest if answer else []):
        e = kurz.get(name.strip().upper())
        if e is None:
            log.warning("praegung: fallback abloesung_unbekannt: the model named %r as replaced, which is none of "
                        "the %d memories shown; nothing is marked for it (turn %s)", name, len(gesehen), s.turn_id)
            continue
        out[e.id] = e
    return list(out.values())


def _erinnerungen(answer: _Antwort | None, outcome: str, state: TurnState) -> tuple[list[dict], str]:
    """What to distil, and where it came from: the model's memories; without a usable answer or
    with nothing in it, salience's core of the turn (the named fallback `kern`) — or nothing but the
    exchange itself when the core is the message as it is (`nur_episode`: the episode keeps it
    verbatim already, a copy would only take a place of the read)."""
    s, h = state.stimulus, state.hintergrund or HintergrundRecord()
    neu = [e.model_dump() for e in (answer.erinnerungen if answer else [])[:MAX_NEU] if e.inhalt.strip()]
    if neu:
        return neu, "modell"
    kern = (h.kern or "").strip()
    if not kern or kern == (s.user_prompt or "").strip():
        log.warning("praegung: fallback nur_episode: the model gave no memory (%s) and the turn's core is the "
                    "message itself; the exchange is remembered as it was said (%s:%s, turn %s)", outcome,
                    s.user_id, s.character_id, s.turn_id)
        return [], f"nur_episode_{outcome}"
    log.warning("praegung: fallback kern: the model gave no memory (%s); the turn's core is remembered as it is "
                "(%s:%s, turn %s)", outcome, s.user_id, s.character_id, s.turn_id)
    return [{"inhalt": kern[:300], "dimension": "erlebnis"}], f"kern_{outcome}"


def _schon_erledigt(deps: Deps, s: Stimulus, ids: list[int], wie: str) -> dict:
    log.info("praegung: turn %s imprinted already (a redelivered job, %s): nodes %s; nothing written", s.turn_id,
             wie, ids)
    deps.trace.decision(NAME, ENTSCHEIDUNG, "schon_erledigt", {"knoten": ids, "erkannt": wie})
    return {}


def _dimension(wort: str) -> str:
    """A distilled memory's dimension as the model named it; `gespraech` is the utterances' own
    (the session's chain links to them), so a memory the model calls so is kept as an experience."""
    wort = wort.strip()[:30] or "erlebnis"
    return "erlebnis" if wort == "gespraech" else wort


def _sprecher(s: Stimulus, figur: str) -> str:
    """His label in the memory: the name his client sent, `Person B` without one — and also when the
    name is the character's own, so that his words never read as hers (fallback `name_wie_figur`)."""
    if not s.person_name:
        return PERSON_B
    if s.person_name.casefold() == figur.strip().casefold():
        log.warning("praegung: fallback name_wie_figur: the name his client sent (%r) is the character's; his "
                    "utterance is kept under %s (turn %s)", s.person_name, PERSON_B, s.turn_id)
        return PERSON_B
    return s.person_name


async def _episode(state: TurnState, deps: Deps, neu: list[dict], resonanz: list[int],
                   abgeloest: list[Erinnerung]) -> Episode:
    """The exchange as long-term memory keeps it: his message (none on her own impulse) under the
    name his client sent (`Person B` without one) and her reply, each embedded as its node's text,
    and the distilled memories, to be linked to the older nodes that resonated."""
    s, zone = state.stimulus, deps.settings.timezone
    p = state.perzeption
    seiten = [(_sprecher(s, state.pair.character_name), "mensch", s.user_prompt, p.emotion if p else None, p.arousal if p else None),
              (state.pair.character_name, "nova", current_reply(state), None, None)]
    aeusserungen = []
    for sprecher, beobachter, text, emotion, arousal in seiten:
        if text and text.strip():
            vec = await deps.embedder.embed(deps.trace, knoten_text(s.received_at, zone, sprecher, text))
            aeusserungen.append(Aeusserung(sprecher=sprecher, beobachter=beobachter, text=text, embedding=vec,
                                           emotion=emotion, arousal=arousal))
    verdichtungen = [Verdichtung(inhalt=e["inhalt"], embedding=await deps.embedder.embed(deps.trace, e["inhalt"]),
                                 dimension=_dimension(e["dimension"]), emotion=p.emotion if p else None,
                                 arousal=p.arousal if p else None) for e in neu]
    return Episode(quelle=s.turn_id, zeitpunkt=s.received_at, zeitzone=zone, aeusserungen=aeusserungen,
                   verdichtungen=verdichtungen, anschluss_s=SITZUNG_LUECKE_S,
                   resonanz=resonanz, resonanz_gewicht=SYNAPSE_GEWICHT, abloesungen=[e.id for e in abgeloest])


async def _kzg_folgen(deps: Deps, s: Stimulus, abgeloest: list[Erinnerung], nachfolger: str) -> None:
    """The short-term entries of the superseded memories' turns are marked so (`kzg-turn-…`): a later
    search finds them as past, not as current. Idempotent: a redelivered job marks them the same."""
    quellen = sorted({e.quelle for e in abgeloest if e.quelle and e.quelle != s.turn_id})
    if quellen and deps.kzg is not None:
        await deps.kzg.abloesen(s.user_id, s.character_id, [f"turn-{q}" for q in quellen], s.turn_id,
                                nachfolger[:300], s.received_at.timestamp())


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    # once per turn: the turn's nodes carry it as their source; a second delivery finds them
    schon = await deps.store.lzg.knoten_der_quelle(s.user_id, s.character_id, s.turn_id)
    if schon:
        return _schon_erledigt(deps, s, schon, "vorab")
    h = state.hintergrund or HintergrundRecord()
    gesehen = _gesehen(state)
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "kern": h.kern or s.text, "mensch": s.text,
        "antwort": current_reply(state), "erinnerungen": _erinnerungen_block(gesehen)})
    neu, quelle = _erinnerungen(answer, outcome, state)
    abgeloest = _abgeloest(answer, gesehen, s)
    saetze = {feld: text.strip()[:200] for feld, text in (
        ("mensch_kern", answer.profil_mensch if answer else ""), ("mensch_themen", answer.beschaeftigt_mensch if answer else ""))
        if text.strip()}
    if saetze or abgeloest:
        # slow growth, once per turn: each new sentence joins the last few of its field, oldest dropped;
        # a sentence repeating a memory the turn replaces leaves. Before the nodes: a delivery cut off
        # between the two finds no nodes and does both again, and the profile's record of the step
        # keeps it once
        grenzen = {"mensch_kern": MENSCH_KERN_SAETZE, "mensch_themen": MENSCH_THEMEN_SAETZE}
        await deps.store.beziehung.profil_wachsen(s.user_id, s.character_id, f"{NAME}:{s.turn_id}", saetze,
                                                  {f: grenzen[f] for f in saetze},
                                                  abgeloest=[e.inhalt for e in abgeloest] or None)
    gelesen = state.memory.lzg_resonanz if state.memory else None
    resonanz = gelesen.ids[:3] if gelesen else []
    # the nodes, their links and the resonating nodes' curves in one transaction
    if abgeloest:  # the short-term entries of their turns follow; before the nodes, like the profile
        await _kzg_folgen(deps, s, abgeloest, neu[0]["inhalt"] if neu else (s.user_prompt or ""))
    out = await deps.store.lzg.episode_schreiben(s.user_id, s.character_id,
                                                 await _episode(state, deps, neu, resonanz, abgeloest))
    if not out.neu:  # a second delivery raced past the check: the source's lock decided
        return _schon_erledigt(deps, s, out.ids, "beim_schreiben")
    ids = out.verdichtungen
    edges = len(ids) * len(out.resonanz)
    deps.trace.decision(NAME, ENTSCHEIDUNG, quelle, {"knoten": ids, "episode": out.episode,
                                                     "anschluss": out.anschluss, "kanten": edges,
                                                     "abgeloest": out.abgeloest})
    return {}
