"""ei_calc: emotional intelligence, pure computation. The human's emotion history with decay
weights (the current perception enters as "turn 0", seed 001 §5), the emotion vector, arousal,
language style by feature scoring, mode plausibility, Nova's own emotion after empathy
modulation, and the conflict flag.

Two paths, as seed 001 §2 runs the node in both graphs (`ei_calc_rolle`: "user" in the human
chain, "character" in the character chain):
- **user** (human chain, after its enricher, no `pair` yet): the human's side — history, vector,
  arousal, style, mode plausibility — over the session turns that enricher loaded (seed 001 §3.5:
  the enricher's `raw_turns` are the bridge "the following EI-Calc node consumes").
- **character** (character chain, after db_zugriff, before the enricher): Nova's side — the
  empathy update against her persisted prior state, "before memory resonance joins" (seed 001 §2,
  Reihenfolge-Logik) — on the human's side the human chain wrote. That record is this path's
  reader: it is taken over, not computed again. A turn without the human chain (Nova's own
  impulse, a follow-up) has none, and the human's side is computed here
  (`menschenseite=berechnet` in the decision `ei_calc.rolle`).
"""
from __future__ import annotations

import re

from pipeline import vocab
from pipeline.node import Node
from pipeline.services import Deps
from core.state import EmotionRecord, EmotionsEintrag, PerzeptionRecord, TurnState

NAME = "ei_calc"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "perzeption", "memory", "emotion"),
    writes=("emotion",),
    optional_reads={"pair": "the human chain computes the human's side; Nova's previous state is read by the "
                           "character chain, after db_zugriff"},
)
DECAY = 0.7
VERLAUF_MAX = 8
KONFLIKT_AROUSAL = 0.6
"""Seed 004: Nova and the human in opposite sectors with high arousal — the responder makes the
incongruence explicit."""

_STIL_MERKMALE = {
    "locker": [r"\bhey\b", r"\bhi\b", r"\bna\b", r"\bcool\b", r"[:;]-?[)D]", r"\bok\b", r"\bjo\b"],
    "formell": [r"\bSie\b", r"\bIhnen\b", r"\bIhr\b", r"\bsehr geehrte", r"\bbitte\b", r"\bdanke sehr\b"],
    "fachlich": [r"\b\w{14,}\b", r"\d+[.,]\d+", r"\b(?:Prozess|System|Funktion|Analyse|Daten|Version)\w*"],
    "emotional": [r"!{2,}", r"\b(?:traurig|gluecklich|angst|wuetend|liebe|hasse|vermisse|allein)\w*", r"\bich fuehle"],
    "jugendlich": [r"\b(?:krass|digga|lol|voll|mega|cringe|bro|alter)\b"],
}


STIL_FENSTER = 4
"""The human's earlier turns that join the current one in the style score (weighted by DECAY)."""


def _merkmale(text: str) -> dict[str, int]:
    return {s: sum(len(re.findall(p, text, re.I if s != "formell" else 0)) for p in pats)
            for s, pats in _STIL_MERKMALE.items()}


def sprach_stil(text: str, frueher: list[str] | tuple[str, ...] = ()) -> str:
    """The style scored over a window: the current text and the human's earlier turns (newest
    first), each weighted by DECAY per step back — one short message does not flip the style."""
    scores = dict.fromkeys(_STIL_MERKMALE, 0.0)
    for age, t in enumerate([text, *frueher[:STIL_FENSTER]]):
        for s, n in _merkmale(t).items():
            scores[s] += n * DECAY ** age
    return _bester(scores) or "locker"


def stil_des_turns(text: str) -> str | None:
    """The style this one message shows, or None when it shows no marker of any (seed 004 §4.1:
    the responder's tone follows the human at once; a message without a register sets none)."""
    return _bester(_merkmale(text))


def _bester(scores: dict) -> str | None:
    """The highest-scoring style (ties in vocabulary order), None when nothing scored."""
    best = max(scores.values())
    return None if best == 0 else next(s for s in vocab.SPRACHSTILE if scores[s] == best)


def verlauf(perzeption: PerzeptionRecord, turns) -> list[EmotionsEintrag]:
    """Newest first: turn 0 is the current perception, then the human's stored turns."""
    out = [EmotionsEintrag(emotion=perzeption.emotion, arousal=perzeption.arousal, gewicht=1.0)]
    older = [t for t in reversed(turns) if t.rolle == "user" and t.emotion]
    for age, t in enumerate(older[: VERLAUF_MAX - 1], start=1):
        out.append(EmotionsEintrag(emotion=t.emotion, arousal=t.arousal if t.arousal is not None else 0.3,
                                   gewicht=round(DECAY ** age, 6)))
    return out


