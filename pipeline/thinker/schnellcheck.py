"""§3.1 quick check: does the reply (or the stimulus) carry checkable facts? Date and quantity
indicators; no match → no LLM call. The router's `needs_web` forces reasoning."""
from __future__ import annotations

import re
from dataclasses import dataclass

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
    found += sorted(set(_JAHR.findall(text)))
    return found


@dataclass
class Schnellcheck:
    outcome: str
    """`erzwungen` (needs_web), `treffer`, or `kein_treffer` (pass without an LLM call)."""
    in_antwort: list[str]
    in_reiz: list[str]

    @property
    def reasoning(self) -> bool:
        return self.outcome != "kein_treffer"

    @property
    def zahl(self) -> int:
        return len(self.in_antwort) + len(self.in_reiz)


def schnellcheck(reply: str, stimulus: str, needs_web: bool) -> Schnellcheck:
    in_antwort, in_reiz = indikatoren(reply), indikatoren(stimulus)
    if needs_web:
        return Schnellcheck("erzwungen", in_antwort, in_reiz)
    return Schnellcheck("treffer" if in_antwort or in_reiz else "kein_treffer", in_antwort, in_reiz)
