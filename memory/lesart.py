"""How a question reads in time: does it ask about a past event or about the present state?

The read's recency tie-break (memory/lesepfad.py `zeitfolge`) applies only to the present reading:
"Wo wohnt Person B?", "How is Bello?" ask what is true now, and between memories of one subject the
newer one answers; "When did Caroline go to the support group?", "Was hast du damals gemacht?" ask
about an event, and the read's own relevance order stands (the newer memory of a subject is no
better an answer to it). A small rule set, German and English, no model call:

- an explicit date (a year, a day and month) → past;
- German: Präteritum of sein/haben/werden (war, hattest, wurde …), time words (damals, früher,
  gestern, neulich, letztes Jahr, vor drei Jahren …), Perfekt (a form of haben/sein beside a
  lower-case participle ge…t / ge…en, a separable verb's too: "hast … gemacht", "kennengelernt";
  not "vorgenommen", a present intention) → past;
- English: did/was/were/had, the present perfect (has … been, have … done, …ed), time words (ago,
  yesterday, recently, last year, used to …), a simple past main verb (…ed, went, gave …) where
  no present auxiliary (is, are, do, does, …) stands → past;
- anything else → present (the question's language is the one more of its function words belong
  to; a tie reads English).

`lesart(text)` names the reading and the words that decided it (memory/LESEPFAD.md, "Knowledge that
changes").
"""
from __future__ import annotations

import re
from typing import Literal, NamedTuple

GEGENWART: Literal["gegenwart"] = "gegenwart"
VERGANGENHEIT: Literal["vergangenheit"] = "vergangenheit"

_GERMAN_WORDS = re.compile(
    r"[äöüß]|\b(?:ich|du|er|wir|ihr|ist|sind|bin|bist|der|das|den|dem|des|und|nicht|noch|wie|wo|wer|wann|warum|"
    r"wohin|woher|mein|meine|meinem|meiner|dein|deine|sein|seine|ihre|eigentlich|hat|habe|hast|haben|es|mit|zu|"
    r"von|auf|im|ein|eine|einen|nochmal|so|gerade|jetzt|welche|welchen|welcher|wieso|geht|macht|mache|machst|"
    r"machen|wohnt|arbeitet|lebt|ab|bei|nach|aus|um|beruflich)\b", re.IGNORECASE)
_ENGLISH_WORDS = re.compile(
    r"\b(?:the|is|are|am|do|does|did|i|you|my|your|what|where|when|who|how|why|which|were|and|of|to|in|on|at|"
    r"his|her|their|has|have|had|it|with|for|now|still)\b", re.IGNORECASE)
_MONTH = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "januar|februar|märz|mai|juni|juli|oktober|dezember")
_DATE = re.compile(rf"\b(?:(?:{_MONTH})\s+(?:(?:19|20)\d\d|\d{{1,2}})\b|\d{{1,2}}\.?\s+(?:{_MONTH})\b|(?:19|20)\d\d\b|"
                    rf"\d{{1,2}}\.\d{{1,2}}\.)", re.IGNORECASE)
_GERMAN_PAST = re.compile(
    r"\b(?:war|warst|waren|wart|hatte|hattest|hatten|hattet|wurde|wurdest|wurden|damals|früher|gestern|vorgestern"
    r"|neulich|letztens|kürzlich|ehemals)\b"
    r"|\b(?:letzte[nsm]?|vorige[nsm]?|vergangene[nsm]?)\s+(?:jahr|monat|woche|wochenende|sommer|winter|herbst|"
    r"frühling|mal)\b"
    r"|\bvor\s+(?:\w+\s+)?(?:jahren|monaten|wochen|tagen)\b", re.IGNORECASE)
_GERMAN_AUXILIARY = re.compile(r"\b(?:habe|hast|hat|haben|habt|bin|bist|ist|sind|seid)\b", re.IGNORECASE)
_GERMAN_PARTICIPLE = re.compile(  # lower case: German nouns are capitalised; a separable verb's prefix before the ge
    r"\b(?:ab|an|auf|aus|bei|ein|fest|her|hin|kennen|los|mit|nach|vor|weg|zu|zurück|zusammen|um|durch|heim|teil|"
    r"wieder)?ge[a-zäöüß]{2,}(?:t|en)\b")
_GERMAN_NOT_PARTICIPLE = frozenset({"gegen", "gehen", "geht", "gehst", "gelten", "geben", "gefällt", "gehört", "gehören",
                               "genug", "gerecht", "vorgenommen", "vorgehabt"})
"""Not a participle, or one whose Perfekt names a present intention ("hat sich vorgenommen")."""
_ENGLISH_PAST = re.compile(
    r"\b(?:did|didn't|was|wasn't|were|weren't|had)\b"
    r"|\b(?:has|have|hasn't|haven't)\s+(?:\w+\s+){0,2}?(?:been|had|done|gone|seen|made|got|given|taken|told|\w+ed)\b"
    r"|\b(?:ago|yesterday|recently|back\s+then|used\s+to|in\s+the\s+past"
    r"|last\s+(?:year|month|week|weekend|night|summer|winter|spring|fall|autumn|time))\b", re.IGNORECASE)
_ENGLISH_PRESENT = re.compile(r"\b(?:is|are|am|do|does|don't|doesn't|isn't|aren't|will|can|would|might|could|should)\b"
                           r"|'s\b|'re\b|'m\b", re.IGNORECASE)
_ENGLISH_SIMPLE_PAST = re.compile(
    r"\b(?:\w{2,}ed|went|got|gave|made|took|saw|said|told|bought|came|found|felt|met|left|began|wrote|won|lost|sold|"
    r"brought|thought|ran|taught|built|kept|spent|became|chose|drew|ate|drove|flew|grew|knew|paid|sent|heard|held|"
    r"led|meant|sang|sat|slept|spoke|stood|swam|threw|understood|wore)\b", re.IGNORECASE)
_ENGLISH_NOT_SIMPLE_PAST = frozenset({"need", "feed", "speed", "seed", "bed", "red", "shed", "indeed", "hundred", "weed",
                                  "breed", "proceed", "succeed", "exceed", "embed"})


class Lesart(NamedTuple):
    """A question's reading in time and the words that decided it (None: nothing marks a past)."""

    name: Literal["gegenwart", "vergangenheit"]
    marker: str | None = None


def _german(text: str) -> Lesart:
    if m := _GERMAN_PAST.search(text):
        return Lesart(VERGANGENHEIT, m.group(0))
    if _GERMAN_AUXILIARY.search(text):
        for p in _GERMAN_PARTICIPLE.finditer(text):
            if p.group(0) not in _GERMAN_NOT_PARTICIPLE:
                return Lesart(VERGANGENHEIT, p.group(0))
    return Lesart(GEGENWART)


def _english(text: str) -> Lesart:
    if m := _ENGLISH_PAST.search(text):
        return Lesart(VERGANGENHEIT, m.group(0))
    if not _ENGLISH_PRESENT.search(text):
        for p in _ENGLISH_SIMPLE_PAST.finditer(text):
            if p.group(0).lower() not in _ENGLISH_NOT_SIMPLE_PAST:
                return Lesart(VERGANGENHEIT, p.group(0))
    return Lesart(GEGENWART)


def lesart(text: str) -> Lesart:
    """Whether `text` asks about a past event (`vergangenheit`) or the present state (`gegenwart`)."""
    if m := _DATE.search(text):
        return Lesart(VERGANGENHEIT, m.group(0))
    if len(_GERMAN_WORDS.findall(text)) > len(_ENGLISH_WORDS.findall(text)):
        return _german(text)
    return _english(text)
