"""§3.1 quick check: does the reply (or the stimulus) carry checkable facts? Date and quantity
indicators; no match → no LLM call. The router's `needs_web` forces reasoning."""
from __future__ import annotations

import re

MONATE = ("januar", "februar", "maerz", "märz", "april", "mai", "juni", "juli", "august", "september", "oktober",
          "november", "dezember")
WOCHENTAGE = ("montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag", "sonntag")
DATUM = ("am", "um", "uhr", "morgen", "übermorgen", "uebermorgen", "nächste", "naechste") + MONATE + WOCHENTAGE
MENGE = ("milliard", "million", "prozent", "km", "kg")
_JAHR = re.compile(r"\b20\d\d\b")


def indikatoren(text: str) -> list[str]:
    words = re.findall(r"\w+", text.lower())
    found = sorted({w for w in words if w in DATUM})
    found += sorted({m for m in MENGE if any(w.startswith(m) for w in words)})
    found += _JAHR.findall(text)
    return found


def schnellcheck(reply: str, stimulus: str, needs_web: bool) -> tuple[str, list[str]]:
    """(outcome, matches): `erzwungen` (needs_web), `treffer`, or `kein_treffer` (pass, no LLM call)."""
    matches = indikatoren(reply) + [m for m in indikatoren(stimulus)]
    if needs_web:
        return "erzwungen", matches
    return ("treffer" if matches else "kein_treffer"), matches
