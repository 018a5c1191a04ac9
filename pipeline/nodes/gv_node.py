"""gv_node: the conversation vector — the landscape cluster, its description (third person, as
an analyst), tool and vehicle. Stored in Redis `gv:detail:{user}:{character}` for the next
turn's enricher.

The cluster chosen here is the next turn's: this turn's reply is shaped by the previous turn's
(seed 004 §4.1: "Der Ton folgt dem Nutzer sofort, die Landschaft mit ein bis zwei Turns Verzug";
seed 001 §5: "Der GV-Cluster kommt immer aus dem Vorturn"), which the enricher read
(`memory.cluster_vorturn`, `paradox` when no turn wrote one). Description, tool and vehicle are
this turn's."""
from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict

from pipeline import vocab
from pipeline.llm_json import ask_json, wort
from memory.session import fenster
from memory.session_store import gv_key  # noqa: F401 (the detail's key, named beside the node that writes it)
from pipeline.node import Node
from pipeline.nodes.perzeption import VERLAUF_TURNS, kurzverlauf
from pipeline.services import Deps
from core.state import LandschaftRecord, TurnState

NAME = "gv_node"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "memory", "perzeption", "emotion", "route"),
    writes=("landschaft",),
    store_writes=("gv",),
)

log = logging.getLogger("novaberg.node.gv_node")


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    cluster: str = wort(vocab.CLUSTER, "paradox")
    gv_detail: str = ""
    werkzeug: str = wort(vocab.WERKZEUGE, "Impuls")
    vehikel: str = "Aussage"


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    p, e, r = state.perzeption, state.emotion, state.route
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "character_name": state.pair.character_name,
        "verlauf": kurzverlauf(fenster(state.memory.session_turns, VERLAUF_TURNS)), "nachricht": s.text,
        "cluster": ", ".join(vocab.CLUSTER), "werkzeuge": ", ".join(vocab.WERKZEUGE),
        "emotion": p.emotion if p else "neutral", "vektor": e.emotions_vektor if e else "plateau",
        "dynamik": p.beziehungs_dynamik if p else "neutral", "momentum": r.momentum if r else "mid"})
    if answer is None:
        rec, status = LandschaftRecord(), f"fallback_{outcome}"
    else:
        cluster = answer.cluster.strip().lower()
        if cluster not in vocab.CLUSTER:
            log.warning("gv_node: fallback paradox: cluster %r is none of the 14", answer.cluster)
            cluster, status = "paradox", "cluster_unbekannt"
        else:
            status = "ok"
        werkzeug = vocab.pick(answer.werkzeug.strip().capitalize(), vocab.WERKZEUGE, "Impuls")
        rec = LandschaftRecord(cluster=cluster, gv_detail=answer.gv_detail[:400], werkzeug=werkzeug,
                               vehikel=answer.vehikel[:40] or "Aussage")
    # the detail as it was, for taking the turn back
    await deps.landschaft.schreiben(s.user_id, s.character_id, s.turn_id, rec)
    vorturn = state.memory.cluster_vorturn if state.memory else "paradox"
    deps.trace.decision(NAME, "gv_node.cluster", rec.cluster, {"status": status, "landschaft": vorturn})
    return {"landschaft": rec.model_copy(update={"cluster": vorturn})}
