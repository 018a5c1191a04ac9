"""router: classify the turn — intent, management intent, needs_memory, needs_timeline with its
query (range or search), needs_web, momentum — then read the asked appointments."""
from __future__ import annotations

import logging
from datetime import date
from typing import Awaitable

from pydantic import BaseModel, ConfigDict, Field

from pipeline import regeln, vocab
from pipeline.llm_json import ask_json, wort
from memory.session import fenster
from pipeline.node import Node
from pipeline.nodes.enricher import sitzung
from pipeline.nodes.perzeption import VERLAUF_TURNS, kurzverlauf
from pipeline.services import Deps
from core.state import RouteRecord, Stimulus, TurnState
from pipeline.timefmt import local_now
from pipeline.trace import Slot

NAME = "router"
NODE = Node(
    name=NAME,
    reads=("stimulus", "memory", "perzeption"),
    writes=("route",),
    store_reads=("timeline", "session"),
    store_writes=("zaehler",),  # the agents' quota denominator (memory/agent_quoten.py)
    # its model call needs nothing of the timeline (only the appointments it asks for are read after
    # it): by data it starts early (`voraus`), beside the erinnerungsanker that writes the timeline,
    # and `run` reads the appointments once that is done
    early_without=("timeline",),
    at_start_reads=("session",),
    # in the pair actor its model call starts at the turn's start (`vorab`), beside perzeption's: its
    # prompt reads the session (the read the enricher's `vorab` starts), the message and the date
    model_call_at_start=True,
)
VORAUS: Slot = Slot(f"{NAME}.voraus")
"""Its model call, started at the turn's start or early, for `run`."""

log = logging.getLogger("novaberg.node.router")


_DATUM = {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
ZEITANFRAGE = {"type": "object", "properties": {"art": {"type": "string", "enum": ["range", "search"]},
                                                "von": _DATUM, "bis": _DATUM,
                                                "stichwort": {"type": "string", "maxLength": 60}}}
"""The engine's shape of `timeline_query` (router.rules: a range of dates or a keyword search)."""


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    intent: str = "austausch"
    management: str = wort(vocab.MANAGEMENT, "keins")
    needs_memory: bool = False
    needs_timeline: bool = False
    timeline_query: dict | None = Field(default=None, json_schema_extra={"anyOf": [ZEITANFRAGE, {"type": "null"}]})
    needs_web: bool = False
    momentum: str = wort(vocab.MOMENTUM, "mid")


async def read_appointments(deps: Deps, state: TurnState, query: dict | None) -> tuple[list[dict], str]:
    s = state.stimulus
    tz = deps.settings.timezone
    if not query:
        return [], "ohne_anfrage"
    art = query.get("art")
    try:
        if art == "range":
            von, bis = date.fromisoformat(query["von"]), date.fromisoformat(query.get("bis") or query["von"])
            rows = await deps.store.timeline.find_by_date_range(s.user_id, s.character_id, von, bis, tz)
            return [t.model_dump(mode="json") for t in rows], "range"
        if art == "search" and str(query.get("stichwort", "")).strip():
            rows = await deps.store.timeline.find_by_keyword(s.user_id, s.character_id, str(query["stichwort"]), tz)
            return [t.model_dump(mode="json") for t in rows], "search"
    except (KeyError, ValueError) as e:
        log.warning("router: fallback timeline_anfrage_unlesbar: %s (%s)", deps.settings.said(query), type(e).__name__)
        return [], "anfrage_unlesbar"
    log.warning("router: fallback timeline_anfrage_unbekannt: %s", deps.settings.said(query))
    return [], "anfrage_unbekannt"


def management_mit_regel(deps: Deps, text: str, management: str, genannt: bool) -> str:
    """An explicit request the rules read ("Notiz X: …", "Trag einen Termin ein") is not lost
    when the model answered `keins` or its cut answer ended before it named a management: the
    rules' reading stands (named fallback `management_regel`). Whatever else the model named stays."""
    if management != "keins":
        return management
    by_rule = regeln.management(text)
    if by_rule == "keins":
        return management
    log.warning("router: fallback management_regel: the model %s, the rules read %s",
                "answered keins" if genannt else "named no management", by_rule)
    deps.trace.decision(NAME, "router.management_quelle", "management_regel",
                        {"modell": management if genannt else None, "regel": by_rule})
    return by_rule


def _klassifizieren(deps: Deps, s: Stimulus, session_turns) -> Awaitable:
    return ask_json(deps, NAME, _Antwort, {
        "verlauf": kurzverlauf(fenster(session_turns, VERLAUF_TURNS)), "nachricht": s.text,
        "heute": local_now(deps.settings.timezone, s.received_at).date().isoformat(),
        "management": ", ".join(vocab.MANAGEMENT), "momentum": ", ".join(vocab.MOMENTUM)})


@NODE.early_start
def voraus(state: TurnState, deps: Deps) -> None:
    """The classification's model call, as soon as the session and the perception are there."""
    turns = state.memory.session_turns if state.memory else []
    deps.trace.start_once(VORAUS, lambda: _klassifizieren(deps, state.stimulus, turns))


@NODE.at_turn_start
def vorab(deps: Deps, s: Stimulus) -> None:
    """The classification's model call at the turn's start, on the session the enricher reads."""
    async def frage():
        return await _klassifizieren(deps, s, await sitzung(deps, s.user_id, s.character_id))

    deps.trace.start_once(VORAUS, frage)


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    frueh = deps.trace.started_in(VORAUS)
    turns = state.memory.session_turns if state.memory else []
    answer, outcome = await (frueh if frueh is not None else _klassifizieren(deps, s, turns))
    if answer is None:
        # without a usable classification: the rules read management requests, the rest is
        # plain conversation with memory
        rec = RouteRecord(fallback="router_regeln", management=regeln.management(s.text),
                          intent=state.perzeption.intent if state.perzeption else "austausch")
        needs_memory, needs_timeline, anfrage = True, False, None
        log.warning("router: fallback router_regeln (answer %s): management %s by rule", outcome, rec.management)
    else:
        management = vocab.pick(answer.management.strip().lower(), vocab.MANAGEMENT, "keins")
        momentum = vocab.pick(answer.momentum.strip().lower(), vocab.MOMENTUM, "mid")
        if management != answer.management.strip().lower() or momentum != answer.momentum.strip().lower():
            log.warning("router: fallback vokabular: management %r / momentum %r outside the vocabulary",
                        answer.management, answer.momentum)
        management = management_mit_regel(deps, s.text, management, "management" in answer.model_fields_set)
        rec = RouteRecord(intent=answer.intent[:40] or "austausch", management=management,
                          needs_web=answer.needs_web, momentum=momentum)
        needs_memory, needs_timeline = answer.needs_memory, answer.needs_timeline
        anfrage = answer.timeline_query if answer.needs_timeline else None
    termine_status = "nicht_gefragt"
    if needs_timeline:
        termine, termine_status = await read_appointments(deps, state, anfrage)
        rec.termine = termine
    deps.trace.decision(NAME, "router.management", rec.management,
                        {"needs_memory": needs_memory, "needs_timeline": needs_timeline, "anfrage": anfrage,
                         "needs_web": rec.needs_web, "momentum": rec.momentum, "antwort": outcome})
    deps.trace.decision(NAME, "router.termine", termine_status, {"gefunden": len(rec.termine)})
    t = deps.trace  # seed 003: the quota's denominator, per chain; a turn run again counts once
    await deps.quoten.geroutet(t.chain, f"{t.user_id}:{t.character_id}:{t.turn_id}")
    return {"route": rec}
