"""Character Cards (V1, V2 `chara_card_v2`, V3 `chara_card_v3`) in and out: JSON, or a PNG whose
`chara` (V2) or `ccv3` (V3) text chunk holds the card as base64 JSON, read with Pillow.

Import maps a card onto a character of ours and reports it: which card field went where
(`abbildung`), which had no place (`nicht_uebernommen`, kept in `karte_rest` so the export gives it
back), and the lorebook (`character_book`) as background knowledge entries. Export writes a V2
JSON card. Nothing is dropped without a word; a card that cannot be read raises `KarteFehler`
with the reason. A card is bounded beyond its size (`KartenGrenzen`, from the API bounds): how
deeply its JSON nests, how much it keeps without a place, how many keys a lorebook entry holds and
how long one is.
"""
from __future__ import annotations

import base64
import binascii
import io
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.bestand import CharakterWissen
from core.errors import InputError
from core.settings import ApiBoundsSettings
from serve.schemas import CHARACTER_LIMITS, ID_PATTERN

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_PIXELS = 16_000_000  # an avatar needs far fewer; more is refused before any pixel is decoded
MAX_WISSEN = 500
MAX_WISSEN_ZEICHEN = 8000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ORIGINAL = re.compile(r"\{\{\s*original\s*\}\}", re.IGNORECASE)

# card field -> our field; personality joins the identity, post-history instructions the instructions
_ABBILDUNG = {"name": "name", "description": "identitaet", "personality": "identitaet", "scenario": "szenario",
              "first_mes": "begruessung", "mes_example": "beispieldialog", "system_prompt": "charakter_anweisung",
              "post_history_instructions": "charakter_anweisung"}
_ENTRY_USED = {"keys", "content", "enabled", "case_sensitive", "constant", "name", "secondary_keys", "selective",
               "insertion_order"}
_EXTENSIONS_USED = {"selectiveLogic", "match_whole_words", "scan_depth", "case_sensitive"}
"""SillyTavern's entry extensions that activation reads; the entry's `extensions` are kept whole
for the export."""
_V2_DATA = {"name", "description", "personality", "scenario", "first_mes", "mes_example", "creator_notes",
            "system_prompt", "post_history_instructions", "alternate_greetings", "character_book", "tags", "creator",
            "character_version", "extensions"}


class KarteFehler(InputError, ValueError):
    """The card cannot be read or mapped; the message names the field and the reason."""


@dataclass(frozen=True)
class KartenGrenzen:
    """What an import accepts of a card beyond its size (ApiBoundsSettings: `card_max_depth`,
    `card_rest_max_bytes`, `lorebook_max_keys`, `lorebook_max_key_chars`)."""

    max_tiefe: int
    max_rest_bytes: int
    max_schluessel: int
    max_schluessel_zeichen: int

    @classmethod
    def aus(cls, bounds: ApiBoundsSettings) -> KartenGrenzen:
        return cls(max_tiefe=bounds.card_max_depth, max_rest_bytes=bounds.card_rest_max_bytes,
                   max_schluessel=bounds.lorebook_max_keys, max_schluessel_zeichen=bounds.lorebook_max_key_chars)


STANDARD_GRENZEN = KartenGrenzen.aus(ApiBoundsSettings())
"""The bounds `lesen` applies when it is given none: the settings' defaults. The ingress passes its
replica's own (the parse runs in a parser process, which has no settings of its own)."""


class Wissenseintrag(BaseModel):
    """A lorebook entry as the character's background knowledge; how it activates is
    memory/wissen_schluessel.py."""

    titel: str
    inhalt: str
    schluessel: list[str] = Field(default_factory=list)
    sekundaer: list[str] = Field(default_factory=list)
    selektiv: bool = False
    logik: Literal["and_any", "not_all", "not_any", "and_all"] = "and_any"
    gross_klein: bool = False
    ganze_woerter: bool = False
    immer: bool = False
    aktiv: bool = True
    reihenfolge: int = Field(default=100, ge=-2**31, lt=2**31)
    scan_tiefe: int | None = Field(default=None, ge=0, le=1000)


class KartenImport(BaseModel):
    format: Literal["chara_card_v1", "chara_card_v2", "chara_card_v3"]
    quelle: Literal["json", "png"]
    felder: dict[str, str]
    """Our character fields (name, identitaet, ...)."""
    wissen: list[Wissenseintrag]
    karte_rest: dict[str, Any]
    abbildung: dict[str, str]
    nicht_uebernommen: list[str]


