"""Character Cards in and out: V1/V2/V3 as JSON and as PNG (made here with Pillow), the mapping
onto our fields, what is kept and reported, the lorebook, malformed and oversized cards."""
import base64
import io
import json
import re

import pytest
from PIL import Image, PngImagePlugin

from core.bestand import CharakterWissen
from serve import charakterkarte as karte


def v2_card(**data) -> dict:
    base = {"name": "Mira", "description": "{{char}} ist Leuchtturmwaerterin auf Hallig Nordlicht.",
            "personality": "ruhig, trocken humorvoll", "scenario": "{{user}} strandet bei Sturm an ihrer Tuer.",
            "first_mes": "Komm rein, {{user}}, bevor dich der Wind mitnimmt.",
            "mes_example": "<START>\n{{user}}: Wie alt ist der Turm?\n{{char}}: Aelter als meine Geduld.",
            "creator_notes": "Fuer ruhige Abende.", "system_prompt": "{{original}} Bleib in der Rolle.",
            "post_history_instructions": "", "alternate_greetings": ["Na, auch verirrt?"], "tags": ["see"],
            "creator": "anna", "character_version": "1.2", "extensions": {"talkativeness": "0.4"},
            "character_book": {"name": "Halliglore", "scan_depth": 4, "extensions": {}, "entries": [
                {"keys": ["Fenja"], "content": "Fenja ist Miras Schwester; sie faehrt die Post-Faehre.",
                 "extensions": {}, "enabled": True, "insertion_order": 0, "case_sensitive": False,
                 "name": "Fenja", "priority": 10, "secondary_keys": ["Faehre"]},
                {"keys": ["Leuchtfeuer"], "content": "Das Feuer brennt seit 1887.", "extensions": {},
                 "enabled": False, "insertion_order": 1, "constant": True},
                {"keys": ["leer"], "content": "  ", "extensions": {}, "enabled": True, "insertion_order": 2},
            ]}}
    base.update(data)
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": base}


def png_with(chunks: dict[str, str], size=(8, 8)) -> bytes:
    meta = PngImagePlugin.PngInfo()
    for k, v in chunks.items():
        meta.add_text(k, v)
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 120, 40)).save(buf, "PNG", pnginfo=meta)
    return buf.getvalue()


def b64(obj) -> str:
    return base64.b64encode(json.dumps(obj).encode()).decode()


def test_v2_json_maps_onto_our_fields_and_reports_the_rest():
    imp = karte.lesen(json.dumps(v2_card()).encode())
    assert imp.format == "chara_card_v2" and imp.quelle == "json"
    f = imp.felder
    assert f["name"] == "Mira"
    assert f["identitaet"].startswith("{{char}} ist Leuchtturmwaerterin")  # stored as written
    assert "Persoenlichkeit: ruhig, trocken humorvoll" in f["identitaet"]
    assert f["szenario"] == "{{user}} strandet bei Sturm an ihrer Tuer."
    assert f["begruessung"].startswith("Komm rein")
    assert "Aelter als meine Geduld" in f["beispieldialog"]
    assert f["charakter_anweisung"] == "Bleib in der Rolle."  # the {{original}} macro has no meaning here
    assert imp.abbildung["data.description"] == "identitaet" and imp.abbildung["data.personality"] == "identitaet"
    assert imp.abbildung["data.character_book.entries"] == "wissen"
    # nothing silently dropped: every unmapped field is kept and named
    for name in ("data.alternate_greetings", "data.tags", "data.creator", "data.character_version",
                 "data.creator_notes", "data.extensions", "data.character_book.name",
                 "data.character_book.entries[].priority"):
        assert name in imp.nicht_uebernommen, name
    # the lorebook's activation fields are read (memory/wissen_schluessel.py), not reported as unused
    assert imp.abbildung["data.character_book.scan_depth"] == "wissen (scan depth)"
    for name in ("data.character_book.scan_depth", "data.character_book.entries[].secondary_keys"):
        assert name not in imp.nicht_uebernommen, name
    assert imp.karte_rest["character_book"]["scan_depth"] == 4  # kept where activation reads it
    assert imp.karte_rest["alternate_greetings"] == ["Na, auch verirrt?"]
    assert imp.karte_rest["character_book"]["name"] == "Halliglore"
    assert any("without content" in n for n in imp.nicht_uebernommen)


