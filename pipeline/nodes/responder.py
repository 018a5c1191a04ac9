"""responder (seed 004): write Nova's reply from a script, not a report.

System message, stable across turns so the engine reuses the prefix: [ROLLE], [PERSON A — WER SIE
IST], [PERSON B — WER ER IST], [ZWISCHEN BEIDEN], [REGELN], [DIREKTIVEN], [PERSON A — IHR WESEN];
on an impulse turn [EIGENER GEDANKE] joins it. User message: [FRUEHER IM GESPRAECH] (the session
summary, once turns have left the window), [GESPRAECHSVERLAUF], then the blocks
that change every turn in the order of seed 004 §3.1 ([SZENE], [PERSON A — IHRE EMOTION],
[AUFGABE], [PERSON B — WIE ER GERADE DA IST], [INHALT]), then [AKTUELLER PROMPT] (or the impulse
order), [DEIN SPRACHSTIL] and [REGIE FUER DIESE REPLIK] last. The per-turn blocks stand after the
history, not in the system message: placed early they would force the engine to re-read the whole
history every turn (RAY-NOTES: memories placed last halved LLM time).
"""
from __future__ import annotations

import logging

from pipeline.figur import einsetzen
from pipeline.services import Deps
from pipeline.state import DraftRecord, SessionTurn, TurnState
from pipeline.timefmt import local_now, wochentag

NAME = "responder"
READS = ("stimulus", "pair", "memory", "perzeption", "emotion", "plan", "landschaft", "haltung", "verfasser")
WRITES = ("draft",)
DEFAULT_SPANNE = "zwei bis drei Saetzen"

EI_MIKRO = {
    "absturz": " Person B ist gerade abgestuerzt: erst da sein, dann erst Inhalt.",
    "einbruch": " Die Stimmung von Person B ist eingebrochen: behutsam.",
    "spirale": " Person B dreht sich nach unten: nicht mitdrehen, Halt geben.",
    "erholung": " Person B erholt sich: das darf man spueren lassen.",
}

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


def _haltung_text(h) -> str:
    naehe = "nah" if h.naehe >= 0.65 else ("zurueckhaltend" if h.naehe <= 0.35 else "offen")
    waerme = "warm" if h.waerme >= 0.7 else "freundlich"
    return f"{naehe}, {waerme}"


def wesen(p) -> str:
    """[PERSON A — IHR WESEN], the binding block last (seed 004 §3.1): the character's instructions,
    her way of speaking and how she sounds, from her character record."""
    name = p.character_name
    teile = [einsetzen(x, name) for x in [p.charakter_anweisung] + p.anweisungen if x.strip()]
    if p.sprechweise.strip():
        teile.append(f"Wie {name} spricht: {einsetzen(p.sprechweise, name)}")
    if p.beispieldialog.strip():
        teile.append(f"So klingt {name} (Beispiele fuer ihren Ton, nicht woertlich wiederholen):\n"
                     f"{einsetzen(p.beispieldialog, name).strip()}")
    return "\n".join(teile) or f"{name} ist warm, neugierig und aufmerksam."


def achsen(h) -> str:
    """The attitude's axes for [SZENE] (seed 004 §3.3: the situation in three grains, among the
    axes the initiative); nothing when haltungsraum did not run."""
    if h is None:
        return ""
    return (f" Achsen: Naehe {h.naehe:.1f}, Waerme {h.waerme:.1f}, Energie {h.energie}, "
            f"Initiative {h.initiative:.1f} (hoch: sie fuehrt das Gespraech, niedrig: sie folgt ihm).")


def _saetze(text: str) -> str:
    """A grown profile (one sentence a line, newest last) on one line."""
    return " ".join(x.strip() for x in text.split("\n") if x.strip())


