"""planner: pick the next agent (or none) and, when the agents are done, write the finished
[AUFGABE] block (Rückfrage, Erfolg, Verworfen, Fehler) and the context-cut flag. Several agents
in one turn: one order per loop, and after each agent result the planner decides again what is
still needed (seed 003, E9: a loop, not a queue) — its earlier plan is what it sees as planned. The interpretation
of agent results belongs here, not in the responder (seed 004, HALL2); a success addresses Nova as
the one who acted (seed 004 §3.1, item 3).

An order that asked back (a Rückfrage naming what is missing) stays pending for the pair
(memory/ausstehender_auftrag.py), and the next message of the human is read against it first:
it completes the order (the agent's rule `ergaenzen`, else the model, which sees the order in
[AUSSTEHEND]), is a new request (the pending order is dropped, named `ersetzt`), or does not
concern it (its counter advances; at `VERFALL_NACH_TURNS` it expires: fallback
`ausstehend_abgelaufen`). The planner reads the pending order in its first round and writes it
once, in the round that ends the loop, under the turn's id."""
from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memory import ausstehender_auftrag as ausstehend_store
from memory.ausstehender_auftrag import VERFALL_NACH_TURNS, AusstehenderAuftrag, Stand
from pipeline import regeln
from pipeline.agents import ergaenzung, registry, vorwaermen_starten
from pipeline.llm_json import ask_json
from pipeline.node import Node
from pipeline.services import Deps
from core.state import AgentResult, Auftrag, AusstehendLage, PlanRecord, TurnState
from pipeline.timefmt import local_now

NAME = "planner"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "route", "plan"),
    writes=("plan",),
    store_reads=("ausstehend",),
    store_writes=("ausstehend",),
)
MAX_AUFTRAEGE = 3

log = logging.getLogger("novaberg.node.planner")


WORT_CAP = 16
"""The longest agent or action name the engine may write (the longest named: `verschieben`)."""


class _Auftrag(BaseModel):
    """One order. Agent and action are short words (an unknown agent is dropped and the rules
    decide: held to the vocabulary, the embedded model picked a wrong agent that then counted);
    the parameters are a free object the engine keeps flat and short (`llm_json.FREI_WERT`)."""
    model_config = ConfigDict(extra="ignore")
    agent: str = Field(default="", json_schema_extra={"maxLength": WORT_CAP})
    aktion: str = Field(default="", json_schema_extra={"maxLength": WORT_CAP})
    parameter: dict = Field(default_factory=dict)


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    auftraege: list[_Auftrag] = Field(default_factory=list)


def task_block(name: str, results) -> tuple[str, bool]:
    """The [AUFGABE] block and whether the responder's context is cut (success, error, refusal).
    A look-up's success (an agent whose result carries `fundstellen`: wissen, dateien) brings what
    it found, under the label its agent gave it, or says that it found nothing."""
    lines, cut = [], False
    for r in results:
        e = r.ergebnis or {}
        if r.status == "abgeschlossen" and "fundstellen" in e:  # a look-up (wissen, dateien): what it found
            lines.append(f"Erfolg: {name} hat soeben selbst erledigt: {e.get('beschreibung', r.agent_name)}. "
                         + (f"Sie antwortet mit dem, was sie gefunden hat:\n{e['fundstellen']}" if e["fundstellen"]
                            else "Sie sagt offen, dass sie dazu nichts gefunden hat."))
            cut = True
        elif r.status == "abgeschlossen":
            lines.append(f"Erfolg: {name} hat soeben selbst erledigt: {e.get('beschreibung', r.agent_name)}. "
                         f"Sie sagt kurz, was sie getan hat.")
            cut = True
        elif r.status == "rueckfrage" and e.get("fehlt"):
            lines.append(f"Rueckfrage: {name} braucht noch eine Angabe, es fehlt: {e.get('angabe') or e['fehlt']}. "
                         f"Sie fragt genau danach: {e.get('frage')}")
        elif r.status == "rueckfrage":
            lines.append(f"Rueckfrage: {name} braucht noch eine Angabe und fragt genau danach: {e.get('frage')}")
        elif r.status == "verworfen":
            lines.append(f"Verworfen: {name} hat es nicht getan, weil {e.get('grund', 'es nicht ging')}. Sie sagt das offen.")
            cut = True
        else:
            lines.append(f"Fehler: {name} wollte es erledigen, es ist gescheitert ({r.fehler}). Sie sagt das offen "
                         f"und verspricht nichts.")
            cut = True
    return "\n".join(lines), cut


