"""sachlage: find the acute objects of the turn (claims, named things) and research the first one
once on the web. The Thinker's first web search is served from these hits (seed 000 §4.4)."""
from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field

from pipeline.llm_json import ask_json
from pipeline.services import Deps
from pipeline.state import SachlageRecord, TurnState

NAME = "sachlage"
READS = ("stimulus",)
WRITES = ("sachlage",)
MAX_OBJEKTE = 3

log = logging.getLogger("novaberg.node.sachlage")


class _Objekt(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    behauptung: str = ""


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    objekte: list[_Objekt] = Field(default_factory=list)


async def run(state: TurnState, deps: Deps) -> dict:
    answer, outcome = await ask_json(deps, NAME, _Antwort, {"nachricht": state.stimulus.text})
    objekte = [o.model_dump() for o in (answer.objekte if answer else [])][:MAX_OBJEKTE]
    objekte = [o for o in objekte if o["name"].strip()]
    web = deps.services.web
    if not objekte:
        status = "keine_objekte"
    elif web is None or not web.configured:
        # the web layer is not configured on this deployment: the objects stay unresearched
        status = "keine_suchmaschine"
        log.warning("sachlage: fallback keine_suchmaschine: %d objects found, no web provider configured", len(objekte))
    else:
        try:
            found = await web.search(objekte[0]["name"])
            objekte[0]["recherche"] = found["treffer"]
            status = "recherchiert" if found["treffer"] else "recherche_leer"
        except Exception as e:
            status = "recherche_gescheitert"
            log.warning("sachlage: fallback recherche_gescheitert: %s: %s", type(e).__name__, e)
    deps.trace.decision(NAME, "sachlage.recherche", status, {"objekte": len(objekte), "antwort": outcome})
    return {"sachlage": SachlageRecord(objekte=objekte)}
