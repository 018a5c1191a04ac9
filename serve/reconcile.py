"""The OpenAI door's reconciliation of a client's messages with the pair's stored history.

An OpenAI client sends the whole conversation it shows with every request; the pair's history
lives server-side. The client's user and assistant messages before its last user message (its
system messages, the card it holds, are not part of the conversation) are laid over the end of
the stored history (a client may send only the latest part of a long conversation; assistant
messages it opens with that the server never stored — a card's greeting — are left aside):
- they are the stored history up to its end: a new message (`neu`);
- they are the stored history up to the last message of the human, and the client's last message
  is that message again: the client asks for another reply to it (`regenerate` — SillyTavern's
  swipe, Open WebUI's regenerate; also a message whose reply failed and is asked for again);
- the same, but the client's last message differs from the stored one: the client edited it (`edit`);
- anything else (an edit further back, a message the client never saw, no history at all): the
  server's history stands and the last message is a new one (`abweichung`; the answer's
  `X-Novaberg-History` header says so). A request without history is a new message (`neu`).
"""
from __future__ import annotations

from typing import Any, Literal, Sequence

Abgleich = Literal["neu", "regenerate", "edit", "abweichung"]
Nachricht = tuple[str, str]
"""(role, text) — role `user` or `assistant`, text with its whitespace normalised."""


def nachricht(role: str, text: str) -> Nachricht:
    return role, " ".join(text.split())


def gespeichert(eintraege: Sequence[dict[str, Any]]) -> list[Nachricht]:
    """The stored session entries as a client would show them."""
    return [nachricht("user" if e.get("rolle") == "user" else "assistant", e.get("inhalt") or "") for e in eintraege]


def _endet_mit(ganz: list[Nachricht], teil: list[Nachricht]) -> bool:
    return len(teil) <= len(ganz) and ganz[len(ganz) - len(teil):] == teil


def abgleichen(client: list[Nachricht], server: list[Nachricht]) -> Abgleich:
    """How the client's conversation (`client`, its last message a user's) meets the stored one."""
    *vorher, letzte = client
    while vorher and vorher[0][0] == "assistant" and not _passt_irgendwo(vorher, server):
        vorher = vorher[1:]  # a greeting (or other opening) the server never stored
    if not vorher:
        return "neu"
    if _endet_mit(server, vorher):
        return "neu"
    mensch = max((i for i, m in enumerate(server) if m[0] == "user"), default=None)
    if mensch is not None and _endet_mit(server[:mensch], vorher):
        return "regenerate" if server[mensch] == letzte else "edit"
    return "abweichung"


def _passt_irgendwo(vorher: list[Nachricht], server: list[Nachricht]) -> bool:
    """Whether the client's history as it is meets the stored one as a new message, a regenerate or an edit."""
    if _endet_mit(server, vorher):
        return True
    mensch = max((i for i, m in enumerate(server) if m[0] == "user"), default=None)
    return mensch is not None and _endet_mit(server[:mensch], vorher)


AUFGABE_KEYS = ("title", "tags", "follow_ups", "queries", "emoji", "text", "prompt")
"""What a client's housekeeping task asks for, by the JSON key its template names (Open WebUI's
task templates: title, tags, follow-ups, search queries, emoji, autocomplete, image prompt)."""


def client_aufgabe(text: str) -> str | None:
    """The JSON key a client's housekeeping request asks for, or None for a message of the person.
    Open WebUI sends its tasks (a chat's title, tags, follow-up suggestions, …) to the chat's model
    as one user message: a template that starts with `### Task:` and quotes the chat in
    `<chat_history>` (or `<text>`); it is not the person speaking."""
    head = text.lstrip()
    if not head.startswith("### Task:") or not ("<chat_history>" in text or "<text>" in text):
        return None
    return next((k for k in AUFGABE_KEYS if f'"{k}"' in text), "text")
