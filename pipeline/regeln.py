"""Rule-based readings of management requests, the named fallback of router (`router_regeln`) and
planner (`planner_regeln`) when the model's answer is unusable — a small local model often cannot
produce the JSON those nodes ask for. The rules cover plain phrasings; anything else asks back."""
from __future__ import annotations

import re

_NOTIZ = re.compile(r"\bnotiz\w*\b", re.I)
_TERMIN = re.compile(r"\b(?:termin\w*|kalender|trag\w*\b.*\bein\b)", re.I)
_DIREKTIVE = re.compile(r"\b(?:ab jetzt|von nun an|in zukunft)\b.*\b(?:immer|nie|bitte)\b", re.I)
_CHARAKTER = re.compile(r"\b(?:sei|werde)\b.{0,40}\b(?:mehr|weniger|frecher|lockerer|ernster)\b", re.I)
_BIBLIOTHEK = re.compile(r"\bdeine[rnm]?\s+bibliothek\b", re.I)
_DATEIEN = re.compile(r"\b(?:in|aus)\s+(?:meine[nrm]?|den|unsere[nm]?)\s+(?:dateien|unterlagen|dokumenten)\b", re.I)
_LOESCH = re.compile(r"\bl(?:oe|ö)sch", re.I)
_VERSCHIEB = re.compile(r"\bverschieb", re.I)
_AENDERUNG = re.compile(r"\b(?:l(?:oe|ö)sch|entfern|streich|(?:ver)?(?:ae|ä)nder|verschieb|verleg|ersetz|korrigier"
                        r"|berichtig|umbenenn|aktualisier|tausch|statt\b|nicht mehr\b|vergiss|vergess|deaktivier"
                        r"|zusammenfass|aufheb|(?:kann|soll|muss|darf)\s+(?:weg|raus)\b"
                        r"|\bfass\w*\b[^.!?]{0,60}\bzusammen\b|\bheb\w*\b[^.!?]{0,60}\bauf\b|\bh(?:oe|ö)r\w*\s+auf\b)", re.I)
_NOTIZ_INHALT = re.compile(r"notiz\w*\s+(?:mit dem namen\s+|namens\s+|zu\s+|über\s+|ueber\s+)?[\"„]?([^:\"“,.]+?)[\"“]?\s*:\s*(.+)$",
                           re.I | re.S)
_NOTIZ_NAME = re.compile(r"notiz\w*\s+(?:mit dem namen\s+|namens\s+|zu\s+|über\s+|ueber\s+)?[\"„]?([^:\"“,.?!]+)", re.I)
_TERMIN_TEIL = re.compile(r"termin\w*(?:\s+ein)?\s*:\s*(.+)$", re.I | re.S)
_NOTIZ_ERWAEHNT = re.compile(r"\b(?:notiz\w*|notiert\w*|aufgeschrieben)\b", re.I)
_PRAEP = r"(?:mit dem namen|namens|über|ueber|zum|zur|zu|vom|von|wegen|für|fuer)"
_NOTIZ_ZIEL = (
    re.compile(r"notiz\w*\s+[\"„]([^\"“]+)[\"“]", re.I),  # Notiz „Hundeschule“
    re.compile(rf"notiz\w*\b[^?!.]{{0,40}}?\b{_PRAEP}\s+([^?!.:;\"“]+)", re.I),  # Notiz … über X
    re.compile(rf"\b{_PRAEP}\s+([^?!.:;,\"“]+?)\s+(?:notiert\w*|aufgeschrieben|notiz\w*)", re.I),  # über X notiert
    re.compile(r"[Nn]otiz\w*\s+([A-ZÄÖÜ][\w\-äöüß]*)"),  # Notiz Hundeschule
)
_ZIEL_VORNE = re.compile(r"^(?:(?:de[nmrs]|die|das|eine?[nmrs]?|meine?[nmrs]?|unsere?[nmrs]?|etwas|was)\s+)+", re.I)
_ZIEL_HINTEN = re.compile(r"(?:\s+(?:an|anlegen|bitte|noch|mal|nochmal|steht|stand|drin|gemacht|geschrieben"
                          r"|notiert|aufgeschrieben))+$", re.I)


