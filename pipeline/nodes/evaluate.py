"""evaluate: pass → on; a defect → the corrector rewrites and the tribunal judges again, at most
MAX_RUNDEN times. The last acceptable version ships.

An unclear verdict (the tribunal's answer was unusable, or a defect without a reason) keeps the
reply as it stands, under the named fallback `unklar_behalten` — a warning in the log and the
decision entry with the tribunal's reason. Decided from seed 000: a check that reaches no result
leaves the reply unchanged (§3: "Wenn nach 5 Durchläufen kein Ergebnis vorliegt, bleibt die
Antwort unverändert"), such a case is its own exit and never silent (§2a, `korrektur_ohne_text`),
and a broken judge does not replace Nova's voice with a model's rewrite (§3.5). Sending it to the
corrector would give it nothing to fix. The deterministic leak guard (`leckschutz`) still runs
after the loop, so the one defect that needs no judge is caught either way."""
from __future__ import annotations

import logging

from pipeline.node import Node
from pipeline.services import Deps
from core.state import TurnState, Urteil

NAME = "evaluate"
NODE = Node(
    name=NAME,
    reads=("stimulus", "urteil"),
    writes=("urteil",),
)
MAX_RUNDEN = 2
UNKLAR = "unklar_behalten"

log = logging.getLogger("novaberg.node.evaluate")


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    u = state.urteil
    last = u.urteile[-1] if u.urteile else Urteil(urteil="unklar", gruende=["kein_urteil"])
    if last.urteil == "mangel" and u.runden < MAX_RUNDEN:
        outcome, bestanden = "korrektur", False
    elif last.urteil == "mangel":
        outcome, bestanden = "grenze_erreicht", True
    elif last.urteil == "ok":
        outcome, bestanden = "bestanden", True
    else:
        outcome, bestanden = UNKLAR, True
        log.warning("evaluate: fallback %s: the tribunal's verdict was unclear (%s) in round %d; the reply "
                    "stands as it is (turn %s)", UNKLAR, ", ".join(last.gruende), u.runden, state.stimulus.turn_id)
    deps.trace.decision(NAME, "evaluate.entscheidung", outcome,
                        {"runde": u.runden, "urteil": last.urteil, "gruende": last.gruende},
                        threshold=MAX_RUNDEN)
    return {"urteil": u.model_copy(update={"bestanden": bestanden})}