def bisher(results) -> str:
    """What the agents did so far in this turn, for the planner's next decision."""
    if not results:
        return "Noch nichts."
    return "\n".join(f"- {r.agent_name}: {r.status}" + (f" ({(r.ergebnis or {}).get('beschreibung')})"
                                                       if r.ergebnis and r.ergebnis.get("beschreibung") else "")
                     + (f" — {r.fehler}" if r.fehler else "") for r in results)


async def ausstehend_block(deps: Deps, p: AusstehenderAuftrag | None) -> str:
    """[AUSSTEHEND] of the planner's prompt: the order that waits for the human's answer
    (`planner.ausstehend.txt`), or that nothing does."""
    if p is None:
        return "Nichts."
    return deps.prompts.render(NAME, "ausstehend", await deps.llm.model_name(), agent=p.agent, aktion=p.aktion,
                               bekannt=", ".join(f"{k}={v}" for k, v in p.parameter.items()) or "nichts",
                               fehlt=", ".join(p.fehlt) or "unklar", frage=p.frage or "-")


async def _auftraege(deps: Deps, state: TurnState, plan: PlanRecord) -> tuple[list[Auftrag] | None, str]:
    """The orders still to do, as the model sees them now (None: no usable answer). In the first
    round it sees the pending order of the pair ([AUSSTEHEND])."""
    now = local_now(deps.settings.timezone, state.stimulus.received_at)
    lage = plan.ausstehend if plan.schleifen == 0 else None
    answer, outcome = await ask_json(deps, NAME, _Antwort, {
        "nachricht": state.stimulus.text, "heute": f"{now:%Y-%m-%d %H:%M}",
        "management": state.route.management if state.route else "keins",
        "bisher": bisher(plan.agent_results),
        "ausstehend": await ausstehend_block(deps, lage.vorher if lage else None),
        "geplant": ", ".join(f"{a.agent}/{a.aktion}" for a in plan.offen) or "nichts"})
    if answer is None:
        return None, outcome
    known = registry()
    return [Auftrag.model_validate(a.model_dump()) for a in answer.auftraege if a.agent in known][:MAX_AUFTRAEGE], outcome


async def _erste_auftraege(deps: Deps, state: TurnState, plan: PlanRecord) -> list[Auftrag]:
    """Round 0: the model's orders, else one by rule (named fallback `planner_regeln`: a dictated
    form of any kind first, then the router's management), else none."""
    rest, outcome = await _auftraege(deps, state, plan)
    rest = nur_verlangte_aenderungen(deps, state, rest or [])
    if rest:
        return woertlich(deps, state, rest)
    text = state.stimulus.text
    by_rule = regeln.diktat(state.route.management, text) or regeln.auftrag(state.route.management, text)
    if by_rule is None:
        return []
    log.warning("planner: fallback planner_regeln (answer %s): %s/%s by rule", outcome, by_rule["agent"],
                by_rule["aktion"])
    deps.trace.decision(NAME, "planner.quelle", "planner_regeln", {"antwort": outcome})
    return [Auftrag.model_validate(by_rule)]


def woertlich(deps: Deps, state: TurnState, rest: list[Auftrag]) -> list[Auftrag]:
    """A dictated request ("Notiz Einkauf: Milch, Brot", "Trag einen Termin ein: Zahnarzt, morgen
    um 14 Uhr") is written as dictated: the model's order of that kind gets the words the person
    spelled out, and where the model named no such order, the dictated one comes first (named
    fallback `diktat_woertlich`). Everything else the model planned stays."""
    d = regeln.diktat(state.route.management, state.stimulus.text)
    if d is None:
        return rest
    same = next((a for a in rest if (a.agent, a.aktion) == (d["agent"], d["aktion"])), None)
    if same is not None and all(same.parameter.get(k) == v for k, v in d["parameter"].items()):
        return rest
    log.warning("planner: fallback diktat_woertlich: %s/%s with the dictated %s", d["agent"], d["aktion"],
                ", ".join(d["parameter"]))
    deps.trace.decision(NAME, "planner.quelle", "diktat_woertlich",
                        {"modell": same.parameter if same is not None else None, "diktat": d["parameter"]})
    if same is not None:
        return [a.model_copy(update={"parameter": {**a.parameter, **d["parameter"]}}) if a is same else a for a in rest]
    return [Auftrag.model_validate(d), *rest][:MAX_AUFTRAEGE]


