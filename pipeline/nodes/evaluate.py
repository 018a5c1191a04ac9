"""evaluate: pass → on; a defect → the corrector rewrites and the tribunal judges again, at most
MAX_RUNDEN times. An unclear verdict (the tribunal's answer was unusable) passes: the reply is not
held back by a broken judge, and the entry says so. The last acceptable version ships."""
from __future__ import annotations

from pipeline.services import Deps
from pipeline.state import TurnState

NAME = "evaluate"
READS = ("stimulus", "urteil")
WRITES = ("urteil",)
MAX_RUNDEN = 2


async def run(state: TurnState, deps: Deps) -> dict:
    u = state.urteil
    last = u.urteile[-1]["urteil"] if u.urteile else "unklar"
    if last == "mangel" and u.runden < MAX_RUNDEN:
        outcome, bestanden = "korrektur", False
    elif last == "mangel":
        outcome, bestanden = "grenze_erreicht", True
    else:
        outcome, bestanden = ("bestanden" if last == "ok" else "unklar_durchgelassen"), True
    deps.trace.decision(NAME, "evaluate.entscheidung", outcome, {"runde": u.runden, "urteil": last},
                        threshold=MAX_RUNDEN)
    return {"urteil": u.model_copy(update={"bestanden": bestanden})}
