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
  `X-Novaberg-History` header says so). A request without history is a new message (`neu`) — but
  for the conversation's first message sent again while the stored history holds it as its only
  message of the human: that is its reply asked for anew (`regenerate`; Open WebUI's regenerate of
  the first reply, any client's retry of the first request).
A request whose turn id (`X-Turn-Id`) has answered before is a retry (`wiederholung`, decided by the
route before any reconciliation): its stored result again, never a regenerate.
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


def _gemeinsames_ende(a: Sequence[Nachricht], b: Sequence[Nachricht]) -> int:
    """How many messages `a` and `b` end with alike: one pass from their ends, each message compared once."""
    n = 0
    for x, y in zip(reversed(a), reversed(b)):
        if x != y:
            break
        n += 1
    return n


def abgleichen(client: list[Nachricht], server: list[Nachricht]) -> Abgleich:
    """How the client's conversation (`client`, its last message a user's) meets the stored one.
    Linear in the messages: the client's history is a stored one's end exactly when it is no longer
    than the two lists' common end, so each of the two candidates (the whole stored history, and it
    up to the last message of the human) is compared once, from the end."""
    *vorher, letzte = client
    mensch = next((i for i in range(len(server) - 1, -1, -1) if server[i][0] == "user"), None)
    bis_ende = _gemeinsames_ende(vorher, server)
    bis_mensch = _gemeinsames_ende(vorher, server[:mensch]) if mensch is not None else -1
    # the assistant messages it opens with that the server never stored (a greeting, other openings)
    # are left aside, up to the first from which on the history meets a stored one
    fuehrend = next((i for i, m in enumerate(vorher) if m[0] != "assistant"), len(vorher))
    rest = len(vorher) - min(fuehrend, len(vorher) - max(bis_ende, bis_mensch))
    if rest == 0 and mensch == 0 and server[0] == letzte:
        return "regenerate"  # the conversation's first message again: its reply asked for anew (a retry)
    if rest == 0 or rest <= bis_ende:
        return "neu"
    if rest <= bis_mensch:
        return "regenerate" if server[mensch] == letzte else "edit"
    return "abweichung"


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