def ohne_wiederholung(rest: list[Auftrag], plan: PlanRecord) -> tuple[list[Auftrag], list[Auftrag]]:
    """The orders minus those of a kind (agent, action) this turn has done and no longer had
    planned: a model that names its finished order again does not write it twice."""
    done = {(r.auftrag.agent, r.auftrag.aktion) for r in plan.agent_results if r.auftrag}
    planned = {(a.agent, a.aktion) for a in plan.offen}
    keep = [a for a in rest if (a.agent, a.aktion) not in done or (a.agent, a.aktion) in planned]
    return keep, [a for a in rest if a not in keep]


AENDERND = ("aendern", "verschieben", "loeschen", "deaktivieren", "ersetzen", "zusammenfassen")
"""Actions that change what an earlier order of the same agent wrote (the charakter agent's lift,
replace and merge of instructions among them)."""


def nur_verlangte_aenderungen(deps: Deps, state: TurnState, rest: list[Auftrag]) -> list[Auftrag]:
    """An order that changes, moves or deletes what is stored (`AENDERND`) runs only when the
    message asks for a change (`regeln.aenderung_verlangt`): a question the model answered with
    "notizen/loeschen" loses nothing (named fallback `aenderung_ungefragt`)."""
    if regeln.aenderung_verlangt(state.stimulus.text):
        return rest
    weg = [a for a in rest if a.aktion in AENDERND]
    if weg:
        log.warning("planner: fallback aenderung_ungefragt: %s dropped, the message asks for no change",
                    ", ".join(f"{a.agent}/{a.aktion}" for a in weg))
        deps.trace.decision(NAME, "planner.quelle", "aenderung_ungefragt",
                            {"verworfen": [f"{a.agent}/{a.aktion}" for a in weg]})
    return [a for a in rest if a not in weg]


def diktat_bleibt(deps: Deps, state: TurnState, plan: PlanRecord, rest: list[Auftrag]) -> list[Auftrag]:
    """Once the dictated order of this turn is done, the planner's later orders do not change what
    was dictated: an order of the same agent that changes, moves or deletes (`AENDERND`) is dropped
    (named fallback `diktat_bleibt`) — the model re-planning after the result had the note written
    again in its own words."""
    d = regeln.diktat(state.route.management, state.stimulus.text) if state.route else None
    if d is None or not any(r.auftrag and (r.auftrag.agent, r.auftrag.aktion) == (d["agent"], d["aktion"])
                            and r.status == "abgeschlossen" for r in plan.agent_results):
        return rest
    weg = [a for a in rest if a.agent == d["agent"] and a.aktion in AENDERND]
    if weg:
        log.warning("planner: fallback diktat_bleibt: %s dropped, the dictated %s/%s is written",
                    ", ".join(f"{a.agent}/{a.aktion}" for a in weg), d["agent"], d["aktion"])
        deps.trace.decision(NAME, "planner.quelle", "diktat_bleibt", {"verworfen": [f"{a.agent}/{a.aktion}" for a in weg]})
    return [a for a in rest if a not in weg]


async def _neu_entscheiden(deps: Deps, state: TurnState, plan: PlanRecord) -> list[Auftrag]:
    """After each agent result the planner decides again what is still needed (seed 003, E9:
    a loop, not a queue); without a usable answer the rest of its plan stands (named fallback)."""
    rest, outcome = await _auftraege(deps, state, plan)
    if rest is None:
        log.warning("planner: fallback plan_beibehalten (answer %s): %d planned orders stay", outcome, len(plan.offen))
        deps.trace.decision(NAME, "planner.neu", "plan_beibehalten", {"antwort": outcome, "offen": len(plan.offen)})
        return list(plan.offen)
    rest, wiederholt = ohne_wiederholung(rest, plan)
    rest = nur_verlangte_aenderungen(deps, state, diktat_bleibt(deps, state, plan, rest))
    if wiederholt:
        log.warning("planner: fallback wiederholung_verworfen: %s already done in this turn",
                    ", ".join(f"{a.agent}/{a.aktion}" for a in wiederholt))
    deps.trace.decision(NAME, "planner.neu", "weiter" if rest else "genug",
                        {"vorher": [f"{a.agent}/{a.aktion}" for a in plan.offen],
                         "jetzt": [f"{a.agent}/{a.aktion}" for a in rest],
                         "wiederholt": [f"{a.agent}/{a.aktion}" for a in wiederholt]})
    return rest