def zwischen_beiden(p) -> str:
    """[ZWISCHEN BEIDEN]: both directions, labelled (seed 004 §3.3) — (nova, mensch) and
    (mensch, nova) are different statements, not two versions of one."""
    name = p.character_name
    zeilen = [f"{label}: {einsetzen(_saetze(value), name)}" for label, value in (
        (f"Wie {name} Person B sieht", p.nova_beziehung), (f"Wie Person B {name} begegnet", p.mensch_beziehung))
        if value.strip()]
    return "\n".join(zeilen) or "Die beiden kennen sich noch nicht lange."


CHARS_PER_TOKEN = 2.5  # a cautious estimate for German text; the engine counts exactly
TRIM_BLOCK = 4  # the history is cut in blocks, not turn by turn, so the cached prefix survives


def fit_history(turns: list[SessionTurn], other_chars: int, deps: Deps) -> tuple[list[SessionTurn], int]:
    """Drop the oldest turns, a block at a time, until the prompt fits the engine's context."""
    from pipeline.node_config import node_config

    budget = (deps.settings.llm_ctx - min(node_config(NAME).max_tokens, deps.settings.llm_max_tokens)) * CHARS_PER_TOKEN
    dropped = 0
    while turns and other_chars + len(_verlauf(turns)) > budget:
        turns = turns[TRIM_BLOCK:]
        dropped += TRIM_BLOCK
    return turns, dropped


