"""An item's distinctive words, and whether a derived sentence repeats an item: what forgetting
(memory/erinnerungen.py) and a supersession (memory/beziehung.py) both read in the profile."""
from __future__ import annotations

import re


STOPPWOERTER = frozenset("""
aber alle allem allen aller alles also auch auf aus bei beim bist dann dass dein deine dem den denen der des dich
die dies diese diesem diesen dieser dir doch dort durch eine einem einen einer eines euch euer fuer für gern gerne
habe haben hast hat hatte hier ihm ihn ihnen ihr ihre ihrem ihren ihrer immer ist jetzt kann kein keine mein meine
meinem meinen meiner mich mir mit nach nicht noch nova nun oder person schon sehr seid sein seine seinem seinen
seiner selbst sich sie sind über ueber und uns unser viel vom von vor war waren wenn werden wie wieder will wir
wird wurde zum zur zwischen heisst heißt sagt sagte erzaehlt erzählt erzählte erzaehlte
about also been from have into just that their them then there they this what when which with would your
""".split())
"""Words that say nothing of an item's content (the speakers' labels among them)."""


def inhaltswoerter(text: str) -> frozenset[str]:
    """An item's distinctive words: those of four letters or more, no numbers, no stop words; a
    node's date and speaker (`[04 December 2026] Person B: …`) left out."""
    text = re.sub(r"^\[[^\]]*\]\s*", "", text or "")
    text = re.sub(r"^[^:\n]{1,40}:\s", "", text)
    return frozenset(w for w in re.findall(r"\w+", text.casefold())
                     if len(w) >= 4 and not w.isdigit() and w not in STOPPWOERTER)


def verraet(satz: str, vergessen: list[frozenset[str]], mindestens: int) -> bool:
    """Whether a derived sentence repeats a forgotten item: it shares at least `mindestens` of the
    item's distinctive words (all of them when the item has fewer)."""
    woerter = inhaltswoerter(satz)
    return any(len(woerter & w) >= min(mindestens, len(w)) for w in vergessen if w)
