"""The Thinker's text protocol: `TOOL: name(arg)`, `ERGEBNIS: OK`, or `ERGEBNIS: KORREKTUR` with
`PROBLEME:` and `KORRIGIERTE ANTWORT:`. Anything else is no control token."""
from __future__ import annotations

import re
from dataclasses import dataclass

TOOLS = ("timeline_check", "timeline_search", "memory_search", "wissen", "dateien", "web_search", "web_fetch")
_TOOL = re.compile(r"^\s*TOOL:\s*(\w+)\((.*)\)\s*$", re.M)
_ERGEBNIS = re.compile(r"^\s*ERGEBNIS:\s*(OK|KORREKTUR)\b", re.M | re.I)


@dataclass
class Schritt:
    art: str
    """tool | ok | korrektur | korrektur_ohne_text | unlesbar"""
    tool: str | None = None
    argument: str | None = None
    probleme: str | None = None
    antwort: str | None = None


def lesen(text: str) -> Schritt:
    m = _TOOL.search(text)
    if m and m.group(1) in TOOLS:
        return Schritt("tool", tool=m.group(1), argument=m.group(2).strip().strip("\"'"))
    e = _ERGEBNIS.search(text)
    if not e:
        return Schritt("unlesbar")
    if e.group(1).upper() == "OK":
        return Schritt("ok")
    rest = text[e.end():]
    probleme = re.search(r"PROBLEME:\s*(.*?)(?:\n\s*KORRIGIERTE ANTWORT:|$)", rest, re.S)
    antwort = re.search(r"KORRIGIERTE ANTWORT:\s*(.*)$", rest, re.S)
    text_ = antwort.group(1).strip() if antwort else ""
    return Schritt("korrektur" if text_ else "korrektur_ohne_text",
                   probleme=probleme.group(1).strip() if probleme else None, antwort=text_ or None)


# The protocol as a grammar (llama.cpp) and as a regular expression (vLLM's structured outputs), so
# an engine that can constrain its output answers in it; `lesen` reads the answer either way. A
# reasoning model may think first (`<think>…</think>`); the protocol line follows.
_NAMEN = " | ".join(f'"{t}"' for t in TOOLS)
GBNF = rf'''root ::= denken? (tool | ok | korrektur)
denken ::= "<think>" [^<]* "</think>" [ \n]*
tool ::= "TOOL: " name "(" [^()\n]* ")"
name ::= {_NAMEN}
ok ::= "ERGEBNIS: OK"
korrektur ::= "ERGEBNIS: KORREKTUR\nPROBLEME: " [^\n]+ "\nKORRIGIERTE ANTWORT: " [^\n]+ ("\n" [^\n]*)*
'''
REGEX = (r"(<think>[^<]*</think>\s*)?(TOOL: (" + "|".join(TOOLS) + r")\([^()\n]*\)|ERGEBNIS: OK"
         r"|ERGEBNIS: KORREKTUR\nPROBLEME: [^\n]+\nKORRIGIERTE ANTWORT: [^\n]+(\n[^\n]*)*)")
PROTOKOLL = {"gbnf": GBNF, "regex": REGEX}
