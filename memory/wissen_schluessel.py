"""How an entry of a character's background knowledge (a Character Card's lorebook entry)
activates, the way the Character Card V2/V3 specs and SillyTavern describe it:

- a key matches case-insensitively as a substring of the scanned text ("elf" in "shelf"), unless
  the entry says `case_sensitive`, or whole words (`match_whole_words`: the key must stand between
  non-word characters, as SillyTavern wraps it; a key with a space stays a substring);
- a key written `/pattern/flags` is a regular expression (V3's `use_regex` form, as SillyTavern
  reads every key), on the raw text, case-sensitive unless its flags say `i`; an invalid one is
  matched as plain text; one that runs past `REGEX_TIMEOUT_S` matches nothing (logged as the
  fallback `lorebook.regex_zeitlimit`). All regex keys of one turn share one time budget
  (`RegexBudget`): once it is spent, the remaining regex keys are skipped (they match nothing,
  the fallback `lorebook.regex_budget`), while plain keys still match;
- a `selective` entry with secondary keys also needs their logic to hold (SillyTavern's
  `selectiveLogic`: and_any, not_all, not_any, and_all);
- the scanned text is the last `scan_depth` messages, newest first, the current one included
  (the entry's own depth before the book's before the configured default; 0 scans nothing);
- `constant` entries always activate; the activated entries are taken by `insertion_order`,
  highest first, while they fit the token budget: the first that does not fit is left out with
  every one after it (SillyTavern's rule); they are placed lowest order first.
"""
from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import regex

log = logging.getLogger("novaberg.memory")

LOGIK = ("and_any", "not_all", "not_any", "and_all")
"""A selective entry's logic over its secondary keys; SillyTavern's `selectiveLogic` 0–3 in order."""
REGEX_TIMEOUT_S = 0.05
"""The longest one key's pattern may search the scanned text (a card's pattern is someone's code)."""
REGEX_BUDGET_S = 0.2
"""The default time all regex keys of one turn may search together (the store deployment's is
`lorebook_regex_budget_s`)."""
_REGEX_KEY = re.compile(r"^/([\w\W]+?)/([gimsuy]*)$")
_FLAGS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL}


@functools.lru_cache(maxsize=1024)
def _pattern(key: str) -> regex.Pattern | None:
    m = _REGEX_KEY.match(key)
    if m is None:
        return None
    flags = regex.V0
    for f in m[2]:
        flags |= _FLAGS.get(f, 0)
    try:
        return regex.compile(m[1], flags)
    except (regex.error, ValueError, OverflowError):
        return None  # an invalid pattern is matched as plain text, slashes included


def ist_regex(key: str) -> bool:
    """Whether a key is read as a regular expression (`/pattern/flags`, a valid pattern)."""
    return _pattern(key.strip()) is not None


class RegexBudget:
    """The time all regex keys of one turn may search together: each key searches at most
    `REGEX_TIMEOUT_S` and at most what is left; once it is spent, every further regex key is
    skipped (it matches nothing). Only the regex searches' own time counts, on `uhr` (a test's
    fake clock). `ausgewertet`: regex keys searched; `uebersprungen`: regex keys skipped."""

    def __init__(self, sekunden: float = REGEX_BUDGET_S, uhr: Callable[[], float] = time.monotonic):
        self.sekunden = sekunden
        self.uhr = uhr
        self.verbraucht = 0.0
        self.ausgewertet = 0
        self.uebersprungen = 0

    def rest(self) -> float:
        return self.sekunden - self.verbraucht

    def suchen(self, pattern: regex.Pattern, text: str) -> bool:
        """Whether the pattern is found in the text within the key's and the turn's time; a
        skipped or timed-out search is False."""
        rest = min(REGEX_TIMEOUT_S, self.rest())
        if rest <= 0:
            self.uebersprungen += 1
            return False
        start = self.uhr()
        try:
            return pattern.search(text, timeout=rest) is not None
        except TimeoutError:
            log.warning("lorebook: a regex key of %d characters ran past %.3f s on %d characters of text; "
                        "it matches nothing this turn (fallback lorebook.regex_zeitlimit)",
                        len(pattern.pattern), rest, len(text))
            return False
        finally:
            self.verbraucht += max(0.0, self.uhr() - start)
            self.ausgewertet += 1


