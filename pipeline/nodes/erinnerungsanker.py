"""erinnerungsanker: when the conversation dates something ("last Tuesday", "on my birthday"),
write a timeline entry of type `erinnerungs_anker` pointing to this turn."""
from __future__ import annotations

import logging
from datetime import date, datetime

from pydantic import BaseModel, ConfigDict

from pipeline.llm_json import ask_json
from pipeline.node import Node
from pipeline.services import Deps
from core.state import AnkerRecord, Stimulus, TurnState
from pipeline.trace import Slot
from pipeline.timefmt import local_now

NAME = "erinnerungsanker"
NODE = Node(
    name=NAME,
    reads=("stimulus",),
    writes=("anker",),
    store_writes=("timeline",),
    at_start_reads=(),
    model_call_at_start=True,
)
"""Its model call reads the message alone: it starts at the turn's start (`vorab`), beside
perzeption's; the node writes the anchor in its place in the chain (after the enricher's plugins
read the timeline) with that answer."""
FRAGE: Slot = Slot(f"{NAME}.frage")
"""Its model call, started at the turn's start, for `run`."""

log = logging.getLogger("novaberg.node.erinnerungsanker")


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    datiert: bool = False
    datum: str | None = None
    titel: str | None = None


def _fragen(deps: Deps, s: Stimulus):
    return ask_json(deps, NAME, _Antwort, {"nachricht": s.text, "heute": local_now(deps.settings.timezone, s.received_at).date().isoformat()})


@NODE.at_turn_start
def vorab(deps: Deps, s: Stimulus) -> None:
    """The model call on a message of the human, at the turn's start (the pair actor calls it)."""
    if s.user_prompt is not None:
        deps.trace.start_once(FRAGE, lambda: _fragen(deps, s))


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    if s.user_prompt is None:
        deps.trace.decision(NAME, "erinnerungsanker.lauf", "kein_nutzerreiz", {})
        return {"anker": AnkerRecord()}
    frueh = deps.trace.started_in(FRAGE)
    answer, outcome = await (frueh if frueh is not None else _fragen(deps, s))
    status, written = "nicht_datiert", []
    if answer is None:
        status = f"antwort_{outcome}"
    elif answer.datiert:
        try:
            day = date.fromisoformat((answer.datum or "").strip())
        except ValueError:
            status = "datum_unlesbar"
            log.warning("erinnerungsanker: fallback datum_unlesbar: %r is no ISO date; no anchor written", answer.datum)
        else:
            titel = (answer.titel or s.text)[:120]
            anchor_id = await deps.store.timeline.add(s.user_id, s.character_id, titel,
                                              datetime(day.year, day.month, day.day, 12, 0), deps.settings.timezone,
                                              typ="erinnerungs_anker", turn_id=s.turn_id, schritt=f"{NAME}:0")
            written.append({"id": anchor_id, "datum": day.isoformat(), "titel": titel})
            status = "geschrieben"
    deps.trace.decision(NAME, "erinnerungsanker.ergebnis", status, {"anker": len(written)})
    return {"anker": AnkerRecord(geschrieben=written)}