def _gesetzt(v) -> bool:
    return v is not None and str(v).strip() != ""


def ergaenzt(a: Auftrag, p: AusstehenderAuftrag) -> bool:
    """Whether an order of the model is the pending one completed: the same agent and action (or
    the action was what was missing), a value for something missing, and no known parameter
    changed (a different title is a new appointment, not the answer)."""
    if a.agent != p.agent or (a.aktion != p.aktion and "aktion" not in p.fehlt):
        return False
    neu = {k for k, v in a.parameter.items() if _gesetzt(v)}
    if any(k in p.parameter and str(a.parameter[k]).strip().lower() != str(p.parameter[k]).strip().lower()
           for k in neu):
        return False
    geliefert = neu | ({"aktion"} if a.aktion != p.aktion else set())
    return bool(geliefert & set(p.fehlt)) or (not p.fehlt and bool(neu - set(p.parameter)))


def nur_wiederholt(a: Auftrag, p: AusstehenderAuftrag) -> bool:
    """Whether an order of the model is the pending one as it stood: the same kind, nothing but
    the known parameters with their values (the model read [AUSSTEHEND] back)."""
    neu = {k: v for k, v in a.parameter.items() if _gesetzt(v)}
    return (a.agent, a.aktion) == (p.agent, p.aktion) and all(
        k in p.parameter and str(v).strip().lower() == str(p.parameter[k]).strip().lower() for k, v in neu.items())


def _vervollstaendigt(a: Auftrag | None, p: AusstehenderAuftrag, regel: dict | None) -> Auftrag:
    """The pending order with what is known and what the message supplied (its words, by the
    agent's rule, before the model's)."""
    neu = {k: v for k, v in (a.parameter if a else {}).items() if _gesetzt(v)}
    aktion = a.aktion if a is not None and "aktion" in p.fehlt else p.aktion
    return Auftrag(agent=p.agent, aktion=aktion, parameter={**neu, **p.parameter, **(regel or {})})


async def ausstehend_lesen(deps: Deps, state: TurnState) -> AusstehendLage | None:
    """The pair's pending order as it stood when this turn began (None: the turn is no message of
    the human — a self-trigger or an impulse leaves it alone — or there is no Redis). A state
    that cannot be read is no pending order (named fallback `ausstehend_unlesbar`)."""
    s = state.stimulus
    if s.herkunft != "user" or deps.auftrag is None:
        return None
    try:
        stand = await deps.auftrag.laden(s.user_id, s.character_id)
    except ValidationError as e:
        log.warning("planner: fallback ausstehend_unlesbar: the pending order of %s:%s does not parse (%s); "
                    "the turn reads the message without it", s.user_id, s.character_id, e.errors()[:1])
        deps.trace.decision(NAME, "planner.ausstehend", "ausstehend_unlesbar", {})
        # the turn's write replaces the unreadable state
        return AusstehendLage(gelesen=await deps.auftrag.geschrieben_von(s.user_id, s.character_id))
    if stand is None:
        return AusstehendLage()
    vorher = ausstehend_store.vor_dem_turn(stand, s.turn_id)
    if stand.turn_id == s.turn_id and stand.ergebnis is not None and vorher is not None:
        log.info("planner: turn %s ran before and completed the pending %s/%s: its result stands", s.turn_id,
                 vorher.agent, vorher.aktion)
        return AusstehendLage(vorher=vorher, gelesen=stand.turn_id, lesart="wiederholt",
                              ergebnis=AgentResult.model_validate(stand.ergebnis))
    return AusstehendLage(vorher=vorher, gelesen=stand.turn_id)


