"""A reply the token budget cut off, closed at its last full sentence.

An engine that reaches `max_tokens` stops where it is, mid-sentence, and says so with
`finish_reason == "length"` (`ChatResult.finish_reason`, streaming and not). A node that writes
text for the human (the responder, the corrector's rewrite) closes such a reply here, in one
place: at its last full sentence — one that ends with `.`, `!`, `?` or `…`, possibly followed by
closing quotes or brackets — or, when it holds no full sentence, the text stays and ends with "…".
Each outcome is a named fallback in the node's log (`antwort_gekappt_satzende`,
`antwort_gekappt_ellipse`) and the node's decision entry `{node}.kappung` (`satzende`, `ellipse`).
"""
from __future__ import annotations

import logging
import re

GEKAPPT = "length"
"""The finish reason of a reply the token budget cut (OpenAI's word, which every backend passes on)."""
ELLIPSE = "…"
SCHLIESSER = "\"'“”‘’»«)]"
"""What may follow a sentence's end and still belong to it: closing quotes (German „…“, »…«, plain)
and brackets."""
ABKUERZUNGEN = frozenset({"bzw", "ca", "dr", "nr", "vgl", "evtl", "ggf", "hr", "fr", "prof", "st", "inkl",
                          "zzgl", "sog", "bspw", "ebd", "mio", "mrd", "abs", "str", "tel", "z.b", "d.h",
                          "u.a", "o.ä", "s.o", "s.u"})
"""Words whose point ends an abbreviation, not a sentence ("z. B.", "Dr."); a single letter before a
point is one too. `usw.` and `etc.` end sentences often enough to stay sentence ends."""
_ENDE = re.compile(r"[.!?…]+[" + re.escape(SCHLIESSER) + r"]*(?=\s|$)")
_WORT_DAVOR = re.compile(r"([\w.]+)$")
_OFFENER_REST = re.compile(r"[\s,;:\-–—(\[„‚]+$")


def _satzende(text: str, m: re.Match) -> bool:
    """Whether the point at `m` ends a sentence: not an abbreviation's, not an ordinal's ("am 3. Mai",
    "20.08.")."""
    if m.group(0).rstrip(SCHLIESSER) != ".":
        return True  # ! ? … and "..." end a sentence
    wort = _WORT_DAVOR.search(text[:m.start()])
    if wort is None:
        return True
    w = wort.group(1).strip(".").lower()
    zahl = w.rsplit(".", 1)[-1]
    if zahl.isdigit():  # a day or a month ("am 3. Mai", "am 20.08. kam"); a year ends a sentence
        return len(zahl) > 2
    return not (len(w) == 1 and w.isalpha()) and w not in ABKUERZUNGEN


def schliessen(text: str) -> tuple[str, str]:
    """The cut text closed: (up to its last full sentence, `satzende`), or, with no full sentence in
    it, (the text with "…" after it, `ellipse`). Text after the last sentence is the part the budget
    cut; an open separator at the end (a comma, a dash, an opening quote or bracket) goes before the "…"."""
    t = text.rstrip()
    enden = [m for m in _ENDE.finditer(t) if _satzende(t, m)]
    if enden:
        return t[:enden[-1].end()], "satzende"
    rest = _OFFENER_REST.sub("", t)
    return (rest or t) + ELLIPSE, "ellipse"


def gekappt(deps, node: str, text: str, inputs: dict) -> str:
    """The reply `text` that hit its token budget, closed (`schliessen`), with the fallback named in
    the node's log and its decision entry `{node}.kappung`; `inputs` add to the entry (the budget)."""
    closed, wie = schliessen(text)
    verworfen = len(text.rstrip()) - len(closed) if wie == "satzende" else 0
    logging.getLogger(f"novaberg.node.{node}").warning(
        "%s: fallback antwort_gekappt_%s: the reply hit its token budget after %d characters; %s", node, wie,
        len(text), f"closed at its last full sentence ({verworfen} characters dropped)" if wie == "satzende"
        else "no full sentence in it: kept and closed with an ellipsis")
    deps.trace.decision(node, f"{node}.kappung", wie,
                        {"zeichen_gekappt": len(text), "zeichen": len(closed), "verworfen": verworfen, **inputs})
    return closed
