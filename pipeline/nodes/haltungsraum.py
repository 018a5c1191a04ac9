"""haltungsraum: Nova's attitude for this reply — `umfang` and the span in sentences, nearness,
warmth, energy, initiative (seed 004 §3.3). The span is capped by the utterance's length when the
turn carries only light intentions; one substantive intention lifts the cap."""
from __future__ import annotations

from pipeline import vocab
from pipeline.services import Deps
from pipeline.state import HaltungRecord, TurnState

NAME = "haltungsraum"
READS = ("stimulus", "perzeption", "emotion", "route", "memory")
WRITES = ("haltung",)
KURZ_ZEICHEN = 60
SPANNE_TEXT = {(1, 2): "ein bis zwei Saetzen", (2, 3): "zwei bis drei Saetzen", (3, 5): "drei bis fuenf Saetzen"}


def compute(state: TurnState) -> tuple[HaltungRecord, str]:
    p, e, r = state.perzeption, state.emotion, state.route
    momentum = r.momentum if r else "mid"
    umfang = {"low": "knapp", "mid": "mittel", "high": "ausfuehrlich"}[momentum]
    intentionen = (state.memory.user_intentionen if state.memory else []) or (p.user_intentionen if p else [])
    grund = f"momentum_{momentum}"
    nur_leicht = bool(intentionen) and all(i in vocab.LEICHTE_INTENTIONEN for i in intentionen)
    if nur_leicht and len(state.stimulus.text) < KURZ_ZEICHEN and umfang != "knapp":
        umfang, grund = "knapp", "deckel_kurze_leichte_aeusserung"
    dyn = p.beziehungs_dynamik if p else "neutral"
    naehe = {"vertrauen": 0.8, "dankbar": 0.7, "hilfesuchend": 0.7, "neutral": 0.5, "distanz": 0.3,
             "angriff": 0.2}.get(dyn, 0.5)
    valenz = vocab.VALENZ.get(p.emotion if p else "neutral", 0.0)
    waerme = round(min(1.0, 0.6 + (0.3 if valenz < -0.3 else 0.0) + (0.1 if dyn in ("vertrauen", "dankbar") else 0.0)), 3)
    arousal = e.ei_arousal if e else 0.3
    energie = "lebhaft" if arousal >= 0.6 else ("ruhig" if arousal < 0.35 else "gesammelt")
    initiative = {"low": 0.6, "mid": 0.5, "high": 0.3}[momentum]
    spanne = SPANNE_TEXT[vocab.UMFANG_SPANNE[umfang]]
    return HaltungRecord(umfang=umfang, spanne=spanne, naehe=naehe, waerme=waerme, energie=energie,
                         initiative=initiative), grund


async def run(state: TurnState, deps: Deps) -> dict:
    rec, grund = compute(state)
    deps.trace.decision(NAME, "haltungsraum.umfang", rec.umfang, {"grund": grund, "spanne": rec.spanne})
    return {"haltung": rec}
