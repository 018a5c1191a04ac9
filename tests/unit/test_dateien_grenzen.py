"""Reading an uploaded file within bounds (serve/dateien.py): a text's charset from the encodings
real text files use (punycode, idna, rot13, base64 … refused 422 naming the allowed set); any
codec error 422, never 500; a PDF's pages, content-stream bytes and operators capped over the
whole document, so pages that share one large content stream cannot multiply the work."""
import codecs
import time

import pytest

from serve import dateien
from serve.dateien import DateiFehler, PdfGrenzen


def _lesen(data: bytes, ctype: str, **kw) -> dateien.Dokument:
    return dateien.lesen(data, ctype, None, 200_000, **kw)


@pytest.mark.parametrize("charset", ["punycode", "idna", "rot13", "rot_13", "base64", "uu", "zlib", "utf-7",
                                     "hex", "unicode_escape", "raw_unicode_escape", "no-such-charset", "utf\x00-8"])
def test_a_charset_outside_the_text_encodings_is_refused_naming_the_allowed(charset):
    started = time.monotonic()
    with pytest.raises(DateiFehler) as e:
        _lesen(("a" * 200_000 + "-" + "b" * 200_000).encode(), f"text/plain; charset={charset}")
    assert e.value.status == 422 and e.value.typ == "unreadable_file"
    assert "utf-8" in str(e.value) and "iso-8859-1" in str(e.value) and "cp1252" in str(e.value)
    assert time.monotonic() - started < 5  # refused before anything decodes


@pytest.mark.parametrize(("charset", "text"), [
    ("utf-8", "Grüße, Bello"), ("UTF8", "Grüße"), ("latin-1", "Grüße"), ("iso-8859-15", "5 €"),
    ("windows-1252", "„Grüße“"), ("cp1252", "Straße"), ("us-ascii", "plain"), ("koi8-r", "привет"),
    ("shift_jis", "こんにちは"), ("utf-16", "Grüße"), ("utf-16-le", "Grüße"), ("utf-32", "Grüße")])
def test_the_encodings_real_text_files_use_are_read(charset, text):
    assert _lesen(text.encode(charset), f"text/plain; charset={charset}").text == text


def test_a_utf8_bom_is_skipped_and_nul_characters_are_refused():
    assert _lesen(b"\xef\xbb\xbfHallo", "text/plain").text == "Hallo"
    for data, ctype in ((b"a\x00b", "text/plain"), ("a\x00b".encode("utf-16"), "text/plain; charset=utf-16")):
        with pytest.raises(DateiFehler, match="NUL") as e:
            _lesen(data, ctype)
        assert e.value.status == 422


class _Kaputt(codecs.Codec):
    def decode(self, data, errors="strict"):
        raise UnicodeError("the codec gives up (a UnicodeError that is no UnicodeDecodeError)")

    def encode(self, text, errors="strict"):
        raise UnicodeError("no")


def _finden(name):
    if name == "kaputt_test":
        return codecs.CodecInfo(name="kaputt_test", encode=_Kaputt().encode, decode=_Kaputt().decode)
    return None


def test_a_unicode_error_that_is_no_decode_error_is_422(monkeypatch):
    codecs.register(_finden)
    try:
        monkeypatch.setattr(dateien, "_CODECS", dateien._CODECS | {"kaputt_test"})
        with pytest.raises(DateiFehler) as e:
            _lesen(b"Hallo", "text/plain; charset=kaputt_test")
        assert e.value.status == 422 and "UnicodeError" in str(e.value)
    finally:
        codecs.unregister(_finden)


