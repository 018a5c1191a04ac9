"""responder (seed 004): write Nova's reply.

Stable blocks (role, profiles, rules, directives, character instruction) form the system message;
everything that changes every turn (history, stimulus, time, direction) comes last, in the user
message, so the engine reuses the cached prefix (RAY-NOTES: memories placed last halved LLM time).
"""
from __future__ import annotations

import logging

from pipeline.services import Deps
from pipeline.state import DraftRecord, SessionTurn, TurnState
from pipeline.timefmt import local_now, wochentag

NAME = "responder"
READS = ("stimulus", "pair", "memory")
WRITES = ("draft",)
SPANNE = "zwei bis drei Saetzen"

log = logging.getLogger("novaberg.node.responder")


def _verlauf(turns: list[SessionTurn]) -> str:
    if not turns:
        return "(Das Gespraech beginnt gerade.)"
    n = len(turns)
    lines = []
    for i, t in enumerate(turns, 1):
        info = f" ({t.emotion}, a={t.arousal:.1f})" if t.emotion and t.arousal is not None else ""
        lines.append(f"----- Turn {i} von {n}{info} -----\n{t.sprecher}: {t.inhalt}")
    return "\n".join(lines)


def _or(text: str, fallback: str) -> str:
    return text.strip() or fallback


def build_messages(state: TurnState, deps: Deps, model: str) -> tuple[list[dict], dict]:
    s, p, m = state.stimulus, state.pair, state.memory
    pr = deps.prompts
    name = p.character_name
    person_a = "\n".join(
        f"{label}: {value}" for label, value in (
            ("Gewachsene Persoenlichkeit", p.nova_kern), ("Was sie gerade beschaeftigt", p.nova_adaptiv),
            ("Emotionale Grundstimmung", p.nova_emotions), ("Ihre Art zu kommunizieren", p.nova_intentionen),
            ("Wie sie Person B sieht", p.nova_beziehung)) if value.strip()
    ) or f"{name} lernt Person B gerade erst kennen; ihr Bild von sich waechst mit dem Gespraech."
    system_parts = [
        pr.render(NAME, "identity", model, character_name=name, person_a=person_a,
                  person_b=_or(p.mensch_kern, "Noch unbekannt.")),
        pr.render(NAME, "rules", model, character_name=name, direktiven="Keine.",
                  wesen=_or(p.charakter_anweisung, f"{name} ist warm, neugierig und aufmerksam.")),
    ]
    now = local_now(deps.settings.timezone)
    common = dict(character_name=name, verlauf=_verlauf(m.session_turns), wochentag=wochentag(now),
                  datum=now.strftime("%d.%m.%Y"), uhrzeit=now.strftime("%H:%M"), spanne=SPANNE)
    if s.eigener_gedanke is not None:
        system_parts.append(pr.render(NAME, "gedanke", model, character_name=name, gedanke=s.eigener_gedanke))
        user = pr.render(NAME, "auftrag", model, **common)
        form = "verlauf_mit_auftrag" if m.session_turns else "auftrag_ohne_verlauf"
    else:
        user = pr.render(NAME, "task", model, aktueller_prompt=s.user_prompt, **common)
        form = "verlauf_mit_reiz" if m.session_turns else "reiz_ohne_verlauf"
    system = "\n\n".join(system_parts)
    inputs = {"eigener_gedanke": s.eigener_gedanke is not None, "verlauf_beitraege": len(m.session_turns),
              "reiz_zeichen": len(s.text), "system_zeichen": len(system)}
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], {"form": form, **inputs}


async def run(state: TurnState, deps: Deps) -> dict:
    model = await deps.llm.model_name()
    messages, info = build_messages(state, deps, model)
    deps.trace.decision(NAME, "responder.nachricht", info.pop("form"), info)
    log.debug("Responder: System-Prompt:\n%s", messages[0]["content"])
    result = await deps.llm.chat(deps.trace, NAME, messages, stream_tokens=True)
    reply = result.content.strip()
    outcome = "antwort" if reply else "leer"
    deps.trace.decision(NAME, "responder.ergebnis", outcome,
                        {"zeichen": len(reply), "token": result.completion_tokens})
    if not reply:
        log.warning("responder: fallback leer_wiederholung: empty reply (finish %s), asking once more",
                    result.finish_reason)
        result = await deps.llm.chat(deps.trace, NAME, messages, stream_tokens=True)
        reply = result.content.strip()
        deps.trace.decision(NAME, "responder.ergebnis", "antwort" if reply else "leer",
                            {"zeichen": len(reply), "token": result.completion_tokens, "wiederholung": True})
    return {"draft": DraftRecord(reply=reply, model=result.model or model,
                                 prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                                 reasoning=result.reasoning,
                                 prompt_variant=deps.prompts.variant(NAME, "identity", model))}
