"""Reading an uploaded file (issue #10): plain text, Markdown or PDF (through pypdf) becomes a
`Dokument` — its kind, name, content hash and text — or a `DateiFehler` that says what is wrong
with it: 413 too large, 415 a kind that is not read, 422 empty or unreadable. Nothing here stores
anything; serve/erschliessung.py indexes what this reads."""
from __future__ import annotations

import codecs
import contextlib
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


ZEICHENSAETZE = ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be",
                 "ascii", *(f"iso-8859-{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)),
                 *(f"cp{n}" for n in range(1250, 1259)), "cp437", "cp850", "koi8-r", "koi8-u", "mac-roman",
                 "shift_jis", "cp932", "euc-jp", "gb2312", "gbk", "gb18030", "big5", "euc-kr", "cp949")
"""The charsets a text file may declare: the encodings real text files use. Python's other codecs
(punycode, idna, utf-7, rot13, base64, zlib, ...) are no text file's encoding and some decode in
quadratic time: 422."""
_CODECS = {codecs.lookup(z).name for z in ZEICHENSAETZE}


def _codec(charset: str | None) -> str:
    """The codec of a declared charset (none: UTF-8, a BOM skipped); one outside the allowed set: 422."""
    if charset is None:
        return "utf-8-sig"
    try:
        codec = codecs.lookup(charset).name
    except (LookupError, ValueError):  # ValueError: a name with a NUL
        codec = None
    if codec not in _CODECS:
        raise DateiFehler(422, "unreadable_file", f"charset {charset!r} is not read; name one of "
                                                  f"{', '.join(ZEICHENSAETZE)} (or none for UTF-8)")
    return "utf-8-sig" if codec == "utf-8" else codec


def _text_dekodieren(data: bytes, charset: str | None) -> str:
    codec = _codec(charset)
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as e:
        raise DateiFehler(422, "unreadable_file", f"the text is not valid {charset or 'UTF-8'} (byte {e.start}); "
                                                  "send it as UTF-8 or name its charset") from None
    except (UnicodeError, LookupError, ValueError) as e:  # a codec's own error that names no byte
        raise DateiFehler(422, "unreadable_file", f"the text could not be decoded as {charset or 'UTF-8'} "
                                                  f"({type(e).__name__}: {e})") from None
    if "\x00" in text:
        raise DateiFehler(422, "unreadable_file", "the file holds NUL characters: binary data, not text")
    return text


class PdfGrenzen(BaseModel):
    """How much of a PDF is read: pages, and content-stream bytes and operators over the whole
    document (pages that share one content stream count it once each: their work adds up)."""
    model_config = ConfigDict(frozen=True)

    seiten: int = 2000
    inhalt_bytes: int = 8 * 1024 * 1024
    operatoren: int = 1_000_000


class _Zaehler:
    """Content-stream bytes and operators read so far, against the document's limits."""

    def __init__(self, grenzen: PdfGrenzen):
        self.grenzen, self.bytes, self.operatoren = grenzen, 0, 0

    def seite(self, page) -> None:
        """The page's content streams counted before they are interpreted."""
        inhalt = page.get("/Contents")
        inhalt = inhalt.get_object() if inhalt is not None else None
        for stream in (inhalt if isinstance(inhalt, list) else [inhalt] if inhalt is not None else []):
            stream = stream.get_object()
            self.bytes += len(stream.get_data() or b"") if hasattr(stream, "get_data") else 0
            if self.bytes > self.grenzen.inhalt_bytes:
                raise DateiFehler(413, "too_large", f"the PDF's pages hold more than {self.grenzen.inhalt_bytes} "
                                                    "bytes of content to interpret")

    def operator(self, *_args) -> None:
        self.operatoren += 1
        if self.operatoren > self.grenzen.operatoren:
            raise DateiFehler(413, "too_large", f"the PDF's pages hold more than {self.grenzen.operatoren} "
                                                "drawing operators to interpret")


