"""db_zugriff: load the pair's character data and profiles from Postgres (through the store
deployment, where connections are pooled), and Nova's emotion state as the pair's last turn left
it: from its commit in Redis, else from Postgres (where the turn's outbox job puts it)."""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from pipeline.node import Node
from pipeline.services import Deps
from core.state import NovaZustandRecord, PairRecord, Stimulus, TurnState
from pipeline.trace import Slot

NAME = "db_zugriff"
NODE = Node(
    name=NAME,
    reads=("stimulus",),
    writes=("pair",),
    store_reads=("beziehung", "zustand"),
    at_start_reads=("beziehung", "zustand"),
)
"""What `vorab` reads at the turn's start: only the character chain writes it, after this node."""

log = logging.getLogger("novaberg.node.db_zugriff")

PAAR: Slot[dict] = Slot("db_zugriff.pair")
"""The pair's data, read from the turn's start on (`vorab`), for `run`."""


@NODE.at_turn_start
def vorab(deps: Deps, s: Stimulus) -> asyncio.Future:
    """The pair's data, read from the turn's start on (beside perzeption's model call) and once."""
    return deps.trace.start_once(PAAR, lambda: _lesen(deps, s))


async def _lesen(deps: Deps, s: Stimulus) -> dict:
    row, zustand = await asyncio.gather(deps.store.load_pair(s.user_id, s.character_id),
                                        deps.session.load_zustand(s.user_id, s.character_id))
    return mit_zustand(row, zustand)


def mit_zustand(row: dict, zustand: NovaZustandRecord | None) -> dict:
    """The pair's row with Nova's emotion state from the last turn's commit, unless Postgres holds a
    later one (a Redis that lost or never had it: the outbox job has put it in Postgres)."""
    if zustand is None:
        return row
    stand = row.get("emotion_stand")
    if stand is not None and datetime.fromisoformat(stand) > zustand.stand:
        return row
    return {**row, "nova_emotion": zustand.emotion, "nova_arousal": float(zustand.arousal),
            "emotion_found": True, "emotion_stand": zustand.stand.isoformat()}


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    row = await vorab(deps, s)
    if row["character_found"]:
        name = row["character_name"]
        outcome = "charakter_geladen"
    else:
        # The ingress refuses unknown characters (404); this is reached only when a character was
        # removed while its turn or event was on the way. The turn ends with the id as name, loudly.
        name = s.character_id.replace("_", " ").title()
        outcome = "charakter_unbekannt"
        log.warning("db_zugriff: fallback charakter_unbekannt: no character %r, name taken from the id (%s)",
                    s.character_id, name)
    deps.trace.decision(NAME, "db_zugriff.charakter", outcome,
                        {"character_id": s.character_id, "profil_gefunden": row["profile_found"],
                         "direktiven": len(row["direktiven"]), "anweisungen": len(row["anweisungen"])})
    if not row["emotion_found"]:
        log.info("db_zugriff: no persisted emotion state for %s:%s (cold start): neutral", s.user_id, s.character_id)
    fields = {k: row[k] for k in ("charakter_anweisung", "identitaet", "sprechweise", "szenario", "beispieldialog",
                                  "nova_kern", "nova_adaptiv", "nova_emotions",
                                  "nova_intentionen", "nova_beziehung", "mensch_kern", "mensch_beziehung", "mensch_themen", "direktiven",
                                  "anweisungen",
                                  "nova_emotion", "nova_arousal")}
    return {"pair": PairRecord(character_name=name, **fields)}
