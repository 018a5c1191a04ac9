"""The character as the reviewing and preparing nodes see it, and the placeholders of character
texts: Character Cards write `{{char}}` (or `<BOT>`) for the
character and `{{user}}` (or `<USER>`) for the human. Texts are stored as written, so a renamed
character stays right; they are filled where they are used: the prompt names the human Person B,
a greeting shown to a client names nobody it does not know."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.state import TurnState

_CHAR = re.compile(r"\{\{\s*char\s*\}\}|<BOT>", re.IGNORECASE)
_USER = re.compile(r"\{\{\s*user\s*\}\}|<USER>", re.IGNORECASE)


def einsetzen(text: str, character_name: str, person_b: str = "Person B") -> str:
    return _USER.sub(lambda _: person_b, _CHAR.sub(lambda _: character_name, text))


FIGUR_ZEICHEN = 600  # the tribunal and the Verfasser get a short form: who she is, where, how she speaks


def figur(pair, limit: int = FIGUR_ZEICHEN) -> str:
    """A short description of the character for the Verfasser and the tribunal; the responder
    carries the whole record."""
    name = pair.character_name
    teile = [x.strip() for x in (pair.identitaet, pair.szenario and f"Szene: {pair.szenario}",
                                 pair.sprechweise and f"Sprechweise: {pair.sprechweise}") if x and x.strip()]
    text = einsetzen(" ".join(teile), name)
    if not text:
        return f"{name}, ohne weitere Angaben."
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


_DU_VERB = {"ist": "bist", "hat": "hast", "wird": "wirst", "kann": "kannst", "will": "willst", "darf": "darfst",
            "muss": "musst", "soll": "sollst", "mag": "magst", "weiss": "weisst", "weiß": "weißt", "tut": "tust",
            "haelt": "haeltst", "hält": "hältst", "gilt": "giltst", "raet": "raetst", "rät": "rätst",
            "tritt": "trittst", "laedt": "laedst", "lädt": "lädst"}
_INVERTIERT = set(_DU_VERB) | {"wirkt", "bleibt", "scheint", "zeigt", "sucht", "haelt", "hält", "fuehlt", "fühlt",
                               "spricht", "geht", "steht", "sitzt", "klingt"}
_DIR = ("mit", "bei", "von", "zu", "nach", "aus", "gegenueber", "gegenüber")
_DICH = ("fuer", "für", "um", "gegen", "ohne", "durch")
_IHR = re.compile(r"\b(?:sie|ihr|ihre|ihren|ihrem|ihrer|ihres)\b", re.IGNORECASE)


def _du_verb(verb: str) -> str | None:
    """The second person of a verb in the third person singular present, or None when the word is
    not one: `ist` → `bist`, `wirkt` → `wirkst`, `arbeitet` → `arbeitest`, `setzt` stays."""
    if verb.lower() in _DU_VERB:
        return _DU_VERB[verb.lower()]
    if verb.endswith(("st", "zt", "ßt", "xt")):
        return verb
    return verb[:-1] + "st" if verb.endswith("t") and len(verb) > 2 else None


def du_fassung(text: str, character_name: str) -> str | None:
    """An analyst's sentence about the character, as the actor who plays her reads it (seed 004 §3.3):
    „Nova ist offen und zugewandt, der Nutzer haelt Abstand.“ → „Du bist offen und zugewandt, der
    Nutzer haelt Abstand.“ Her name as subject, after a verb and after a preposition becomes „Du“,
    „Dir“ or „Dich“. None when a reference to her in the third person would remain (her name in
    another position, her genitive, „sie“ or „ihr…“): a sentence that addresses her both ways is
    the mixed address seed 004 §3.2 removed."""
    name = re.escape(character_name)

    def subjekt(m: re.Match) -> str:
        verb = _du_verb(m.group(1))
        return f"Du {verb}" if verb else m.group(0)

    out = re.sub(rf"\b({'|'.join(_INVERTIERT)})\s+{name}\b",
                 lambda m: f"{_du_verb(m.group(1))} Du", text)
    out = re.sub(rf"\b({'|'.join(_DIR)})\s+{name}\b", r"\1 Dir", out, flags=re.IGNORECASE)
    out = re.sub(rf"\b({'|'.join(_DICH)})\s+{name}\b", r"\1 Dich", out, flags=re.IGNORECASE)
    out = re.sub(rf"\b{name}\s+(\w+)\b", subjekt, out)
    out = re.sub(r"\bDu (\w+) sich\b", r"Du \1 dich", out)
    out = re.sub(r"\b(\w+) Du sich\b", r"\1 Du dich", out)
    if re.search(rf"\b{name}", out) or _IHR.search(out):
        return None
    return out


def sein_name(state: TurnState) -> str:
    """The name his client sent with this message, else the latest one in the session window; ""
    without one, and when it is the character's own (praegung keeps him as Person B then too)."""
    name = state.stimulus.person_name
    if not name and state.memory:
        name = next((t.name for t in reversed(state.memory.session_turns) if t.name), None)
    return "" if not name or name.casefold() == state.pair.character_name.strip().casefold() else name