def _pdf_konfiguration(grenzen: PdfGrenzen):
    """pypdf's own limits on decompressed streams and the page tree, at most ours."""
    import pypdf

    if not hasattr(pypdf, "apply_configuration"):  # an older pypdf: its built-in limits
        log.warning("dateien: pypdf %s has no apply_configuration; its own limits apply "
                    "(fallback pypdf_standardgrenzen)", pypdf.__version__)
        return contextlib.nullcontext()
    cfg, n = pypdf.get_configuration(), grenzen.inhalt_bytes
    ours = {"zlib_maximum_output_length": n, "lzw_maximum_output_length": n, "run_length_maximum_output_length": n,
            "brotli_maximum_output_length": n, "array_based_stream_maximum_output_length": n,
            "page_tree_maximum_entries": 4 * grenzen.seiten + 16,
            "stream_parsing_work_maximum_count": 4 * grenzen.operatoren}
    return pypdf.apply_configuration(**{k: min(getattr(cfg, k), v) for k, v in ours.items() if hasattr(cfg, k)})


def _pdf_lesen(data: bytes, max_zeichen: int, grenzen: PdfGrenzen) -> tuple[str, str | None]:
    """The text of every page, and the PDF's own title; a PDF pypdf cannot read: 422; one past
    the limits (pages, content bytes, operators, characters): 413."""
    from pypdf.errors import LimitReachedError

    try:
        with _pdf_konfiguration(grenzen):
            return _pdf_seiten(data, max_zeichen, grenzen)
    except DateiFehler:
        raise
    except LimitReachedError as e:  # one of pypdf's limits above: a stream that decodes too large, ...
        raise DateiFehler(413, "too_large", f"the PDF passes a limit of what is read ({e})") from None
    except Exception as e:  # pypdf's errors are many kinds (PdfReadError, ValueError, KeyError, ...)
        log.warning("dateien: PDF unreadable (%s: %s)", type(e).__name__, e)
        raise DateiFehler(422, "unreadable_file", f"the PDF could not be read ({type(e).__name__}: {e})") from None


def _pdf_seiten(data: bytes, max_zeichen: int, grenzen: PdfGrenzen) -> tuple[str, str | None]:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise DateiFehler(422, "unreadable_file", "the PDF is encrypted with a password")
    if len(reader.pages) > grenzen.seiten:
        raise DateiFehler(413, "too_large", f"the PDF has {len(reader.pages)} pages; at most {grenzen.seiten} are read")
    zaehler, seiten, zeichen = _Zaehler(grenzen), [], 0
    for page in reader.pages:
        zaehler.seite(page)
        t = page.extract_text(visitor_operand_before=zaehler.operator) or ""
        seiten.append(t)
        zeichen += len(t)
        if zeichen > max_zeichen:
            raise DateiFehler(413, "too_large", f"the PDF holds more than {max_zeichen} characters of text")
    titel = (reader.metadata.title if reader.metadata else None) or None
    return "\n\n".join(seiten), (titel.strip() if isinstance(titel, str) else None)


def _ueberschrift(text: str) -> str | None:
    m = re.search(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", text, re.MULTILINE)
    return m.group(1).strip() if m else None


def lesen(data: bytes, content_type: str | None, name: str | None, max_zeichen: int,
          pdf: PdfGrenzen = PdfGrenzen()) -> Dokument:
    """An uploaded file as a `Dokument`, or a `DateiFehler` (413, 415, 422). Runs in a parser
    process (serve/parse_worker.py) that its time limit can kill."""
    if not data:
        raise DateiFehler(422, "empty_file", "empty body: send the file's bytes as the request body")
    art = art_bestimmen(content_type, name, data)
    inhalt_hash = hashlib.sha256(data).hexdigest()
    name = name_pruefen(name, art, inhalt_hash)
    if art == "pdf":
        if not data.startswith(b"%PDF-"):
            raise DateiFehler(422, "unreadable_file", "declared as PDF, but the body does not start with %PDF-")
        text, titel = _pdf_lesen(data, max_zeichen, pdf)
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