async def _mit_ausstehendem(deps: Deps, state: TurnState, plan: PlanRecord) -> tuple[list[Auftrag], AusstehendLage]:
    """Round 0 with a pending order: the message completes it (the agent's rule first — the
    person's words —, else the model's order of the same kind), or is a new request (the router
    named a management and the model or the rules an order of another kind: `ersetzt`), or does
    not concern it (`unberuehrt`). A message the router saw no management in runs no other order."""
    lage = plan.ausstehend
    p = lage.vorher
    text, management = state.stimulus.text, state.route.management if state.route else "keins"
    regel_fn = ergaenzung(p.agent)
    regel = None
    if regel_fn is not None and regeln.diktat(management, text) is None:
        regel = regel_fn(dict(p.parameter), list(p.fehlt), text, deps.settings.timezone, state.stimulus.received_at)
    if regel:
        deps.trace.decision(NAME, "planner.ausstehend", "ergaenzt", {
            "auftrag": f"{p.agent}/{p.aktion}", "quelle": "regel", "ergaenzt": sorted(regel), "turns": p.turns})
        return [_vervollstaendigt(None, p, regel)], lage.model_copy(update={"lesart": "ergaenzt"})
    if management != "keins":
        orders = await _erste_auftraege(deps, state, plan)
        fremd = []
    else:  # the router saw no request: the model may only complete the pending order
        answer, _ = await _auftraege(deps, state, plan)
        orders = [a for a in answer or [] if ergaenzt(a, p)]
        fremd = [f"{a.agent}/{a.aktion}" for a in answer or [] if not ergaenzt(a, p)]
    echo = [a for a in orders if nur_wiederholt(a, p)]
    orders = [a for a in orders if a not in echo]  # the pending order named again as it stood is no new request
    gleich = next((a for a in orders if ergaenzt(a, p)), None)
    if gleich is not None:
        rest = [_vervollstaendigt(gleich, p, None)] + [a for a in orders if a.agent != p.agent]
        deps.trace.decision(NAME, "planner.ausstehend", "ergaenzt", {
            "auftrag": f"{p.agent}/{p.aktion}", "quelle": "modell", "ergaenzt": sorted(set(gleich.parameter) & set(p.fehlt)),
            "turns": p.turns})
        return rest[:MAX_AUFTRAEGE], lage.model_copy(update={"lesart": "ergaenzt"})
    if orders:
        log.warning("planner: ausstehend_ersetzt: the pending %s/%s (asked in turn %s) is dropped: the message is "
                    "a new request (%s)", p.agent, p.aktion, p.turn_id, ", ".join(f"{a.agent}/{a.aktion}" for a in orders))
        deps.trace.decision(NAME, "planner.ausstehend", "ersetzt", {
            "auftrag": f"{p.agent}/{p.aktion}", "neu": [f"{a.agent}/{a.aktion}" for a in orders]})
        return orders, lage.model_copy(update={"lesart": "ersetzt"})
    deps.trace.decision(NAME, "planner.ausstehend", "unberuehrt", {
        "auftrag": f"{p.agent}/{p.aktion}", "turns": p.turns, "verworfen": fremd + [f"{a.agent}/{a.aktion}" for a in echo]},
        threshold=VERFALL_NACH_TURNS)
    return [], lage.model_copy(update={"lesart": "unberuehrt"})


def _naechster_stand(deps: Deps, state: TurnState, plan: PlanRecord) -> Stand:
    """What the turn leaves pending, from what it read and what its agents answered."""
    lage, turn_id = plan.ausstehend, state.stimulus.turn_id
    p = lage.vorher
    erledigt = lage.ergebnis
    if lage.lesart == "ergaenzt" and plan.agent_results and plan.agent_results[0].status != "rueckfrage":
        erledigt = plan.agent_results[0]  # the completed order ran first
    ergebnis = erledigt.model_dump(mode="json") if erledigt is not None else None
    frage = next((r for r in reversed(plan.agent_results) if r.status == "rueckfrage" and r.auftrag is not None
                  and (r.ergebnis or {}).get("fehlt")), None)
    if frage is not None:
        fehlt = [str(frage.ergebnis["fehlt"])]
        turns = 0
        if lage.lesart == "ergaenzt" and erledigt is None and p is not None and fehlt == p.fehlt:
            turns = p.turns + 1  # the answer did not give what was missing: no progress, the count goes on
        neu = AusstehenderAuftrag(agent=frage.auftrag.agent, aktion=frage.auftrag.aktion,
                                  parameter={k: v for k, v in frage.auftrag.parameter.items() if _gesetzt(v)},
                                  fehlt=fehlt, angabe=str(frage.ergebnis.get("angabe") or ""),
                                  frage=str(frage.ergebnis.get("frage") or ""), turn_id=turn_id, turns=turns)
        if turns >= VERFALL_NACH_TURNS:
            return _abgelaufen(deps, state, p, turns, ergebnis)
        return Stand(turn_id=turn_id, ausgang="neu", auftrag=neu, vorher=p, ergebnis=ergebnis)
    if p is None:
        return Stand(turn_id=turn_id, ausgang="kein", ergebnis=ergebnis)
    if lage.lesart in ("ergaenzt", "wiederholt"):
        return Stand(turn_id=turn_id, ausgang="erledigt", vorher=p, ergebnis=ergebnis)
    if lage.lesart == "ersetzt":
        return Stand(turn_id=turn_id, ausgang="ersetzt", vorher=p)
    turns = p.turns + 1
    if turns >= VERFALL_NACH_TURNS:
        return _abgelaufen(deps, state, p, turns, None)
    return Stand(turn_id=turn_id, ausgang="unberuehrt", auftrag=p.model_copy(update={"turns": turns}), vorher=p)


