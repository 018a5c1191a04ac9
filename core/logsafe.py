"""Client text made safe where it leaves as a line: in a log record or an HTTP header.

A client sends strings the software writes out again (the names of fields it set, an account's
name, …). In a log line a carriage return or a line feed would begin a forged line; in a header a
character beyond latin-1 cannot be encoded at all and a line break ends the header. `ohne_steuerzeichen`
writes control and line-separating characters as escapes (`\\n`, `\\x1b`, `\\u2028`),
`nur_ascii` every character beyond printable ASCII too; `install` makes every record of the
project's loggers (`novaberg.*`) leave its message escaped, one record one line."""
from __future__ import annotations

import logging
import re

_STEUER = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NICHT_ASCII = re.compile(r"[^\x20-\x7e]")
_KURZ = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    c = m.group()
    if c in _KURZ:
        return _KURZ[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"


def ohne_steuerzeichen(text: str) -> str:
    """`text` with its control characters (C0, DEL, C1) and line separators written as escapes."""
    return _STEUER.sub(_escape, text)


def nur_ascii(text: str) -> str:
    """`text` in printable ASCII: every other character written as an escape (`\\u540d`)."""
    return _NICHT_ASCII.sub(_escape, text)


PREFIX = "novaberg"
"""The loggers whose records `install` escapes: the project's own."""


def _escaping(make):
    def record(*args, **kwargs) -> logging.LogRecord:
        rec = make(*args, **kwargs)
        if not rec.name.startswith(PREFIX):
            return rec
        try:
            message = rec.getMessage()
        except Exception:  # a record whose arguments do not fit its format: the handler reports it
            return rec
        safe = ohne_steuerzeichen(message)
        if safe != message or rec.args:
            rec.msg, rec.args = safe, None
        return rec

    record.novaberg_escapes = True  # type: ignore[attr-defined]
    return record


def install() -> None:
    """Every record the project's loggers make from now on in this process carries its message
    with control characters escaped, whatever handler writes it (Ray's, Serve's, a basicConfig's).
    Idempotent; it wraps the record factory in place (one that another library set stays in effect)."""
    current = logging.getLogRecordFactory()
    if not getattr(current, "novaberg_escapes", False):
        logging.setLogRecordFactory(_escaping(current))
