"""The user's notes (seed 001 §3.2, the NotizenManager's two branches).

Targeted (`gezielt_*`): the human asks about a specific note — the message names a note and its
target (`regeln.notiz_ziel`, read without a model: the plugin runs in the enricher, before the
router classifies the turn). The target is looked up by keyword (name, topics) first, then in the
notes' full text (name, body, summary); the hits come back with their text.
Proactive (`proaktiv`): otherwise every active note of the user, with name, summary and topics. A
targeted search without a hit says so (`gezielt_ohne_treffer`) and lists proactively.
Every run writes the decision entry `enricher.notizen` naming the branch taken.
"""
from __future__ import annotations

import logging

from core.beziehung import Notiz
from pipeline import regeln
from pipeline.plugins.plugin import Plugin

GEZIELT_KAPPUNG = 3
INHALT_ZEICHEN = 300

log = logging.getLogger("novaberg.plugin.notizen")


def _treffer(n: Notiz) -> dict:
    return {"id": n.id, "name": n.name, "zusammenfassung": n.zusammenfassung, "themen": n.themen,
            "inhalt": n.inhalt[:INHALT_ZEICHEN]}


async def gezielt(deps, user_id: str, ziel: str) -> tuple[list[dict], str]:
    """The notes the target names: by keyword, then by full text; (hits, branch)."""
    hits = await deps.store.notizen.find_by_keyword(user_id, ziel, GEZIELT_KAPPUNG)
    if hits:
        return [_treffer(n) for n in hits], "gezielt_stichwort"
    hits = await deps.store.notizen.find_fulltext(user_id, ziel, GEZIELT_KAPPUNG)
    if hits:
        return [_treffer(n) for n in hits], "gezielt_volltext"
    return [], "gezielt_ohne_treffer"


async def enrich(state, deps, such) -> list[dict]:
    s = state.stimulus
    ziel = regeln.notiz_ziel(s.user_prompt) if s.user_prompt else None
    hits, zweig = await gezielt(deps, s.user_id, ziel) if ziel else ([], "proaktiv")
    if not hits:
        if zweig == "gezielt_ohne_treffer":
            log.info("notizen: fallback gezielt_ohne_treffer: no note matches %s; listing all notes",
                     deps.settings.said(ziel))
        hits = [n.model_dump() for n in await deps.store.notizen.proactive_listing(s.user_id)]
    deps.trace.decision("enricher", "enricher.notizen", zweig,
                        {"ziel": ziel, "treffer": len(hits), "kappung": GEZIELT_KAPPUNG if ziel else None})
    return hits


PLUGIN = Plugin(name="notizen", enrich=enrich, suchschluessel=False)
"""Reads the message, not the search key: the enricher starts it beside the query rewrite."""