def vektor(history: list[EmotionsEintrag]) -> str:
    """Direction of an emotional course (EMOTIONS_VEKTOREN)."""
    vals = [vocab.VALENZ.get(h.emotion, 0.0) for h in history]  # newest first
    if len(vals) < 2:
        return "plateau"
    now, older = vals[0], vals[1:]
    w = [DECAY ** i for i in range(len(older))]
    before = sum(v * x for v, x in zip(older, w)) / sum(w)
    delta = now - before
    if len(vals) >= 3 and vals[0] < vals[1] < vals[2] and now < 0:
        return "spirale"
    if delta <= -0.8:
        return "absturz"
    if delta <= -0.35:
        return "einbruch"
    if delta >= 0.35:
        return "erholung"
    spread = max(older) - min(older)
    return "stabilisierung" if spread > 0.5 else "plateau"


def menschenseite(state: TurnState) -> EmotionRecord:
    """The user path: the human's side of the record (Nova's fields stay at their defaults: her
    prior state is not loaded before the character chain's db_zugriff)."""
    p = state.perzeption or PerzeptionRecord(fallback="ohne_perzeption")
    turns = state.memory.session_turns if state.memory else []
    history = verlauf(p, turns)
    total = sum(h.gewicht for h in history)
    arousal = sum(h.arousal * h.gewicht for h in history) / total
    return EmotionRecord(
        emotions_verlauf=history, emotions_vektor=vektor(history), ei_arousal=round(arousal, 4),
        sprach_stil=sprach_stil(state.stimulus.text, [t.inhalt for t in reversed(turns) if t.rolle == "user"]),
        modus_plausibel=not (p.gespraechs_modus == "konflikt" and vocab.VALENZ.get(p.emotion, 0.0) > 0.5))


def novaseite(mensch: EmotionRecord, state: TurnState) -> EmotionRecord:
    """The character path: Nova's emotion after empathy modulation against her persisted prior
    state (`pair`), on the human's side `mensch`, and the conflict flag between both."""
    p = state.perzeption or PerzeptionRecord(fallback="ohne_perzeption")
    prev_emotion = state.pair.nova_emotion if state.pair else "neutral"
    prev_arousal = state.pair.nova_arousal if state.pair else 0.3
    # empathy: a strong feeling of the human colours Nova's state; a weak one leaves hers
    nova_emotion = p.emotion if abs(vocab.VALENZ.get(p.emotion, 0.0)) >= 0.5 else prev_emotion
    nova_arousal = round(0.6 * prev_arousal + 0.4 * p.arousal, 4)
    return mensch.model_copy(update={
        "nova_emotion": nova_emotion, "nova_arousal": nova_arousal,
        "nova_sektor": vocab.SEKTOR.get(nova_emotion, "neutral"),
        "konflikt": konflikt(p.emotion, p.arousal, nova_emotion, nova_arousal)})


def rolle(state: TurnState) -> str:
    """`ei_calc_rolle` (seed 001 §2): "user" in the human chain, which runs before db_zugriff
    wrote `pair`; "character" in the character chain."""
    return "character" if state.pair is not None else "user"


def berechnen(state: TurnState) -> tuple[EmotionRecord, str]:
    """The record of this path and where its human side came from: `berechnet` (computed here)
    or `menschenkette` (the human chain's record, taken over by the character path)."""
    if rolle(state) == "user":
        return menschenseite(state), "berechnet"
    if state.emotion is not None:
        return novaseite(state.emotion, state), "menschenkette"
    return novaseite(menschenseite(state), state), "berechnet"


def run_sync(state: TurnState) -> EmotionRecord:
    return berechnen(state)[0]


def konflikt(emotion: str, arousal: float, nova_emotion: str, nova_arousal: float) -> bool:
    """Opposite sectors (valence of opposite sign) while either side is highly aroused."""
    gegen = vocab.VALENZ.get(emotion, 0.0) * vocab.VALENZ.get(nova_emotion, 0.0) < 0
    return gegen and max(arousal, nova_arousal) >= KONFLIKT_AROUSAL


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    rec, herkunft = berechnen(state)
    deps.trace.decision(NAME, "ei_calc.rolle", rolle(state), {"menschenseite": herkunft})
    deps.trace.decision(NAME, "ei_calc.vektor", rec.emotions_vektor,
                        {"verlauf": len(rec.emotions_verlauf), "stil": rec.sprach_stil, "konflikt": rec.konflikt})
    return {"emotion": rec}