def _abgelaufen(deps: Deps, state: TurnState, p: AusstehenderAuftrag, turns: int, ergebnis: dict | None) -> Stand:
    log.warning("planner: fallback ausstehend_abgelaufen: the pending %s/%s of %s:%s (asked in turn %s, missing %s) "
                "expired after %d human turns without the answer; it is dropped", p.agent, p.aktion,
                state.stimulus.user_id, state.stimulus.character_id, p.turn_id, ", ".join(p.fehlt) or "?", turns)
    deps.trace.decision(NAME, "planner.ausstehend_stand", "ausstehend_abgelaufen", {
        "auftrag": f"{p.agent}/{p.aktion}", "gefragt_in": p.turn_id, "fehlt": p.fehlt, "turns": turns},
        threshold=VERFALL_NACH_TURNS)
    return Stand(turn_id=state.stimulus.turn_id, ausgang="abgelaufen", vorher=p, ergebnis=ergebnis)


async def _ausstehend_schreiben(deps: Deps, state: TurnState, plan: PlanRecord) -> None:
    """The turn's one write of the pending order, keyed by its turn_id: nothing when nothing was
    pending and nothing is now (unless this turn wrote before and runs again). A write another
    turn overtook is dropped (named fallback `ausstehend_ueberholt`)."""
    lage, s = plan.ausstehend, state.stimulus
    stand = _naechster_stand(deps, state, plan)
    if stand.ausgang == "kein" and stand.ergebnis is None and lage.gelesen != s.turn_id:
        return
    if stand.ausgang != "abgelaufen":
        deps.trace.decision(NAME, "planner.ausstehend_stand", stand.ausgang, {
            "auftrag": f"{stand.auftrag.agent}/{stand.auftrag.aktion}" if stand.auftrag else None,
            "fehlt": stand.auftrag.fehlt if stand.auftrag else [], "turns": stand.auftrag.turns if stand.auftrag else 0})
    if not await deps.auftrag.schreiben(s.user_id, s.character_id, stand, gelesen=lage.gelesen):
        log.warning("planner: fallback ausstehend_ueberholt: another turn of %s:%s wrote the pending order after "
                    "turn %s read it; this turn's outcome %s is not stored", s.user_id, s.character_id, s.turn_id,
                    stand.ausgang)
        deps.trace.decision(NAME, "planner.ausstehend_stand", "ausstehend_ueberholt", {"ausgang": stand.ausgang})


async def _abschluss(deps: Deps, state: TurnState, plan: PlanRecord) -> dict:
    """The round that ends the loop: the pending order is written (once), then the plan."""
    if plan.ausstehend is not None:
        await _ausstehend_schreiben(deps, state, plan)
    return {"plan": plan}


