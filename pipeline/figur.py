"""The character as the reviewing and preparing nodes see it, and the placeholders of character
texts: Character Cards write `{{char}}` (or `<BOT>`) for the
character and `{{user}}` (or `<USER>`) for the human. Texts are stored as written, so a renamed
character stays right; they are filled where they are used: the prompt names the human Person B,
a greeting shown to a client names nobody it does not know."""
from __future__ import annotations

import re

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
