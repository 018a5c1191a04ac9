"""How `novaberg chat` shows a streamed reply: what stays on the screen is the reply as stored.

A turn's stream sends one `schreibt` event when the character starts writing (or, asked with
`--draft`, the responder's text as `draft` events while it is written), then one `token` event
with the reply exactly as committed (review — the Thinker, the tribunal and corrector, the leak
guard — may have changed it), then `final`. On a terminal the writing state (or the draft) is
shown dimmed while the reply is written and is then erased and replaced by the kept reply; where
the output is not a terminal (a pipe, a file) nothing can be taken back, so only the kept reply
is written. A failed turn erases it as well: nothing of a reply that was not stored stays on the
screen.
"""
from __future__ import annotations

import math
import shutil
import unicodedata
from typing import TextIO

DIM, RESET = "\x1b[2m", "\x1b[0m"
WRITING = "schreibt …"
UP, CLEAR_BELOW = "\x1b[{}A", "\x1b[J"


def cells(text: str) -> int:
    """Terminal cells a line takes: wide (East Asian wide and full-width) characters take two,
    combining marks none."""
    n = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def rows(text: str, width: int) -> int:
    """Terminal rows `text` takes when written from the start of a row on a screen `width` wide."""
    return sum(max(1, math.ceil(cells(line) / width)) for line in text.split("\n"))


class ReplyView:
    """One reply: `begin`, `writing` or any number of `draft`, then `kept` or `failed`."""

    def __init__(self, out: TextIO, *, terminal: bool | None = None, width: int | None = None):
        self.out = out
        self.terminal = out.isatty() if terminal is None else terminal
        self.width = width or shutil.get_terminal_size((80, 24)).columns
        self.prefix = ""
        self.drafted = ""

    def begin(self, prefix: str) -> None:
        self.prefix = prefix
        self.out.write(prefix)
        self.out.flush()

    def draft(self, text: str) -> None:
        if not self.terminal:
            return
        self.drafted += text
        self.out.write(f"{DIM}{text}{RESET}")
        self.out.flush()

    def writing(self) -> None:
        """The writing state, shown until the kept reply (or the failure) replaces it."""
        if not self.drafted:
            self.draft(WRITING)

    def _erase(self) -> None:
        """Back to where the prefix began, and the rows below it cleared."""
        if not (self.terminal and self.drafted):
            return
        up = rows(self.prefix + self.drafted, self.width) - 1
        self.out.write("\r" + (UP.format(up) if up else "") + CLEAR_BELOW + self.prefix)
        self.drafted = ""

    def kept(self, text: str) -> None:
        self._erase()
        self.out.write(text + "\n")
        self.out.flush()

    def failed(self, message: str) -> None:
        self._erase()
        self.out.write(f"[{message}]\n")
        self.out.flush()