def _rueckfrage_ohne_auftrag(deps: Deps, state: TurnState, plan: PlanRecord) -> PlanRecord:
    """Management named, no usable order: she asks what is to be done — or, when an order waits
    for an answer and does not expire with this turn, she asks again for what it misses."""
    lage, route = plan.ausstehend, state.route
    p = lage.vorher if lage is not None and lage.lesart == "unberuehrt" else None
    name = state.pair.character_name
    if p is not None and p.turns + 1 < VERFALL_NACH_TURNS:
        log.warning("planner: fallback rueckfrage_ausstehend: management %r but no usable order; the pending %s/%s "
                    "still misses %s", route.management, p.agent, p.aktion, ", ".join(p.fehlt) or "?")
        fehlt = p.angabe or ", ".join(p.fehlt) or "eine Angabe"
        block = f"Rueckfrage: {name} braucht noch eine Angabe, es fehlt: {fehlt}. Sie fragt genau danach: {p.frage}"
        deps.trace.decision(NAME, "planner.entscheidung", "rueckfrage_ausstehend", {"auftrag": f"{p.agent}/{p.aktion}"})
    else:
        log.warning("planner: fallback rueckfrage: management %r but no usable order", route.management)
        block = (f"Rueckfrage: {name} hat verstanden, dass etwas zu {route.management} erledigt werden soll, "
                 f"und fragt genau nach, was.")
        deps.trace.decision(NAME, "planner.entscheidung", "rueckfrage_ohne_auftrag", {})
    return plan.model_copy(update={"schleifen": 1, "task_block": block})


RUNDEN_GRENZE = 4
"""The planner loop's rounds (`PLANNER_LOOP.max_rounds`, pipeline/runner.py): an order named in
the last round would not run, so that round ends the loop itself (and writes the pending order)."""


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    plan = state.plan or PlanRecord()
    route = state.route
    if plan.schleifen == 0:
        plan = plan.model_copy(update={"ausstehend": await ausstehend_lesen(deps, state)})
        lage = plan.ausstehend
        kein_auftrag = route is None or route.management == "keins"
        if lage is not None and lage.lesart == "wiederholt":
            # the turn runs again: the completed order's result stands, and it does not run twice
            deps.trace.decision(NAME, "planner.ausstehend", "wiederholt", {
                "auftrag": f"{lage.vorher.agent}/{lage.vorher.aktion}", "status": lage.ergebnis.status})
            plan = plan.model_copy(update={"agent_results": [lage.ergebnis], "schleifen": 1})
            rest = await _neu_entscheiden(deps, state, plan)
        else:
            if lage is not None and lage.vorher is not None:
                vorwaermen_starten()
                rest, lage = await _mit_ausstehendem(deps, state, plan)
                plan = plan.model_copy(update={"ausstehend": lage})
            elif kein_auftrag:
                rest = []
            else:
                vorwaermen_starten()  # the agents' libraries load beside the model call that picks one
                rest = await _erste_auftraege(deps, state, plan)
            if not rest and kein_auftrag:
                deps.trace.decision(NAME, "planner.entscheidung", "kein_agent",
                                    {"ausstehend": lage.lesart} if lage is not None and lage.vorher else {})
                return await _abschluss(deps, state, plan.model_copy(update={"schleifen": 1}))
            if not rest:
                return await _abschluss(deps, state, _rueckfrage_ohne_auftrag(deps, state, plan))
    else:
        rest = await _neu_entscheiden(deps, state, plan)
    if rest and plan.schleifen >= RUNDEN_GRENZE:
        log.warning("planner: fallback schleifen_grenze: %s not run, the loop's %d rounds are done",
                    ", ".join(f"{a.agent}/{a.aktion}" for a in rest), RUNDEN_GRENZE)
        deps.trace.decision(NAME, "planner.entscheidung", "schleifen_grenze",
                            {"nicht_gelaufen": [f"{a.agent}/{a.aktion}" for a in rest]}, threshold=RUNDEN_GRENZE)
        rest = []
    if rest:
        nxt, rest = rest[0], rest[1:]
        deps.trace.decision(NAME, "planner.entscheidung", "agent", {"agent": nxt.agent, "aktion": nxt.aktion})
        return {"plan": plan.model_copy(update={"agent_name": nxt.agent, "auftrag": nxt, "offen": rest,
                                                "schleifen": plan.schleifen + 1})}
    block, cut = task_block(state.pair.character_name, plan.agent_results)
    deps.trace.decision(NAME, "planner.entscheidung", "fertig",
                        {"ergebnisse": [r.status for r in plan.agent_results], "kontext_schnitt": cut})
    return await _abschluss(deps, state, plan.model_copy(update={
        "agent_name": "", "auftrag": None, "offen": [], "task_block": block, "task_context_cut": cut,
        "schleifen": plan.schleifen + 1}))
