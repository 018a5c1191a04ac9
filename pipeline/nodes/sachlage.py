"""sachlage: find the acute objects of the turn (claims, named things) and research the first one
once on the web. The Thinker's first web search is served from these hits (seed 000 §4.4).

"Die Sachlage sucht mit dem Wortlaut-Filter, der Thinker liest die Seite nach — dieselbe Suche,
zwei Leser" (seed 000 §4.4): a hit enters the research only when its title or snippet names the
thing in its wording — a word of the object's name stands in it. A search engine answers a rare
name with whatever shares a word of the query; the Thinker would fetch the first of those pages and
check the reply against it. The seeds name the filter, not its rule; the rule here is the plainest
reading of "Wortlaut". When no hit names the thing the research is empty, and the Thinker's first
search goes to the provider as on a turn without research (seed 000 §4.4; its log line is in
`pipeline/thinker/budget.py`)."""
from __future__ import annotations

import logging
import re
from typing import Callable

from pydantic import BaseModel, ConfigDict, Field

from pipeline.llm_json import ask_json
from pipeline.node import Node
from pipeline.services import Deps
from core.state import SachlageRecord, TurnState

NAME = "sachlage"
NODE = Node(
    name=NAME,
    reads=("stimulus",),
    writes=("sachlage",),
)
MAX_OBJEKTE = 3
KURZWORT = 4
"""Words of a name shorter than this must stand as whole words in a hit ("ISS" is not in "Kiss");
longer ones may carry an ending ("Tritium" in "Tritiums")."""

log = logging.getLogger("novaberg.node.sachlage")


class _Objekt(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    behauptung: str = ""


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    objekte: list[_Objekt] = Field(default_factory=list)


def nennt_die_sache(name: str, treffer: dict) -> bool:
    """The wording filter: does this hit name the thing — a word of its name in title or snippet?"""
    woerter = re.findall(r"\w+", name.lower())
    woerter = [w for w in woerter if len(w) >= KURZWORT] or woerter
    text = f"{treffer.get('titel', '')} {treffer.get('snippet', '')}".lower()
    return any(w in text if len(w) >= KURZWORT else re.search(rf"\b{re.escape(w)}\b", text) for w in woerter)


async def _recherche(web, objekt: dict, said: Callable[[str], str]) -> tuple[str, dict]:
    """One search for the object's name; only the hits that name it stay (the wording filter)."""
    try:
        found = await web.search(objekt["name"])
    except Exception as e:
        log.warning("sachlage: fallback recherche_gescheitert: %s: %s", type(e).__name__, e)
        return "recherche_gescheitert", {}
    alle = found["treffer"]
    objekt["recherche"] = [h for h in alle if nennt_die_sache(objekt["name"], h)]
    zahlen = {"treffer": len(alle), "nennen_die_sache": len(objekt["recherche"])}
    log.info("sachlage: wording filter: %d hits, %d name %s", len(alle), len(objekt["recherche"]), said(objekt["name"]))
    if objekt["recherche"]:
        return "recherchiert", zahlen
    return ("recherche_ohne_sache" if alle else "recherche_leer"), zahlen


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    answer, outcome = await ask_json(deps, NAME, _Antwort, {"nachricht": state.stimulus.text})
    objekte = [o.model_dump() for o in (answer.objekte if answer else [])][:MAX_OBJEKTE]
    objekte = [o for o in objekte if o["name"].strip()]
    web, zahlen = deps.services.web, {}
    if not objekte:
        status = "keine_objekte"
    elif web is None or not web.configured:
        # the web layer is not configured on this deployment: the objects stay unresearched
        status = "keine_suchmaschine"
        log.warning("sachlage: fallback keine_suchmaschine: %d objects found, no web provider configured", len(objekte))
    else:
        status, zahlen = await _recherche(web, objekte[0], deps.settings.said)
    deps.trace.decision(NAME, "sachlage.recherche", status, {"objekte": len(objekte), "antwort": outcome, **zahlen})
    return {"sachlage": SachlageRecord(objekte=objekte)}
