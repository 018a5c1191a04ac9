"""zusammenfassung (background): the session summary of seed 001 §3.1 — `session:{u}:{c}:summary`,
"a compressed overview of the conversation so far", built from the older turns.

The chain reads the newest `session_max_turns` entries of the session (the enricher's window).
Entries that have left that window are folded into the summary here, oldest first, the previous
summary with them (one LLM call); on an unusable answer the named fallback `auszug` folds them in
as excerpts (each entry's first sentence) and says so in the log and in its decision entry. The
summary and its cursor (the mark of the last entry folded in) are stored together and only if the
cursor has not moved since it was read, so a redelivered background job never folds an entry twice.
The summary never replaces the verbatim history (seed 001, lesson of Chat 30): the responder sees
it only for what the window no longer shows.
"""
from __future__ import annotations

import logging
import re

from pydantic import BaseModel, ConfigDict, Field

from pipeline.llm_json import ask_json
from pipeline.node import Node
from pipeline.services import Deps
from core.state import SessionTurn, TurnState

NAME = "zusammenfassung"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair"),
    writes=(),
)
MAX_ZEICHEN = 400
"""The longest summary (characters): the model is held to it, the fallback and a longer answer are
cut to it. It fits a node's default answer of 160 tokens."""
MAX_NEU = 12
"""Entries folded in per run; a backlog (a lagging or failed background) shrinks by this much a turn."""
BEITRAG_ZEICHEN = 300
"""Of each entry, the model sees this much."""
AUSZUG_ZEICHEN = 90
"""Of each entry, the fallback keeps its first sentence, at most this much."""

log = logging.getLogger("novaberg.node.zusammenfassung")


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    zusammenfassung: str = Field(default="", json_schema_extra={"maxLength": MAX_ZEICHEN})


def _kuerzen(text: str, grenze: int) -> str:
    """At most `grenze` characters, cut after the last full sentence that fits (else a word)."""
    text = text.strip()
    if len(text) <= grenze:
        return text
    head = text[:grenze - 1]
    ende = max(head.rfind(". "), head.rfind("! "), head.rfind("? "), head.rfind("\n"))
    if ende >= grenze // 2:
        return head[:ende + 1].strip()
    return head.rsplit(" ", 1)[0].rstrip(",;: ") + "…"


def _erster_satz(text: str) -> str:
    satz = re.split(r"(?<=[.!?])\s", " ".join(text.split()), maxsplit=1)[0]
    return _kuerzen(satz, AUSZUG_ZEICHEN)


def _vorne_kuerzen(text: str, grenze: int) -> str:
    """At most `grenze` characters, the oldest dropped: cut before the first sentence or line
    that fits whole (else at a word)."""
    if len(text) <= grenze:
        return text
    rest = text[-grenze:]
    m = re.search(r"[.!?]\s|\n", rest)
    if m and m.end() <= grenze // 2:
        return rest[m.end():].strip()
    return rest.split(" ", 1)[-1].strip()


def auszug(bisher: str, neue: list[SessionTurn]) -> str:
    """The fallback: the previous summary, then each new entry's first sentence with its speaker;
    over the bound the oldest part goes first (the newest is what the window has just lost)."""
    zeilen = [bisher.strip()] if bisher.strip() else []
    zeilen += [f"{t.sprecher}: {_erster_satz(t.inhalt)}" for t in neue if t.inhalt.strip()]
    return _vorne_kuerzen("\n".join(zeilen), MAX_ZEICHEN)


def _verlauf(turns: list[SessionTurn]) -> str:
    return "\n".join(f"{t.sprecher}: {_kuerzen(t.inhalt, BEITRAG_ZEICHEN)}" for t in turns)


async def _falten(deps: Deps, state: TurnState, bisher: str, neue: list[SessionTurn]) -> tuple[str, str, str]:
    """(new summary, how it was made: `modell` | `auszug`, the model's answer outcome)."""
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name, "bisher": bisher.strip() or "(noch keine)",
        "neu": _verlauf(neue), "max_zeichen": MAX_ZEICHEN})
    text = answer.zusammenfassung.strip() if answer is not None else ""
    if not text:
        if outcome == "ok":
            outcome = "leer"
        log.warning("zusammenfassung: fallback auszug: the model's answer was not usable (%s); %d entries folded "
                    "in as excerpts", outcome, len(neue))
        return auszug(bisher, neue), "auszug", outcome
    if len(text) > MAX_ZEICHEN:
        log.info("zusammenfassung: the model's summary of %d characters cut to %d", len(text), MAX_ZEICHEN)
    return _kuerzen(text, MAX_ZEICHEN), "modell", outcome


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    fenster = deps.settings.session_max_turns
    vorher = await deps.session.load_summary(s.user_id, s.character_id)
    offen = await deps.session.ausstehend(s.user_id, s.character_id, window=fenster, marke=vorher.marke, limit=MAX_NEU)
    if offen.stand == "luecke" and offen.eintraege:
        log.error("zusammenfassung: the last summarised entry (turn %s) is no longer in the session of %s:%s: "
                  "the entries after it were trimmed before they were summarised; folding on from the oldest kept",
                  vorher.bis_turn_id, s.user_id, s.character_id)
    inputs = {"fenster": fenster, "stand": offen.stand, "bisher_gefaltet": vorher.gefaltet}
    if not offen.eintraege:
        deps.trace.decision(NAME, "zusammenfassung.falten", "nichts_neu", inputs, threshold=fenster)
        return {}
    neue = [e for _, e in offen.eintraege]
    text, art, antwort = await _falten(deps, state, vorher.text, neue)
    letzte = offen.eintraege[-1]
    stored = await deps.session.fold_summary(s.user_id, s.character_id, nach_marke=vorher.marke, text=text,
                                             marke=letzte[0], bis_turn_id=neue[-1].turn_id, neu=len(neue),
                                             turn_id=s.turn_id)
    inputs.update(neu=len(neue), rueckstand=offen.rueckstand - len(neue), bis_turn_id=neue[-1].turn_id,
                  zeichen=len(text), antwort=antwort)
    if not stored:
        log.info("zusammenfassung: entries up to turn %s of %s:%s were folded in by another run first; this one "
                 "is dropped", neue[-1].turn_id, s.user_id, s.character_id)
        deps.trace.decision(NAME, "zusammenfassung.falten", "schon_gefaltet", inputs, threshold=fenster)
        return {}
    log.info("zusammenfassung: %d entries up to turn %s folded in (%s, %d characters, %d still waiting)",
             len(neue), neue[-1].turn_id, art, len(text), offen.rueckstand - len(neue))
    deps.trace.decision(NAME, "zusammenfassung.falten", art, inputs, threshold=fenster)
    return {}