def test_lorebook_entries_become_knowledge():
    imp = karte.lesen(json.dumps(v2_card()).encode())
    assert [w.titel for w in imp.wissen] == ["Fenja", "Leuchtfeuer"]  # the empty entry is reported, not stored
    fenja, feuer = imp.wissen
    assert fenja.schluessel == ["Fenja"] and fenja.aktiv and not fenja.immer
    assert fenja.sekundaer == ["Faehre"] and not fenja.selektiv  # secondary keys count only when selective
    assert (fenja.reihenfolge, feuer.reihenfolge) == (0, 1)
    assert feuer.immer and not feuer.aktiv


def test_sillytavern_entry_extensions_set_the_activation():
    """A SillyTavern export: logic, whole words, case and scan depth live in the entry's extensions;
    the entry's own `case_sensitive` stands before the extension's; the export gives them back."""
    entries = [
        {"keys": ["inn", "tavern"], "secondary_keys": ["Rusty Flagon"], "selective": True, "content": "Das Gasthaus.",
         "insertion_order": 50, "enabled": True, "extensions": {"selectiveLogic": 2, "match_whole_words": None,
                                                                "scan_depth": None, "position": 1, "depth": 4}},
        {"keys": ["ASH"], "content": "Die Aschengarde.", "insertion_order": 80, "enabled": True,
         "extensions": {"selectiveLogic": 0, "match_whole_words": True, "case_sensitive": True, "scan_depth": 4}},
        {"keys": ["AI"], "content": "Synths.", "insertion_order": 5, "case_sensitive": False,
         "extensions": {"case_sensitive": True}}]
    imp = karte.lesen(json.dumps(v2_card(character_book={"entries": entries})).encode())
    inn, ash, ai = imp.wissen
    assert (inn.selektiv, inn.logik, inn.sekundaer, inn.ganze_woerter, inn.scan_tiefe) == \
        (True, "not_any", ["Rusty Flagon"], False, None)
    assert (ash.ganze_woerter, ash.gross_klein, ash.scan_tiefe, ash.reihenfolge) == (True, True, 4, 80)
    assert ai.gross_klein is False
    assert "data.character_book.entries[].extensions.position" in imp.nicht_uebernommen
    assert "data.character_book.entries[].extensions.scan_depth" not in imp.nicht_uebernommen
    out = karte.exportieren({"character_id": "mira", "sprechweise": "", "karte_rest": imp.karte_rest,
                             **imp.felder}, [CharakterWissen(**w.model_dump(), id=i) for i, w in enumerate(imp.wissen)])
    back = karte.lesen(json.dumps(out).encode())
    assert [w.model_dump() for w in back.wissen] == [w.model_dump() for w in imp.wissen]
    assert out["data"]["character_book"]["entries"][0]["extensions"]["position"] == 1


@pytest.mark.parametrize("entry, fragment", [
    ({"secondary_keys": "Faehre"}, "secondary_keys: expected a list of strings"),
    ({"extensions": {"selectiveLogic": 7}}, "selectiveLogic: expected 0-3"),
    ({"insertion_order": "first"}, "insertion_order: expected a number"),
    ({"extensions": {"scan_depth": -1}}, "scan_depth: expected a whole number"),
])
def test_bad_activation_fields_say_which(entry, fragment):
    card = v2_card(character_book={"entries": [{"keys": ["a"], "content": "x", **entry}]})
    with pytest.raises(karte.KarteFehler) as e:
        karte.lesen(json.dumps(card).encode())
    assert fragment in str(e.value)


