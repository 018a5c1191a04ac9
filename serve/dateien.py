"""Reading an uploaded file (issue #10): plain text, Markdown or PDF (through pypdf) becomes a
`Dokument` — its kind, name, content hash and text — or a `DateiFehler` that says what is wrong
with it: 413 too large, 415 a kind that is not read, 422 empty or unreadable. Nothing here stores
anything; serve/erschliessung.py indexes what this reads."""
from __future__ import annotations

import codecs
import hashlib
import io
import logging
import re
from pathlib import PurePosixPath, PureWindowsPath
from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.errors import InputError

log = logging.getLogger("novaberg.dateien")

Art = Literal["text", "markdown", "pdf"]

ARTEN_NACH_TYP: dict[str, Art] = {"text/plain": "text", "text/markdown": "markdown", "text/x-markdown": "markdown",
                                  "application/pdf": "pdf"}
ARTEN_NACH_ENDUNG: dict[str, Art] = {".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown",
                                     ".pdf": "pdf"}
ENDUNG: dict[Art, str] = {"text": "txt", "markdown": "md", "pdf": "pdf"}
_UNBESTIMMT = {"", "application/octet-stream"}
"""Content types that name no kind: the file name's ending (or the PDF signature) decides."""
NAME_MAX = 200
_STEUERZEICHEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NAME_VERBOTEN = re.compile(r"[\x00-\x1f\x7f]")


class DateiFehler(InputError, ValueError):
    """What is wrong with an uploaded file, with its HTTP status and error type."""

    def __init__(self, status: int, typ: str, message: str):
        super().__init__(message)
        self.status = status
        self.typ = typ

    def __reduce__(self):  # crosses Ray's process boundaries: rebuilt from its own arguments
        return type(self), (self.status, self.typ, str(self))


