"""[FAKTEN]: what the judging nodes — the tribunal and the corrector — judge a reply against.

The memory as the reducer shaped it for them (the pair's standing entries first), then today in
the pair's time zone (weekday, date, time), the appointments the turn asked for (the router's
read) and what agents completed in this turn (an appointment entered now is the result, not an
invention — seed 000 §3.2): what changes every turn comes last, so an engine reuses what stood
before it. Seed 004 puts the
remedy for an invented weekday here: the responder's input was right, the check must see the date.

Today is the turn's own time (`stimulus.received_at`), so a turn is judged against the day it
arrived on, and a test can fix it.
"""
from __future__ import annotations

from core.state import TurnState
from pipeline.timefmt import heute_text, termin_text

PROMPT = "fakten"


def termine(state: TurnState) -> str:
    route = state.route
    if not route or not route.termine:
        return "- (keine gefragt)"
    return "\n".join(f"- {termin_text(t)}" for t in route.termine)


def erledigt(state: TurnState) -> str:
    done = [r for r in (state.plan.agent_results if state.plan else []) if r.status == "abgeschlossen"]
    return "; ".join(str((r.ergebnis or {}).get("beschreibung") or f"{r.agent_name}: erledigt") for r in done) or "nichts"


def block(state: TurnState, deps, model: str) -> str:
    """The rendered [FAKTEN] block (prompts/default/fakten.block.txt)."""
    kontext = state.kontext
    return deps.prompts.render(
        PROMPT, "block", model, heute=heute_text(deps.settings.timezone, state.stimulus.received_at),
        termine=termine(state), erledigt=erledigt(state),
        gedaechtnis=(kontext.gedaechtnis_tribunal if kontext else "") or "- (nichts)")