def aenderung_verlangt(text: str) -> bool:
    """Whether the message asks to change, move or delete something ("lösch", "änder", "verschieb",
    "statt", …): the planner's model may answer a plain question with such an order."""
    return bool(_AENDERUNG.search(text))


def management(text: str) -> str:
    if _NOTIZ.search(text):
        return "notizen"
    if _TERMIN.search(text):
        return "timeline"
    if _DIREKTIVE.search(text):
        return "direktiven"
    if _CHARAKTER.search(text):
        return "charakter"
    if _BIBLIOTHEK.search(text):
        return "wissen"
    if _DATEIEN.search(text):
        return "dateien"
    return "keins"


def notiz_ziel(text: str) -> str | None:
    """The note a message asks about (the notes plugin's targeted branch, seed 001 §3.2): the
    words after „Notiz … über/zu/namens“, before „… notiert“, or a quoted or capitalised name
    after „Notiz“; articles and fillers cut. None when the message names no note or no target."""
    if not _NOTIZ_ERWAEHNT.search(text):
        return None
    for pattern in _NOTIZ_ZIEL:
        m = pattern.search(text)
        if m:
            ziel = _ZIEL_HINTEN.sub("", _ZIEL_VORNE.sub("", m.group(1).strip())).strip(" -–")
            if ziel:
                return ziel[:80]
    return None


def auftrag(management_: str, text: str) -> dict | None:
    """One order for the agent of `management_`, or None when the phrasing is not covered."""
    t = text.strip()
    if management_ == "notizen":
        aktion = "loeschen" if _LOESCH.search(t) else "anlegen"
        m = _NOTIZ_INHALT.search(t)
        if m and aktion == "anlegen":
            return {"agent": "notizen", "aktion": aktion,
                    "parameter": {"name": m.group(1).strip(), "inhalt": m.group(2).strip()}}
        m = _NOTIZ_NAME.search(t)
        if m:
            name = re.sub(r"\b(?:an|anlegen|loeschen|löschen|bitte)\b", "", m.group(1), flags=re.I).strip()
            if name:
                return {"agent": "notizen", "aktion": aktion, "parameter": {"name": name}}
        return None
    if management_ == "timeline":
        m = _TERMIN_TEIL.search(t)
        if not m:
            return None
        aktion = "loeschen" if _LOESCH.search(t) else ("verschieben" if _VERSCHIEB.search(t) else "anlegen")
        if "," not in m.group(1):
            # dictated without its time ("Trag einen Termin ein: Zahnarzt"): the title; the agent asks when
            titel = m.group(1).strip(" .!")
            return {"agent": "timeline", "aktion": aktion, "parameter": {"titel": titel}} if titel else None
        titel, wann = (x.strip(" .!") for x in m.group(1).split(",", 1))
        return {"agent": "timeline", "aktion": aktion, "parameter": {"titel": titel, "wann": wann}}
    if management_ == "direktiven":
        return {"agent": "direktiven", "aktion": "anlegen", "parameter": {"text": t}}
    if management_ == "charakter":
        return {"agent": "charakter", "aktion": "anweisung", "parameter": {"text": t}}
    if management_ in ("wissen", "dateien"):  # a look-up: the agent reads with the turn's search key
        return {"agent": management_, "aktion": "suchen", "parameter": {}}
    return None


DIKTAT_ARTEN = ("notizen", "timeline")


def diktat(management_: str, text: str) -> dict | None:
    """The order of a dictated request — "Notiz NAME: INHALT", "Trag einen Termin ein: TITEL, WANN" —
    whose parameters the person spelled out word for word; None for any other phrasing. The form is
    read whatever management the router named (the router's model may name the wrong one; the
    form's markers are explicit): the router's first, then the other kinds."""
    for art in sorted(DIKTAT_ARTEN, key=lambda a: a != management_):
        order = auftrag(art, text)
        if order and order["aktion"] == "anlegen" and (order["parameter"].keys() >= {"name", "inhalt"}
                                                       or order["parameter"].keys() >= {"titel", "wann"}):
            return order
    return None