# ------------------------------------------------------------------ reading
def lesen(data: bytes, grenzen: KartenGrenzen | None = None) -> KartenImport:
    """A card from its bytes: PNG by its signature, JSON otherwise."""
    try:
        if data.startswith(PNG_SIGNATURE):
            return abbilden(_aus_png(data), "png", grenzen)
        card = _json(data.decode("utf-8-sig"), "not a PNG and not JSON")
        return abbilden(card, "json", grenzen)
    except UnicodeDecodeError as e:
        raise KarteFehler(f"not a PNG and not JSON: {e}") from e
    except RecursionError:
        raise KarteFehler("the card is nested too deeply to be a Character Card") from None


def _json(text: str, what: str) -> Any:
    """JSON, or KarteFehler: malformed, nested past the parser's depth, or a number of more digits
    than Python converts."""
    try:
        return json.loads(text)
    except RecursionError:
        raise KarteFehler(f"{what}: nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, and an integer of more than 4,300 digits
        raise KarteFehler(f"{what}: {e}") from e


def _aus_png(data: bytes) -> Any:
    from PIL import Image, UnidentifiedImageError

    try:
        im = Image.open(io.BytesIO(data))
        if im.format != "PNG":
            raise KarteFehler(f"image format {im.format}, a card is a PNG")
        w, h = im.size
        if w * h > MAX_PIXELS:
            raise KarteFehler(f"image of {w}x{h} pixels is larger than a card needs ({MAX_PIXELS} pixels at most)")
        if getattr(im, "n_frames", 1) > 1:  # reading the chunks after the image would decode every frame
            raise KarteFehler(f"animated PNG ({im.n_frames} frames); a card is a still image")
        chunks = dict(im.text)  # reads the text chunks after the image data too (decodes it once)
    except KarteFehler:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise KarteFehler(f"unreadable PNG: {type(e).__name__}: {e}") from e
    raw = chunks.get("ccv3") or chunks.get("chara")
    if raw is None:
        raise KarteFehler("the PNG carries no card (no 'ccv3' or 'chara' text chunk)")
    try:
        text = base64.b64decode(raw, validate=False).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as e:
        raise KarteFehler(f"the PNG's card chunk is not base64 JSON: {e}") from e
    return _json(text, "the PNG's card chunk is not base64 JSON")


def _format(card: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(card, dict):
        raise KarteFehler("a card is a JSON object")
    spec = card.get("spec")
    if spec in ("chara_card_v2", "chara_card_v3"):
        data = card.get("data")
        if not isinstance(data, dict):
            raise KarteFehler(f"{spec}: 'data' must be an object")
        return spec, data
    if spec is not None:
        raise KarteFehler(f"unknown card spec {spec!r} (chara_card_v2 or chara_card_v3)")
    if "name" in card and ("description" in card or "first_mes" in card):
        return "chara_card_v1", card
    raise KarteFehler("not a Character Card: no 'spec' and no V1 fields (name, description, first_mes)")


def _text(data: dict[str, Any], key: str, where: str) -> str:
    v = data.get(key, "")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise KarteFehler(f"{where}{key}: expected a string, got {type(v).__name__}")
    return _CONTROL.sub("", v)


def _sauber(v: Any) -> Any:
    """Every string of the card without control characters (Postgres refuses NUL), at any depth."""
    if isinstance(v, str):
        return _CONTROL.sub("", v)
    if isinstance(v, list):
        return [_sauber(x) for x in v]
    if isinstance(v, dict):
        return {_sauber(k): _sauber(x) for k, x in v.items()}
    return v


def _tiefe_pruefen(card: Any, max_tiefe: int) -> None:
    """KarteFehler naming the path where the card's JSON nests deeper than `max_tiefe` levels (the
    card itself the first); walked without recursion, so any depth the parser took is checked."""
    stack: list[tuple[Any, int, str]] = [(card, 1, "")] if isinstance(card, (dict, list)) else []
    while stack:
        v, tiefe, pfad = stack.pop()
        if tiefe > max_tiefe:
            zeige = pfad if len(pfad) <= 200 else pfad[:200] + "..."
            raise KarteFehler(f"{zeige or 'the card'}: nested more than {max_tiefe} levels deep; at most {max_tiefe}")
        kinder = v.items() if isinstance(v, dict) else enumerate(v)
        stack.extend((x, tiefe + 1, f"{pfad}[{k}]" if isinstance(v, list) else f"{pfad}.{k}" if pfad else str(k))
                     for k, x in kinder if isinstance(x, (dict, list)))


def abbilden(card: Any, quelle: Literal["json", "png"], grenzen: KartenGrenzen | None = None) -> KartenImport:
    g = grenzen or STANDARD_GRENZEN
    _tiefe_pruefen(card, g.max_tiefe)
    fmt, data = _format(_sauber(card))
    where = "" if fmt == "chara_card_v1" else "data."
    t = {k: _text(data, k, where) for k in _ABBILDUNG}
    if not t["name"].strip():
        raise KarteFehler(f"{where}name: a character needs a name")
    _objekt(data.get("extensions"), f"{where}extensions")
    ext = data.get("extensions") if isinstance(data.get("extensions"), dict) else {}
    novaberg = ext.get("novaberg") if isinstance(ext.get("novaberg"), dict) else {}
    sprechweise = _text(novaberg, "sprechweise", f"{where}extensions.novaberg.")
    felder = {
        "name": t["name"].strip(),
        "identitaet": "\n\n".join(x for x in (t["description"].strip(),
                                              t["personality"].strip() and f"Persoenlichkeit: {t['personality'].strip()}")
                                  if x),
        "sprechweise": sprechweise.strip(),
        "szenario": t["scenario"].strip(),
        "begruessung": t["first_mes"].strip(),
        "beispieldialog": t["mes_example"].strip(),
        "charakter_anweisung": "\n\n".join(x for x in (_ORIGINAL.sub("", t["system_prompt"]).strip(),
                                                       _ORIGINAL.sub("", t["post_history_instructions"]).strip())
                                       if x),
    }
    for k, v in felder.items():
        if len(v) > CHARACTER_LIMITS[k]:
            raise KarteFehler(f"{k} (from the card) is {len(v)} characters long; at most {CHARACTER_LIMITS[k]}")
    abbildung = {f"{where}{k}": v for k, v in _ABBILDUNG.items() if t[k].strip()}
    if felder["sprechweise"]:
        abbildung[f"{where}extensions.novaberg.sprechweise"] = "sprechweise"
    wissen, buch_rest, eintrag_rest = _lorebook(data.get("character_book"), where, g)
    rest = {k: v for k, v in data.items() if k not in _ABBILDUNG and k != "character_book" and _belegt(v)}
    if isinstance(rest.get("extensions"), dict):
        # what an earlier export parked under our extension (fields a V2 card has no place for) returns
        rest.update({k: v for k, v in (novaberg.get("karte_rest") or {}).items() if k not in rest})
        rest["extensions"] = {k: v for k, v in rest["extensions"].items() if k != "novaberg"}
        if not rest["extensions"]:
            del rest["extensions"]
    if buch_rest:
        rest["character_book"] = buch_rest
    groesse = len(json.dumps(rest, ensure_ascii=False).encode())
    if groesse > g.max_rest_bytes:
        raise KarteFehler(f"the card's fields without a place of ours ({', '.join(sorted(rest))}) are {groesse} bytes "
                          f"as JSON; at most {g.max_rest_bytes}")
    nicht = [f"{where}{k}" for k in sorted(rest) if k != "character_book"]
    nicht += [f"{where}character_book.{k}" for k in sorted(buch_rest) if k not in ("entries", "ohne_inhalt", *_BUCH_USED)]
    nicht += [f"{where}character_book.entries[] without content ({len(buch_rest['ohne_inhalt'])})"] \
        if "ohne_inhalt" in buch_rest else []
    nicht += sorted({f"{where}character_book.entries[].{k}" for e in eintrag_rest for k in _ungenutzt(e)})
    if wissen:
        abbildung[f"{where}character_book.entries"] = "wissen"
    for k, ours in _BUCH_USED.items():
        if k in buch_rest:  # read from the kept book by memory/charaktere.wissen_suchen
            abbildung[f"{where}character_book.{k}"] = ours
    return KartenImport(format=fmt, quelle=quelle, felder=felder, wissen=wissen, karte_rest=rest,
                        abbildung=abbildung, nicht_uebernommen=nicht)


_BUCH_USED = {"scan_depth": "wissen (scan depth)", "token_budget": "wissen (token budget)"}
"""The book's own activation settings; they stay in `karte_rest.character_book`, where activation
reads them."""


def _ungenutzt(rest: dict[str, Any]) -> list[str]:
    """An entry's kept fields that activation does not read, SillyTavern's extensions one by one."""
    out = [k for k in rest if k != "extensions"]
    if isinstance(rest.get("extensions"), dict):
        out += [f"extensions.{k}" for k, v in rest["extensions"].items() if k not in _EXTENSIONS_USED and _belegt(v)]
    elif "extensions" in rest:
        out.append("extensions")
    return out


def _belegt(v: Any) -> bool:
    return v not in (None, "", [], {})


def _objekt(v: Any, wo: str) -> None:
    """A card's `extensions` (its own, or an entry's) are an object of named extensions, as the spec
    has them: anything else could not be written back."""
    if _belegt(v) and not isinstance(v, dict):
        raise KarteFehler(f"{wo}: expected an object of extensions, got {type(v).__name__}")


def _schluessel_pruefen(e: dict[str, Any], feld: str, at: str, g: KartenGrenzen) -> list[str]:
    """An entry's keys (`keys`, `secondary_keys`): a list of strings within the bounds, or
    KarteFehler naming the entry."""
    keys = e.get(feld) or []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise KarteFehler(f"{at}{feld}: expected a list of strings")
    name = e.get("name") or e.get("comment")
    eintrag = f"{at[:-1]}" + (f" ({name[:60]!r})" if isinstance(name, str) and name.strip() else "")
    if len(keys) > g.max_schluessel:
        raise KarteFehler(f"{eintrag}: {len(keys)} {feld}; at most {g.max_schluessel} per entry")
    for j, k in enumerate(keys):
        if len(k) > g.max_schluessel_zeichen:
            raise KarteFehler(f"{eintrag}: {feld}[{j}] is {len(k)} characters long; "
                              f"at most {g.max_schluessel_zeichen}")
    return keys


def _lorebook(book: Any, where: str,
              g: KartenGrenzen) -> tuple[list[Wissenseintrag], dict[str, Any], list[dict[str, Any]]]:
    """The lorebook's entries as knowledge; the book's other fields and each entry's unused ones."""
    if not _belegt(book):
        return [], {}, []
    if not isinstance(book, dict):
        raise KarteFehler(f"{where}character_book: expected an object")
    entries = book.get("entries") or []
    if not isinstance(entries, list):
        raise KarteFehler(f"{where}character_book.entries: expected a list")
    if len(entries) > MAX_WISSEN:
        raise KarteFehler(f"{where}character_book: {len(entries)} entries; at most {MAX_WISSEN}")
    wissen, eintrag_rest, ohne_inhalt = [], [], []
    for i, e in enumerate(entries):
        at = f"{where}character_book.entries[{i}]."
        if not isinstance(e, dict):
            raise KarteFehler(f"{at[:-1]}: expected an object")
        inhalt = _text(e, "content", at).strip()
        keys = _schluessel_pruefen(e, "keys", at, g)
        _schluessel_pruefen(e, "secondary_keys", at, g)
        if len(inhalt) > MAX_WISSEN_ZEICHEN:
            raise KarteFehler(f"{at}content: {len(inhalt)} characters; at most {MAX_WISSEN_ZEICHEN}")
        if not inhalt:
            ohne_inhalt.append(e)
            continue
        eintrag_rest.append({k: v for k, v in e.items() if k not in _ENTRY_USED and _belegt(v)})
        wissen.append(_eintrag(e, keys, inhalt, at))
    buch_rest = {k: v for k, v in book.items() if k != "entries" and _belegt(v)}
    if any(eintrag_rest):
        buch_rest["entries"] = eintrag_rest
    if ohne_inhalt:
        buch_rest["ohne_inhalt"] = ohne_inhalt
    return wissen, buch_rest, eintrag_rest


def _eintrag(e: dict[str, Any], keys: list[str], inhalt: str, at: str) -> Wissenseintrag:
    """One entry's activation: the spec's fields, SillyTavern's extensions where the spec has none
    (an entry's own `case_sensitive` before the extension's)."""
    _objekt(e.get("extensions"), f"{at}extensions")
    ext = e.get("extensions") if isinstance(e.get("extensions"), dict) else {}
    sekundaer = e.get("secondary_keys") or []
    if not isinstance(sekundaer, list) or not all(isinstance(k, str) for k in sekundaer):
        raise KarteFehler(f"{at}secondary_keys: expected a list of strings")
    logik = ext.get("selectiveLogic", 0)
    if logik not in (0, 1, 2, 3):
        raise KarteFehler(f"{at}extensions.selectiveLogic: expected 0-3 (and_any, not_all, not_any, and_all)")
    order, tiefe = e.get("insertion_order", 100), ext.get("scan_depth")
    if isinstance(order, bool) or not isinstance(order, (int, float)) or not -2**31 <= order < 2**31:
        raise KarteFehler(f"{at}insertion_order: expected a number")
    if tiefe is not None and (isinstance(tiefe, bool) or not isinstance(tiefe, int) or not 0 <= tiefe <= 1000):
        raise KarteFehler(f"{at}extensions.scan_depth: expected a whole number from 0 to 1000")
    gross_klein = e.get("case_sensitive")
    titel = (_text(e, "name", at) or _text(e, "comment", at) or ", ".join(keys) or inhalt[:60]).strip()
    return Wissenseintrag(
        titel=titel, inhalt=inhalt, schluessel=[k for k in keys if k.strip()],
        sekundaer=[k for k in sekundaer if k.strip()], selektiv=bool(e.get("selective")),
        logik=("and_any", "not_all", "not_any", "and_all")[logik],
        gross_klein=bool(ext.get("case_sensitive") if gross_klein is None else gross_klein),
        ganze_woerter=ext.get("match_whole_words") is True, immer=bool(e.get("constant")),
        aktiv=e.get("enabled", True) is not False, reihenfolge=int(order), scan_tiefe=tiefe)


def character_id_aus(name: str) -> str:
    """An id for a character that came without one: its name, folded to the id alphabet."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    cid = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:64]
    if not cid or not re.match(ID_PATTERN, cid):
        raise KarteFehler(f"no id can be made from the name {name!r}; pass character_id")
    return cid


# ------------------------------------------------------------------ writing
def _als_objekt(v: Any) -> dict[str, Any]:
    """Stored extensions as an object (a character stored before `_objekt` refused others keeps
    them under `novaberg_unlesbar`)."""
    if isinstance(v, dict):
        return dict(v)
    return {"novaberg_unlesbar": v} if _belegt(v) else {}


def exportieren(character: dict[str, Any], wissen: Sequence[CharakterWissen]) -> dict[str, Any]:
    """A V2 JSON card of the character; what the import kept in `karte_rest` comes back."""
    rest = dict(character.get("karte_rest") or {})
    buch_rest = dict(rest.pop("character_book", {}) or {})
    eintrag_rest = buch_rest.pop("entries", [])
    ohne_inhalt = buch_rest.pop("ohne_inhalt", [])
    extensions = _als_objekt(rest.pop("extensions", None))
    extensions["novaberg"] = {"character_id": character["character_id"], "sprechweise": character["sprechweise"]}
    ohne_platz = {k: v for k, v in rest.items() if k not in _V2_DATA}  # e.g. a V3 card's own fields
    if ohne_platz:
        extensions["novaberg"]["karte_rest"] = ohne_platz
        rest = {k: v for k, v in rest.items() if k in _V2_DATA}
    data: dict[str, Any] = {
        "name": character["name"], "description": character["identitaet"], "personality": "",
        "scenario": character["szenario"], "first_mes": character["begruessung"],
        "mes_example": character["beispieldialog"], "creator_notes": "",
        "system_prompt": character["charakter_anweisung"], "post_history_instructions": "",
        "alternate_greetings": [], "tags": [], "creator": "", "character_version": "", **rest,
        "extensions": extensions,
    }
    if wissen or ohne_inhalt:
        entries = []
        for i, w in enumerate(wissen):
            extra = eintrag_rest[i] if i < len(eintrag_rest) else {}
            entries.append({"keys": w.schluessel, "content": w.inhalt, "extensions": _extensions(w, extra),
                            "enabled": w.aktiv, "insertion_order": w.reihenfolge,
                            "case_sensitive": w.gross_klein, "constant": w.immer, "name": w.titel,
                            "secondary_keys": w.sekundaer, "selective": w.selektiv,
                            **{k: v for k, v in extra.items() if k != "extensions"}})
        entries += ohne_inhalt
        data["character_book"] = {**buch_rest, "extensions": buch_rest.get("extensions", {}), "entries": entries}
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def _extensions(w: CharakterWissen, extra: dict[str, Any]) -> dict[str, Any]:
    """An exported entry's extensions: what the card brought, with SillyTavern's activation keys
    as the entry holds them now."""
    ext = _als_objekt(extra.get("extensions"))
    if w.logik != "and_any" or "selectiveLogic" in ext:
        ext["selectiveLogic"] = ("and_any", "not_all", "not_any", "and_all").index(w.logik)
    if w.ganze_woerter or "match_whole_words" in ext:
        ext["match_whole_words"] = w.ganze_woerter
    if w.scan_tiefe is not None or "scan_depth" in ext:
        ext["scan_depth"] = w.scan_tiefe
    return ext