def test_v3_png_is_read_from_its_ccv3_chunk_before_chara():
    v3 = v2_card(nickname="Miri", group_only_greetings=[])
    v3["spec"], v3["spec_version"] = "chara_card_v3", "3.0"
    old = v2_card(name="Alt")
    imp = karte.lesen(png_with({"chara": b64(old), "ccv3": b64(v3)}))
    assert imp.format == "chara_card_v3" and imp.quelle == "png"
    assert imp.felder["name"] == "Mira"
    assert "data.nickname" in imp.nicht_uebernommen  # a V3 field with no place of ours


def test_v2_png_chara_chunk():
    imp = karte.lesen(png_with({"chara": b64(v2_card(name="Pia"))}))
    assert imp.format == "chara_card_v2" and imp.felder["name"] == "Pia"


def test_v1_card():
    imp = karte.lesen(json.dumps({"name": "Ole", "description": "Ein Fischer.", "first_mes": "Moin."}).encode())
    assert imp.format == "chara_card_v1"
    assert imp.felder["identitaet"] == "Ein Fischer." and imp.felder["begruessung"] == "Moin."
    assert "description" in imp.abbildung


@pytest.mark.parametrize("data, fragment", [
    (b"\x00\x01garbage", "not a PNG and not JSON"),
    (b"[1, 2]", "a card is a JSON object"),
    (json.dumps({"spec": "chara_card_v9", "data": {}}).encode(), "unknown card spec"),
    (json.dumps({"spec": "chara_card_v2", "data": "x"}).encode(), "'data' must be an object"),
    (json.dumps({"hello": 1}).encode(), "not a Character Card"),
    (json.dumps(v2_card(name="  ")).encode(), "data.name: a character needs a name"),
    (json.dumps(v2_card(description=["a"])).encode(), "data.description: expected a string"),
    (json.dumps(v2_card(description="x" * 9000, personality="")).encode(), "identitaet (from the card) is 9000"),
    (json.dumps(v2_card(character_book={"entries": [{"keys": "Fenja", "content": "x"}]})).encode(),
     "entries[0].keys: expected a list of strings"),
    (json.dumps(v2_card(character_book={"entries": [{"keys": [], "content": "x"}] * 501})).encode(),
     "501 entries; at most 500"),
])
def test_malformed_cards_say_why(data, fragment):
    with pytest.raises(karte.KarteFehler) as e:
        karte.lesen(data)
    assert fragment in str(e.value)


def test_png_without_card_and_broken_chunk():
    with pytest.raises(karte.KarteFehler, match="no 'ccv3' or 'chara'"):
        karte.lesen(png_with({"Comment": "nur ein Bild"}))
    with pytest.raises(karte.KarteFehler, match="not base64 JSON"):
        karte.lesen(png_with({"chara": "%%%nicht-base64%%%"}))
    with pytest.raises(karte.KarteFehler, match="unreadable PNG"):
        karte.lesen(karte.PNG_SIGNATURE + b"\x00\x00\x00\x0dIHDRbroken")


def test_oversized_image_is_refused_before_decoding(monkeypatch):
    monkeypatch.setattr(karte, "MAX_PIXELS", 100)
    with pytest.raises(karte.KarteFehler, match="larger than a card needs"):
        karte.lesen(png_with({"chara": b64(v2_card())}, size=(20, 20)))


def test_character_id_from_name():
    assert karte.character_id_aus("Mira Nordlicht") == "mira-nordlicht"
    assert karte.character_id_aus("Jörg Ümlaut") == "jorg-umlaut"
    with pytest.raises(karte.KarteFehler, match="pass character_id"):
        karte.character_id_aus("???")


