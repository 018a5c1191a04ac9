"""Timeline agent: create, move, delete appointments; German relative dates ("morgen um 14 Uhr")
are read with dateparser against the local time, and stored in UTC."""
from __future__ import annotations

import logging
import re
from datetime import datetime

from pipeline.agents.agent import Agent, schreibschluessel
from pipeline.llm_json import liste
from core.state import AgentResult
from pipeline.timefmt import local_now

AKTIONEN = ("anlegen", "verschieben", "loeschen")
log = logging.getLogger("novaberg.agent.timeline")


_UHR = re.compile(r"\b(\d{1,2})(?:[:.](\d{2}))?\s*Uhr\b", re.I)
_NAECHST = re.compile(r"\bn(?:ae|ä)chste[nrms]?\s+", re.I)
_TAG_MONAT = re.compile(r"\b(\d{1,2})\.(\d{1,2})\.(?!\d)")


def _normalise(text: str, year: int) -> str:
    """Forms dateparser misses: "14 Uhr" → "14:00", "nächsten Dienstag" → "Dienstag", "3.12." → "3.12.<year>"."""
    text = _UHR.sub(lambda m: f"{int(m.group(1))}:{m.group(2) or '00'}", text)
    text = _NAECHST.sub("", text)
    text = " ".join(re.sub(r"\b(?:am|um|den)\b", " ", text, flags=re.I).split())
    return _TAG_MONAT.sub(lambda m: f"{m.group(1)}.{m.group(2)}.{year}", text)


ANGABEN = {"aktion": "ob der Termin angelegt, verschoben oder geloescht werden soll",
           "titel": "worum es bei dem Termin geht", "wann": "Tag und Uhrzeit des Termins"}
"""What a missing parameter is, in the words of the [AUFGABE] block's Rueckfrage."""

_ZEITANGABE = re.compile(r"\d|heute|morgen|abend|mittag|nacht|uhr\b|montag|dienstag|mittwoch|donnerstag|freitag"
                         r"|samstag|sonntag|woche|monat|jahr|januar|februar|maerz|märz|april|mai|juni|juli|august"
                         r"|september|oktober|november|dezember", re.I)


_FUELLWORT = re.compile(r"\b(?:bitte|danke|ach|ok|okay|ja|gerne|gern|dann|also|na|so|genau)\b", re.I)


def ergaenzen(parameter: dict, fehlt: list[str], text: str, tz: str, jetzt: datetime | None = None) -> dict | None:
    """What a message of the human supplies for a pending order of this agent (one that asked
    back, memory/ausstehender_auftrag.py): a missing `wann` when the message, or one of its
    clauses without fillers ("Ach, morgen um 15 Uhr, danke"), reads as a date or a time that is
    not past, in the person's words; None when it supplies nothing missing. The title is read
    only by the planner's model: any short text could be one. `jetzt`: the message's time (an
    operator's date, `Stimulus.received_at`); now without one."""
    if "wann" not in fehlt or not _ZEITANGABE.search(text or ""):
        return None
    now = local_now(tz, jetzt).replace(tzinfo=None, second=0, microsecond=0)
    teile = [text] + [" ".join(_FUELLWORT.sub(" ", t).split()) for t in re.split(r"[,;!?]|(?<!\d)\.(?=\s|$)", text)]
    for teil in dict.fromkeys(t.strip() for t in teile):
        if teil and _ZEITANGABE.search(teil):
            when = parse_when(teil, tz, now)
            if when is not None and when >= now:
                return {"wann": teil}
    return None


def vorwaermen() -> None:
    """dateparser's import and its German data (about 150 ms on this machine, once per process):
    loaded by a first parse, off the turn's path (`pipeline.agents.vorwaermen_starten`)."""
    parse_when("morgen um 14 Uhr", "UTC")


def parse_when(text: str, tz: str, now: datetime | None = None) -> datetime | None:
    """A local wall time (naive) from German text or ISO; None when it cannot be read."""
    import dateparser

    text = (text or "").strip()
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).replace(tzinfo=None)
    except ValueError:
        pass
    base = (now or local_now(tz)).replace(tzinfo=None)
    text = _normalise(text, base.year)
    got = dateparser.parse(text, languages=["de"], settings={
        "RELATIVE_BASE": base, "PREFER_DATES_FROM": "future", "RETURN_AS_TIMEZONE_AWARE": False})
    if got is not None and got < base and _TAG_MONAT.search(text):
        got = got.replace(year=got.year + 1)  # "3.1." said in December means next January
    return got


async def dispatch_timeline(state, deps) -> AgentResult:
    auftrag = state.plan.auftrag
    aktion, p = auftrag.aktion, auftrag.parameter
    s, tz = state.stimulus, deps.settings.timezone
    titel = str(p.get("titel") or "").strip()
    if aktion not in AKTIONEN:
        return AgentResult(agent_name="timeline", status="rueckfrage", ergebnis={
            "frage": "Soll ich einen Termin anlegen, verschieben oder loeschen?", "fehlt": "aktion",
            "angabe": ANGABEN["aktion"]})
    if not titel:
        return AgentResult(agent_name="timeline", status="rueckfrage", ergebnis={
            "frage": "Worum geht es bei dem Termin?", "fehlt": "titel", "angabe": ANGABEN["titel"]})
    if aktion in ("anlegen", "verschieben"):
        when = parse_when(str(p.get("wann") or ""), tz, local_now(tz, s.received_at))
        if when is None:
            return AgentResult(agent_name="timeline", status="rueckfrage", ergebnis={
                "frage": f"Wann genau ist '{titel}' (Tag und Uhrzeit)?", "fehlt": "wann", "angabe": ANGABEN["wann"]})
    if aktion == "anlegen":
        tid = await deps.store.timeline.add(s.user_id, s.character_id, titel, when, tz,
                                    personen=liste(p.get("personen")),
                                    **schreibschluessel(state, "timeline"))
        return AgentResult(agent_name="timeline", status="abgeschlossen", ergebnis={
            "aktion": "anlegen", "id": tid, "beginn_lokal": when.isoformat(),
            "beschreibung": f"Termin '{titel}' am {when.strftime('%d.%m.%Y um %H:%M')} eingetragen"})
    found = await deps.store.timeline.find_by_keyword(s.user_id, s.character_id, titel, tz)
    if not found:
        return AgentResult(agent_name="timeline", status="verworfen", ergebnis={"grund": f"kein Termin '{titel}' gefunden"})
    target = found[0]
    if aktion == "verschieben":
        await deps.store.timeline.move(s.user_id, s.character_id, target.id, when, tz, turn_id=s.turn_id)
        return AgentResult(agent_name="timeline", status="abgeschlossen", ergebnis={
            "aktion": "verschieben", "id": target.id,
            "beschreibung": f"Termin '{target.titel}' auf {when.strftime('%d.%m.%Y um %H:%M')} verschoben"})
    await deps.store.timeline.delete(s.user_id, s.character_id, target.id, turn_id=s.turn_id)
    return AgentResult(agent_name="timeline", status="abgeschlossen",
                       ergebnis={"aktion": "loeschen", "id": target.id, "beschreibung": f"Termin '{target.titel}' geloescht"})


AGENT = Agent(name="timeline", dispatch=dispatch_timeline, bedarf=("plan",), ergaenzen=ergaenzen,
              vorwaermen=vorwaermen)
"""Reads its order (the `plan` record) besides the stimulus; a pending order's missing `wann` is
completed from the human's words (`ergaenzen`); dateparser loads off the turn's path (`vorwaermen`)."""
