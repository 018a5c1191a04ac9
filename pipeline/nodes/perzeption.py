"""perzeption (human chain): how the human's message comes across — emotion, arousal, intent,
tone, conversation mode, relationship dynamics, user intentions. One LLM call; values outside
the vocabularies fall back to their defaults, each counted and logged."""
from __future__ import annotations

import logging
import re

from pydantic import BaseModel, ConfigDict, Field

from pipeline import vocab
from pipeline.llm_json import ask_json, woerter, wort
from pipeline.node import Node
from pipeline.services import Deps
from core.state import PerzeptionRecord, SessionTurn, TurnState

NAME = "perzeption"
NODE = Node(
    name=NAME,
    reads=("stimulus",),
    writes=("perzeption",),
    store_reads=("session",),
)
VERLAUF_TURNS = 6
VERLAUF_ZEICHEN = 100  # seed 001: the history form for perception is cut to 100 characters per turn
REGIEANWEISUNG = re.compile(r"\*([^*\s]+)\s[^*\n]*\*")
"""A stage direction of more than one word in one of Nova's replies (`*lächelt und lehnt sich zurück*`)."""

log = logging.getLogger("novaberg.node.perzeption")


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")

    emotion: str = wort(vocab.EMOTIONEN, "neutral")
    arousal: float = Field(default=0.3)
    intent: str = "austausch"
    tone: str = "neutral"
    gespraechs_modus: str = wort(vocab.GESPRAECHSMODI, "austausch")
    beziehungs_dynamik: str = wort(vocab.BEZIEHUNGSDYNAMIK, "neutral")
    user_intentionen: list[str] = woerter(vocab.USER_INTENTIONEN)


def kurzverlauf(turns: list[SessionTurn]) -> str:
    """The history form of perception and router (seed 001 §3.1: "Perzeption/Router: Gekürzter Text
    + Emotion als Annotation (via `format_session_turns_numbered()`) — gekürzt heißt: 100 Zeichen je
    Beitrag, bei Antworten mit Regieanweisung nur deren Anfang"): each turn numbered, its speaker,
    the emotion stored with it in parentheses (none where the turn carries none), and its first
    `VERLAUF_ZEICHEN` characters.

    "nur deren Anfang" is read as the stage direction's beginning: in Nova's replies (the
    assistant's turns) each stage direction keeps its first word and an ellipsis
    (`*lächelt und lehnt sich zurück*` → `*lächelt …*`), so the 100 characters carry what Nova
    said and not her gestures — the two nodes read the conversation's content; the emotion stands
    in the annotation. A one-word direction stays whole; the person's turns stay as written."""
    if not turns:
        return "(noch kein Verlauf)"
    return "\n".join(f"{i}. {t.sprecher}{f' ({t.emotion})' if t.emotion else ''}: {_gekuerzt(t)}"
                     for i, t in enumerate(turns, 1))


def _gekuerzt(t: SessionTurn) -> str:
    """A turn's text in the short history: a reply's stage directions reduced to their beginning,
    then its first `VERLAUF_ZEICHEN` characters."""
    text = REGIEANWEISUNG.sub(r"*\1 …*", t.inhalt) if t.rolle == "assistant" else t.inhalt
    return text[:VERLAUF_ZEICHEN]


def normalise(a: _Antwort) -> tuple[PerzeptionRecord, list[str]]:
    """Fit the answer into the vocabularies; returns the record and the fields that fell back."""
    fixed = []
    emotion = vocab.pick(a.emotion.lower().strip(), vocab.EMOTIONEN, "neutral")
    modus = vocab.pick(a.gespraechs_modus.lower().strip(), vocab.GESPRAECHSMODI, "austausch")
    dyn = vocab.pick(a.beziehungs_dynamik.lower().strip(), vocab.BEZIEHUNGSDYNAMIK, "neutral")
    intentionen = [i for i in (x.lower().strip() for x in a.user_intentionen) if i in vocab.USER_INTENTIONEN]
    for name, got, raw in (("emotion", emotion, a.emotion), ("gespraechs_modus", modus, a.gespraechs_modus),
                           ("beziehungs_dynamik", dyn, a.beziehungs_dynamik)):
        if got != raw.lower().strip():
            fixed.append(name)
    if len(intentionen) != len(a.user_intentionen):
        fixed.append("user_intentionen")
    arousal = min(max(float(a.arousal), 0.0), 1.0)
    if arousal != a.arousal:
        fixed.append("arousal")
    rec = PerzeptionRecord(emotion=emotion, arousal=arousal, intent=a.intent[:40] or "austausch",
                           tone=a.tone[:40] or "neutral", gespraechs_modus=modus, beziehungs_dynamik=dyn,
                           user_intentionen=intentionen)
    return rec, fixed


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    turns = await deps.session.load_window(s.user_id, s.character_id, VERLAUF_TURNS) if deps.session else []
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "verlauf": kurzverlauf(turns), "nachricht": s.text, "emotionen": ", ".join(vocab.EMOTIONEN),
        "modi": ", ".join(vocab.GESPRAECHSMODI), "dynamiken": ", ".join(vocab.BEZIEHUNGSDYNAMIK),
        "intentionen": ", ".join(vocab.USER_INTENTIONEN)})
    if answer is None:
        rec = PerzeptionRecord(fallback=f"perzeption_{outcome}")
        fixed = ["alle"]
    else:
        rec, fixed = normalise(answer)
        if fixed:
            log.warning("perzeption: fallback vokabular: fields %s outside the vocabularies, defaults used", fixed)
    deps.trace.decision(NAME, "perzeption.ergebnis", "fallback" if answer is None else ("angepasst" if fixed else "ok"),
                        {"emotion": rec.emotion, "arousal": rec.arousal, "angepasst": fixed})
    return {"perzeption": rec}