def test_export_gives_back_what_the_import_kept():
    imp = karte.lesen(json.dumps(v2_card()).encode())
    ch = {"character_id": "mira", **imp.felder, "sprechweise": "knapp, norddeutsch", "karte_rest": imp.karte_rest}
    wissen = [CharakterWissen(**w.model_dump(), id=i) for i, w in enumerate(imp.wissen)]
    card = karte.exportieren(ch, wissen)
    assert card["spec"] == "chara_card_v2"
    d = card["data"]
    assert d["name"] == "Mira" and d["first_mes"] == imp.felder["begruessung"]
    assert d["alternate_greetings"] == ["Na, auch verirrt?"] and d["tags"] == ["see"] and d["creator"] == "anna"
    assert d["extensions"]["talkativeness"] == "0.4"
    assert d["extensions"]["novaberg"]["sprechweise"] == "knapp, norddeutsch"
    entries = d["character_book"]["entries"]
    assert entries[0]["keys"] == ["Fenja"] and entries[0]["priority"] == 10
    assert entries[1]["constant"] is True and entries[1]["enabled"] is False
    assert d["character_book"]["name"] == "Halliglore"
    # and the export reads back in: the same fields, our speaking style included
    again = karte.lesen(json.dumps(card).encode())
    assert again.felder == {**imp.felder, "sprechweise": "knapp, norddeutsch"}
    assert [w.titel for w in again.wissen] == ["Fenja", "Leuchtfeuer"]


def test_control_characters_anywhere_in_the_card_are_removed():
    card = v2_card(tags=["se\x00e"], creator_notes="a\u0000b")
    card["data"]["character_book"]["entries"][0]["keys"] = ["Fen\x00ja"]
    imp = karte.lesen(json.dumps(card).encode())
    assert imp.karte_rest["tags"] == ["see"] and imp.karte_rest["creator_notes"] == "ab"
    assert imp.wissen[0].schluessel == ["Fenja"]
    assert "\x00" not in json.dumps(imp.model_dump())


def test_our_speaking_style_must_be_text():
    card = v2_card(extensions={"novaberg": {"sprechweise": {"x": 1}}})
    with pytest.raises(karte.KarteFehler, match="extensions.novaberg.sprechweise: expected a string"):
        karte.lesen(json.dumps(card).encode())


def test_animated_png_is_refused():
    buf = io.BytesIO()
    meta = PngImagePlugin.PngInfo()
    meta.add_text("chara", b64(v2_card()))
    frames = [Image.new("RGB", (8, 8), c) for c in ((0, 0, 0), (255, 255, 255))]
    frames[0].save(buf, "PNG", save_all=True, append_images=frames[1:], pnginfo=meta)
    with pytest.raises(karte.KarteFehler, match="animated PNG"):
        karte.lesen(buf.getvalue())


def test_entry_comments_original_macros_and_v3_fields_survive_the_round_trip():
    v3 = v2_card(nickname="Miri", creation_date=1700000000, post_history_instructions="{{original}} Kurz bleiben.")
    v3["spec"], v3["spec_version"] = "chara_card_v3", "3.0"
    v3["data"]["character_book"]["entries"][0]["comment"] = "die Schwester"
    imp = karte.lesen(json.dumps(v3).encode())
    assert imp.felder["charakter_anweisung"] == "Bleib in der Rolle.\n\nKurz bleiben."
    assert "data.character_book.entries[].comment" in imp.nicht_uebernommen
    ch = {"character_id": "mira", **imp.felder, "karte_rest": imp.karte_rest}
    card = karte.exportieren(ch, [CharakterWissen(**w.model_dump(), id=i) for i, w in enumerate(imp.wissen)])
    assert "nickname" not in card["data"]  # a V2 card has no place for it ...
    assert card["data"]["extensions"]["novaberg"]["karte_rest"]["nickname"] == "Miri"  # ... so it is parked
    assert card["data"]["character_book"]["entries"][0]["comment"] == "die Schwester"
    again = karte.lesen(json.dumps(card).encode())
    assert again.karte_rest["nickname"] == "Miri" and again.karte_rest["creation_date"] == 1700000000


def _buch(*entries) -> dict:
    return v2_card(character_book={"name": "B", "extensions": {}, "entries": list(entries)})