class Dokument(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    art: Art
    inhalt_hash: str
    """SHA-256 of the bytes as uploaded: the same file is indexed once per pair."""
    bytes: int
    text: str
    titel_hinweis: str | None = None
    """A title the file names itself (a Markdown heading, a PDF's title), for the topic's fallback."""


def _typ(content_type: str | None) -> tuple[str, str | None]:
    """The media type without parameters, and its charset if one is named."""
    parts = [p.strip() for p in (content_type or "").split(";")]
    charset = next((p.split("=", 1)[1].strip().strip('"') for p in parts[1:] if p.lower().startswith("charset=")), None)
    return parts[0].lower(), charset


def art_bestimmen(content_type: str | None, name: str | None, data: bytes) -> Art:
    """The kind from the declared content type; without one (or `application/octet-stream`) from
    the name's ending, then from the PDF signature. Anything else: 415."""
    typ, _ = _typ(content_type)
    if typ in ARTEN_NACH_TYP:
        return ARTEN_NACH_TYP[typ]
    if typ in _UNBESTIMMT:
        endung = PurePosixPath(name or "").suffix.lower()
        if endung in ARTEN_NACH_ENDUNG:
            return ARTEN_NACH_ENDUNG[endung]
        if data.startswith(b"%PDF-"):
            return "pdf"
    was = f"content type {typ!r}" if typ not in _UNBESTIMMT else f"file name {name!r}"
    raise DateiFehler(415, "unsupported_media_type",
                      f"{was} is not read; send plain text (text/plain, .txt), Markdown (text/markdown, .md) "
                      "or PDF (application/pdf, .pdf)")


def name_pruefen(name: str | None, art: Art, inhalt_hash: str) -> str:
    """The file's name without folders; none given: `datei-<hash>.<ending>`."""
    if name is None or not name.strip():
        return f"datei-{inhalt_hash[:8]}.{ENDUNG[art]}"
    if _NAME_VERBOTEN.search(name):
        raise DateiFehler(422, "invalid_request", "name: must not contain control characters")
    base = PureWindowsPath(PurePosixPath(name.strip()).name).name.strip()
    if not base or base in (".", ".."):
        raise DateiFehler(422, "invalid_request", f"name: {name!r} names no file")
    if len(base) > NAME_MAX:
        raise DateiFehler(422, "invalid_request", f"name: longer than {NAME_MAX} characters ({len(base)})")
    return base


def _text_dekodieren(data: bytes, charset: str | None) -> str:
    if b"\x00" in data:
        raise DateiFehler(422, "unreadable_file", "the file holds NUL bytes: binary data, not text")
    encoding = charset or "utf-8"
    try:
        codec = codecs.lookup(encoding).name
    except LookupError:
        raise DateiFehler(422, "unreadable_file", f"unknown charset {charset!r}") from None
    try:
        return data.decode("utf-8-sig" if codec == "utf-8" else codec)
    except LookupError:  # a codec that is no text encoding (rot13, base64, zlib …)
        raise DateiFehler(422, "unreadable_file", f"charset {charset!r} is no text encoding") from None
    except UnicodeDecodeError as e:
        raise DateiFehler(422, "unreadable_file", f"the text is not valid {encoding} (byte {e.start}); "
                                                  "send it as UTF-8 or name its charset") from None


def _pdf_lesen(data: bytes, max_zeichen: int) -> tuple[str, str | None]:
    """The text of every page, and the PDF's own title; a PDF pypdf cannot read: 422."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DateiFehler(422, "unreadable_file", "the PDF is encrypted with a password")
        seiten, zeichen = [], 0
        for page in reader.pages:
            t = page.extract_text() or ""
            seiten.append(t)
            zeichen += len(t)
            if zeichen > max_zeichen:
                raise DateiFehler(413, "too_large", f"the PDF holds more than {max_zeichen} characters of text")
        titel = (reader.metadata.title if reader.metadata else None) or None
    except DateiFehler:
        raise
    except Exception as e:  # pypdf's errors are many kinds (PdfReadError, ValueError, KeyError, ...)
        log.warning("dateien: PDF unreadable (%s: %s)", type(e).__name__, e)
        raise DateiFehler(422, "unreadable_file", f"the PDF could not be read ({type(e).__name__}: {e})") from None
    return "\n\n".join(seiten), (titel.strip() if isinstance(titel, str) else None)


def _ueberschrift(text: str) -> str | None:
    m = re.search(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", text, re.MULTILINE)
    return m.group(1).strip() if m else None


def lesen(data: bytes, content_type: str | None, name: str | None, max_zeichen: int) -> Dokument:
    """An uploaded file as a `Dokument`, or a `DateiFehler` (413, 415, 422)."""
    if not data:
        raise DateiFehler(422, "empty_file", "empty body: send the file's bytes as the request body")
    art = art_bestimmen(content_type, name, data)
    inhalt_hash = hashlib.sha256(data).hexdigest()
    name = name_pruefen(name, art, inhalt_hash)
    if art == "pdf":
        if not data.startswith(b"%PDF-"):
            raise DateiFehler(422, "unreadable_file", "declared as PDF, but the body does not start with %PDF-")
        text, titel = _pdf_lesen(data, max_zeichen)
    else:
        text = _text_dekodieren(data, _typ(content_type)[1])
        titel = _ueberschrift(text) if art == "markdown" else None
    # control characters of an extracted text are the extraction's, not the person's: spaces
    text = _STEUERZEICHEN.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n")).strip()
    if not text:
        raise DateiFehler(422, "empty_file", "the file holds no text" + (
            " (a scanned PDF has only images; it would need OCR, which is not done)" if art == "pdf" else ""))
    if len(text) > max_zeichen:
        raise DateiFehler(413, "too_large", f"the file holds {len(text)} characters of text; at most {max_zeichen}")
    return Dokument(name=name, art=art, inhalt_hash=inhalt_hash, bytes=len(data), text=text, titel_hinweis=titel)
