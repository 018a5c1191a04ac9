"""thinker: the place of the ReAct fact check (seed 000). Until the Thinker's own issue lands,
this node passes the reply through unchanged and says so in the log and in its decision entry."""
from __future__ import annotations

import logging

from pipeline.services import Deps
from pipeline.state import PruefungRecord, TurnState

NAME = "thinker"
READS = ("stimulus", "draft")
WRITES = ("pruefung",)

log = logging.getLogger("novaberg.node.thinker")


async def run(state: TurnState, deps: Deps) -> dict:
    log.info("thinker: not built yet (seed 000 has its own issue): the reply passes unchecked")
    deps.trace.decision(NAME, "thinker.schnellcheck", "durchgereicht_ungebaut", {"zeichen": len(state.draft.reply)})
    return {"pruefung": PruefungRecord(status="durchgereicht_ungebaut")}