@pytest.mark.parametrize("entry, fragment", [
    ({"keys": [f"k{i}" for i in range(10_000)], "content": "x", "name": "Viele"},
     "entries[0] ('Viele'): 10000 keys; at most 100 per entry"),
    ({"keys": ["a", "b" * 100_000], "content": "x"}, "entries[0]: keys[1] is 100000 characters long; at most 500"),
    ({"keys": ["a"], "secondary_keys": [f"s{i}" for i in range(101)], "content": "x", "comment": "Zweit"},
     "entries[0] ('Zweit'): 101 secondary_keys; at most 100"),
    ({"keys": [f"k{i}" for i in range(10_000)], "content": ""}, "10000 keys"),  # kept without content: bounded too
])
def test_lorebook_keys_are_bounded_per_entry_and_in_length(entry, fragment):
    with pytest.raises(karte.KarteFehler) as e:
        karte.lesen(json.dumps(_buch({"keys": ["ok"], "content": "fine"}, entry)).encode())
    assert fragment.replace("entries[0]", "entries[1]") in str(e.value)
    assert "data.character_book.entries[1]" in str(e.value)


def test_the_bounds_come_from_the_settings():
    from core.settings import ApiBoundsSettings

    card = json.dumps(_buch({"keys": ["a", "b", "c"], "content": "x"})).encode()
    assert len(karte.lesen(card).wissen) == 1
    eng = karte.KartenGrenzen.aus(ApiBoundsSettings(lorebook_max_keys=2))
    with pytest.raises(karte.KarteFehler, match="3 keys; at most 2"):
        karte.lesen(card, eng)
    assert karte.STANDARD_GRENZEN == karte.KartenGrenzen.aus(ApiBoundsSettings())


def _tief(n: int) -> dict:
    d: dict = {}
    x = d
    for _ in range(n - 1):
        x["a"] = {}
        x = x["a"]
    return d


@pytest.mark.parametrize("n", [300, 40])
def test_a_card_nested_too_deeply_is_refused_naming_the_path(n):
    with pytest.raises(karte.KarteFehler) as e:
        karte.lesen(json.dumps(v2_card(extensions={"tief": _tief(n)})).encode())
    assert str(e.value).startswith("data.extensions.tief.a.a") and "at most 32" in str(e.value)


def test_a_card_as_deep_as_allowed_is_read_and_its_rest_kept():
    imp = karte.lesen(json.dumps(v2_card(extensions={"tief": _tief(29)})).encode())  # card, data, extensions: 32
    assert "data.extensions" in imp.nicht_uebernommen and imp.karte_rest["extensions"]["tief"]["a"]["a"]


def test_kept_fields_are_bounded_in_size():
    big = ["x" * 100_000] * 30
    with pytest.raises(karte.KarteFehler, match="alternate_greetings.*bytes as JSON; at most 2097152"):
        karte.lesen(json.dumps(v2_card(alternate_greetings=big)).encode())


@pytest.mark.parametrize("data, wo", [
    ({"name": "Liste", "extensions": [1]}, "data.extensions"),
    ({"name": "Liste", "character_book": {"entries": [{"keys": ["a"], "content": "b", "extensions": 5}]}},
     "data.character_book.entries[0].extensions"),
])
def test_extensions_that_are_no_object_are_refused_and_a_stored_one_still_exports(data, wo):
    card = json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}).encode()
    with pytest.raises(karte.KarteFehler, match=re.escape(wo) + ": expected an object"):
        karte.lesen(card)
    # a character stored before the rule: its card exports, the odd value kept under a name of its own
    stored = {"character_id": "liste", "name": "Liste", "identitaet": "", "sprechweise": "", "szenario": "",
              "begruessung": "", "beispieldialog": "", "charakter_anweisung": "", "karte_rest": {"extensions": [1]}}
    out = karte.exportieren(stored, [])
    assert out["data"]["extensions"]["novaberg_unlesbar"] == [1]