# ------------------------------------------------------------------ PDF
def _pdf(seiten: int, inhalt: bytes, geteilt: bool = True) -> bytes:
    """A PDF of `seiten` pages in Helvetica; with `geteilt` every page shows the one content stream."""
    kids = [3 + i for i in range(seiten)]
    erster_inhalt = 3 + seiten
    objs = ["<< /Type /Catalog /Pages 2 0 R >>",
            f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {seiten} >>"]
    for i in range(seiten):
        ref = erster_inhalt if geteilt else erster_inhalt + i
        objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {ref} 0 R"
                    f" /Resources << /Font << /F1 {erster_inhalt + (1 if geteilt else seiten)} 0 R >> >> >>")
    streams = [inhalt] if geteilt else [inhalt] * seiten
    out, offsets = b"%PDF-1.4\n", []
    bodies = [o.encode() for o in objs] + [b"<< /Length %d >>\nstream\n%s\nendstream" % (len(s), s) for s in streams]
    bodies.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, body in enumerate(bodies, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (i, body)
    xref = len(out)
    out += f"xref\n0 {len(bodies) + 1}\n0000000000 65535 f \n".encode() + "".join(
        f"{o:010d} 00000 n \n" for o in offsets).encode()
    return out + f"trailer\n<< /Size {len(bodies) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()


TEXT = b"BT /F1 12 Tf 72 720 Td (Die Heizung wird im Herbst gewartet.) Tj ET"


def test_a_small_pdf_of_several_pages_is_read():
    dok = _lesen(_pdf(3, TEXT, geteilt=False), "application/pdf")
    assert dok.art == "pdf" and dok.text.count("Heizung") == 3


def test_pages_sharing_one_large_content_stream_cannot_multiply_the_work():
    groß = b"0 0 m 1 1 l " * 10_000 + TEXT  # 120 kB of content, 20,000 operators, one line of text
    data = _pdf(2000, groß)
    assert len(data) < 500_000  # the upload is small; read page by page it would be 240 MB of content
    started = time.monotonic()
    with pytest.raises(DateiFehler) as e:  # each page counts the shared stream again
        _lesen(data, "application/pdf", pdf=PdfGrenzen(inhalt_bytes=500_000, operatoren=10_000_000))
    assert e.value.status == 413 and "500000 bytes of content" in str(e.value)
    with pytest.raises(DateiFehler) as e:
        _lesen(data, "application/pdf", pdf=PdfGrenzen(inhalt_bytes=10**9, operatoren=50_000))
    assert e.value.status == 413 and "50000 drawing operators" in str(e.value)
    assert time.monotonic() - started < 60


def test_a_pdf_past_its_pages_is_refused_before_any_page_is_read():
    with pytest.raises(DateiFehler) as e:
        _lesen(_pdf(5, TEXT), "application/pdf", pdf=PdfGrenzen(seiten=4))
    assert e.value.status == 413 and "5 pages" in str(e.value)
    assert _lesen(_pdf(4, TEXT), "application/pdf", pdf=PdfGrenzen(seiten=4)).text.count("Heizung") == 4


def _geflated(seiten: int, inhalt: bytes) -> bytes:
    """The same PDF with its one shared content stream compressed (a small upload, a large stream)."""
    import zlib

    roh = _pdf(seiten, b"@@@")
    klein = zlib.compress(inhalt, 9)
    alt = b"<< /Length 3 >>\nstream\n@@@\nendstream"
    neu = b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(klein), klein)
    return _neu_verweisen(roh.replace(alt, neu))


def _neu_verweisen(pdf: bytes) -> bytes:
    """The cross-reference table rewritten for the objects' new offsets."""
    import re

    body = pdf[:pdf.index(b"xref\n")]
    offsets = [m.start() for m in re.finditer(rb"(?m)^\d+ 0 obj\n", body)]
    trailer = pdf[pdf.index(b"trailer\n"):pdf.index(b"startxref")]
    return (body + f"xref\n0 {len(offsets) + 1}\n0000000000 65535 f \n".encode()
            + "".join(f"{o:010d} 00000 n \n" for o in offsets).encode() + trailer
            + f"startxref\n{len(body)}\n%%EOF\n".encode())


def test_a_stream_that_decodes_past_the_content_limit_is_refused_before_it_is_interpreted():
    data = _geflated(300, b"0 0 m 1 1 l " * 800_000)  # 9.6 MB of content from a few KB
    assert len(data) < 100_000
    started = time.monotonic()
    with pytest.raises(DateiFehler) as e:
        _lesen(data, "application/pdf")  # the default limits (8 MiB of content)
    assert e.value.status == 413 and e.value.typ == "too_large"
    assert time.monotonic() - started < 10