def build_messages(state: TurnState, deps: Deps, model: str) -> tuple[list[dict], dict]:
    s, p, m = state.stimulus, state.pair, state.memory
    pr = deps.prompts
    name = p.character_name
    blocks: list[str] = []
    person_a = "\n".join(
        f"{label}: {einsetzen(value, name)}" for label, value in (
            ("Wie sie angelegt ist", p.identitaet),
            ("Gewachsene Persoenlichkeit", _saetze(p.nova_kern)),
            ("Was sie gerade beschaeftigt", _saetze(p.nova_adaptiv)),
            ("Emotionale Grundstimmung", _saetze(p.nova_emotions)),
            ("Ihre Art zu kommunizieren", _saetze(p.nova_intentionen)))
        if value.strip()
    ) or f"{name} lernt Person B gerade erst kennen; ihr Bild von sich waechst mit dem Gespraech."
    zwischen = zwischen_beiden(p)
    system_parts = [
        pr.render(NAME, "identity", model, character_name=name, person_a=person_a,
                  szenario=f"\nDie Szene, in der die beiden sich begegnen: {einsetzen(p.szenario, name)}"
                  if p.szenario.strip() else "",
                  person_b=_or(p.mensch_kern, "Noch unbekannt."), zwischen=zwischen),
        pr.render(NAME, "rules", model, character_name=name,
                  direktiven="\n".join(f"- {d}" for d in p.direktiven) or "Keine.", wesen=wesen(p)),
    ]
    if s.eigener_gedanke is not None:
        system_parts.append(pr.render(NAME, "gedanke", model, character_name=name, gedanke=s.eigener_gedanke))

    lage: list[str] = []
    if state.landschaft:
        l = state.landschaft
        lage.append(pr.render(NAME, "szene", model, cluster=l.cluster, gv_detail=l.gv_detail, character_name=name,
                              sektor=state.emotion.nova_sektor if state.emotion else "neutral",
                              achsen=achsen(state.haltung)))
        blocks.append("SZENE")
    if state.emotion:
        lage.append(pr.render(NAME, "emotion", model, character_name=name, emotion=state.emotion.nova_emotion,
                              arousal=f"{state.emotion.nova_arousal:.1f}",
                              konflikt=" " + pr.render(NAME, "konflikt", model, character_name=name)
                              if state.emotion.konflikt else ""))
        blocks.append("PERSON A — IHRE EMOTION")
    cut = bool(state.plan and state.plan.task_context_cut)
    if state.plan and state.plan.task_block:
        lage.append(pr.render(NAME, "aufgabe", model, task_block=state.plan.task_block))
        blocks.append("AUFGABE")
    if state.perzeption and s.user_prompt is not None:
        pz = state.perzeption
        # ei_calc's plausibility check: a register that contradicts his emotion is not passed on
        modus = pz.gespraechs_modus if not state.emotion or state.emotion.modus_plausibel else "unklar"
        lage.append(pr.render(NAME, "person_b", model, emotion=pz.emotion, modus=modus,
                              dynamik=pz.beziehungs_dynamik,
                              vektor=state.emotion.emotions_vektor if state.emotion else "plateau"))
        blocks.append("PERSON B — WIE ER GERADE DA IST")
    if state.verfasser and state.verfasser.inhalt and not cut:
        lage.append(pr.render(NAME, "inhalt", model, character_name=name, inhalt=state.verfasser.inhalt))
        blocks.append("INHALT")

    # the session summary (seed 001 §3.1) holds what the window no longer shows: before the history
    frueher = pr.render(NAME, "frueher", model, character_name=name, zusammenfassung=m.zusammenfassung) \
        if m.zusammenfassung else ""
    now = local_now(deps.settings.timezone)
    fixed = sum(len(x) for x in system_parts + lage) + len(frueher) + len(s.text) + 600
    turns, dropped = fit_history(m.session_turns, fixed, deps)
    if dropped:
        log.warning("responder: fallback verlauf_gekuerzt: %d oldest turns left out to fit the context of %d tokens",
                    min(dropped, len(m.session_turns)), deps.settings.llm_ctx)
    common = dict(verlauf=_verlauf(turns), lage="\n\n".join(lage))
    if s.eigener_gedanke is not None:
        user_parts = [pr.render(NAME, "auftrag", model, character_name=name, **common)]
        form = "verlauf_mit_auftrag" if m.session_turns else "auftrag_ohne_verlauf"
    else:
        user_parts = [pr.render(NAME, "task", model, aktueller_prompt=s.user_prompt, **common)]
        form = "verlauf_mit_reiz" if m.session_turns else "reiz_ohne_verlauf"
    if frueher:
        user_parts.insert(0, frueher)
    stil = state.emotion.sprach_stil if state.emotion else ""
    if stil:
        user_parts.append(pr.render(NAME, "stil", model, stil=stil, character_name=name))
    else:
        log.info("responder: [DEIN SPRACHSTIL] omitted: no language style this turn")
    h, l = state.haltung, state.landschaft
    user_parts.append(pr.render(
        NAME, "regie", model, wochentag=wochentag(now), datum=now.strftime("%d.%m.%Y"), uhrzeit=now.strftime("%H:%M"),
        werkzeug=l.werkzeug if l else "Impuls", vehikel=l.vehikel if l else "Aussage",
        spanne=f"{h.umfang}, {h.spanne}" if h else DEFAULT_SPANNE, haltung=_haltung_text(h) if h else "offen, freundlich",
        energie=h.energie if h else "ruhig",
        mikro=EI_MIKRO.get(state.emotion.emotions_vektor, "") if state.emotion else ""))
    system = "\n\n".join(system_parts)
    user = "\n\n".join(user_parts)
    inputs = {"eigener_gedanke": s.eigener_gedanke is not None, "verlauf_beitraege": len(m.session_turns),
              "reiz_zeichen": len(s.text), "system_zeichen": len(system), "bloecke": blocks,
              "sprachstil_block": bool(stil), "kontext_schnitt": cut, "verlauf_gekuerzt": min(dropped, len(m.session_turns)),
              "zusammenfassung_zeichen": len(m.zusammenfassung or "")}
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], {"form": form, **inputs}


async def run(state: TurnState, deps: Deps) -> dict:
    model = await deps.llm.model_name()
    messages, info = build_messages(state, deps, model)
    deps.trace.decision(NAME, "responder.nachricht", info.pop("form"), info)
    log.debug("Responder: System-Prompt:\n%s", messages[0]["content"])
    result = await deps.llm.chat(deps.trace, NAME, messages, stream_tokens=True)
    reply = result.content.strip()
    deps.trace.decision(NAME, "responder.ergebnis", "antwort" if reply else "leer",
                        {"zeichen": len(reply), "token": result.completion_tokens,
                         "inhalt_zeichen": len(state.verfasser.inhalt) if state.verfasser else 0})
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