def trifft(key: str, text: str, *, gross_klein: bool = False, ganze_woerter: bool = False,
           budget: RegexBudget | None = None, klein: str | None = None) -> bool:
    """Whether one key matches the text. `budget`: the turn's time for regex keys (without one, a
    key has `REGEX_TIMEOUT_S`); `klein`: the text in lower case, when the caller has it already."""
    k = key.strip()
    if not k:
        return False
    pattern = _pattern(k)
    if pattern is not None:
        return (budget or RegexBudget(REGEX_TIMEOUT_S)).suchen(pattern, text)
    if not gross_klein:
        k, text = k.lower(), text.lower() if klein is None else klein
    if ganze_woerter and not any(c.isspace() for c in k):
        return re.search(rf"(?:^|\W){re.escape(k)}(?:$|\W)", text) is not None
    return k in text


@dataclass(frozen=True)
class Eintrag:
    """What activation reads of an entry (`charakter_wissen`)."""

    id: int
    inhalt: str
    schluessel: Sequence[str] = ()
    sekundaer: Sequence[str] = ()
    selektiv: bool = False
    logik: str = "and_any"
    gross_klein: bool = False
    ganze_woerter: bool = False
    immer: bool = False
    reihenfolge: int = 100
    scan_tiefe: int | None = None


def scan_text(nachrichten: Sequence[str], tiefe: int) -> str:
    """The text an entry scans: the newest `tiefe` messages (newest first), one per line."""
    return "\n".join(nachrichten[:max(0, tiefe)])


def durch_schluessel(e: Eintrag, nachrichten: Sequence[str], tiefe: int, budget: RegexBudget | None = None) -> bool:
    """Whether the entry's keys (and, for a selective entry, its secondary keys' logic) hold in
    the scanned messages; `tiefe` is the book's depth, the entry's own stands before it.
    `budget`: the turn's time for its regex keys, shared by all its entries."""
    text = scan_text(nachrichten, tiefe if e.scan_tiefe is None else e.scan_tiefe)
    opts = {"gross_klein": e.gross_klein, "ganze_woerter": e.ganze_woerter, "budget": budget,
            "klein": None if e.gross_klein else text.lower()}  # once for all the entry's keys
    if not text or not any(trifft(k, text, **opts) for k in e.schluessel):
        return False
    sekundaer = [k for k in e.sekundaer if k.strip()]
    if not e.selektiv or not sekundaer:
        return True
    hits = [trifft(k, text, **opts) for k in sekundaer]
    return {"and_any": any(hits), "not_all": not all(hits), "not_any": not any(hits),
            "and_all": all(hits)}[e.logik]


def tokens(text: str) -> int:
    """A token count estimate for the budget (about four characters a token)."""
    return (len(text) + 3) // 4


def im_budget(aktiviert: Sequence[Eintrag], budget: int) -> tuple[list[Eintrag], list[Eintrag]]:
    """The activated entries that fit the token budget, taken highest `reihenfolge` first; the first
    that does not fit is left out with every one after it. Both lists in placement order (lowest
    `reihenfolge` first)."""
    order = sorted(aktiviert, key=lambda e: (-e.reihenfolge, e.id))
    used = 0
    for i, e in enumerate(order):
        cost = tokens(e.inhalt) + 1
        if used + cost > budget:
            order, rest = order[:i], order[i:]
            break
        used += cost
    else:
        rest = []
    place = lambda es: sorted(es, key=lambda e: (e.reihenfolge, e.id))  # noqa: E731
    return place(order), place(rest)
