"""The memory record's reads are typed (core/state.py): the long-term recall (`Resonanz`), the KZG
hits, the library hits and the emotional gravity points are models read by attribute; a turn
state serialised by the code before them (a background job queued in the outbox carries the turn
as JSON) still validates, and reads the same."""
import pytest

from core.state import (BibliothekTreffer, Erinnerung, ErinnerungsRahmen, GravitationsPunkt, KzgTreffer,
                        MemoryRecord, Resonanz, Stimulus, TurnState)

# the memory record as the code before the models wrote it into an outbox job (dicts, their keys as
# memory/lzg.py, memory/lesepfad.py, memory/kzg.py, memory/bibliothek.py and the enricher made them)
ALT = {
    "kzg": [{"id": "e1", "inhalt": "Bello ist ein Beagle", "emotion": "freude", "arousal": 0.6, "quelle": None,
             "time": 1765000000.5, "similarity": 0.81}],
    "lzg_resonanz": {
        "rahmen": {"anker_anzahl": 1, "sprung_tiefe": 1, "cluster": "feuerwerk", "nova_sektor": None},
        "erinnerungen": [
            {"id": 7, "inhalt": "Bello war beim Tierarzt", "dimension": "erlebnis", "beobachter": "nova",
             "emotion": "sorge", "arousal": 0.7, "gewicht": 1.0, "zuletzt": "2026-12-01T10:00:00+00:00",
             "quelle": "t-1", "zeitpunkt": "2026-11-30T18:00:00+00:00", "aktivierung": 1.0, "tiefe": 0,
             "pfad": [7], "gewicht_wirksam": 0.97, "eingefallen_ueber": "Anker", "cosinus": 0.62,
             "stichwort": 3.1, "score": 2.4},
            {"id": 9, "inhalt": "Der Park im Regen", "dimension": "erlebnis", "beobachter": "nova",
             "emotion": None, "arousal": None, "gewicht": 0.8, "zuletzt": "2026-12-01T10:00:00+00:00",
             "quelle": None, "zeitpunkt": None, "aktivierung": 0.36, "tiefe": 1, "pfad": [7, 9],
             "gewicht_wirksam": 0.78, "eingefallen_ueber": "eingefallen über »Bello war beim Tierarzt«",
             "cosinus": None, "stichwort": None, "score": None}],
        "ids": [7, 9]},
    "bibliothek": [{"id": 3, "titel": "Hunde", "inhalt": "Beagle jagen gern", "similarity": 0.7, "gewicht": 0.4},
                   {"id": 4, "titel": "Fenja", "inhalt": "{{char}} mag Fenja", "gewicht": 1.0, "weg": "schluessel",
                    "similarity": 0.2}],
    "emotionale_gravitationspunkte": [{"quelle": "lzg", "inhalt": "Bello war beim Tierarzt", "emotion": "sorge",
                                       "arousal": 0.7}],
    "plugins": {"notizen": [{"name": "Einkauf", "zusammenfassung": "Milch"}]},
}
KALT = {"rahmen": {"anker_anzahl": 0, "sprung_tiefe": 0, "cluster": "paradox", "nova_sektor": None,
                   "kaltstart": True, "bester_kosinus": 0.21}, "erinnerungen": [], "ids": []}


def test_a_memory_record_in_the_old_json_shape_validates_into_the_models():
    m = MemoryRecord.model_validate(ALT)
    r = m.lzg_resonanz
    assert isinstance(r, Resonanz) and isinstance(r.rahmen, ErinnerungsRahmen)
    assert r.ids == [7, 9] and [type(e) for e in r.erinnerungen] == [Erinnerung, Erinnerung]
    assert r.erinnerungen[1].pfad == [7, 9] and r.erinnerungen[1].tiefe == 1 and r.erinnerungen[0].cosinus == 0.62
    assert r.rahmen.cluster == "feuerwerk" and r.rahmen.kaltstart is False
    assert m.kzg == [KzgTreffer(id="e1", inhalt="Bello ist ein Beagle", emotion="freude", arousal=0.6,
                                time=1765000000.5, similarity=0.81)]
    assert [(b.titel, b.weg) for b in m.bibliothek] == [("Hunde", None), ("Fenja", "schluessel")]
    assert m.emotionale_gravitationspunkte == [GravitationsPunkt(quelle="lzg", inhalt="Bello war beim Tierarzt",
                                                                 emotion="sorge", arousal=0.7)]
    assert MemoryRecord.model_validate({"lzg_resonanz": KALT}).lzg_resonanz.rahmen.bester_kosinus == 0.21


def test_an_old_turn_state_json_reads_and_writes_the_same_shape():
    """A queued job's turn state in the old JSON: it validates, and written again it carries the
    old keys with the same values (a replica of the old code reads it)."""
    s = Stimulus(user_id="u", character_id="nova", turn_id="t-1", user_prompt="Wie geht es Bello?")
    alt = {"stimulus": s.model_dump(mode="json"), "memory": ALT}
    state = TurnState.model_validate_json(TurnState.model_validate(alt).model_dump_json())
    assert state.memory.lzg_resonanz.erinnerungen[0].inhalt == "Bello war beim Tierarzt"
    neu = state.memory.model_dump(mode="json")
    for feld in ("kzg", "bibliothek", "emotionale_gravitationspunkte"):
        assert [{k: e[k] for k in alt_e} for e, alt_e in zip(neu[feld], ALT[feld])] == ALT[feld]
    assert {k: neu["lzg_resonanz"]["rahmen"][k] for k in ALT["lzg_resonanz"]["rahmen"]} == \
        ALT["lzg_resonanz"]["rahmen"]
    assert [{k: e[k] for k in a} for e, a in zip(neu["lzg_resonanz"]["erinnerungen"],
                                                  ALT["lzg_resonanz"]["erinnerungen"])] == \
        ALT["lzg_resonanz"]["erinnerungen"]


def test_an_entry_is_read_by_attribute_and_refuses_a_read_by_key():
    r = Resonanz.model_validate(ALT["lzg_resonanz"])
    assert r.ids == [7, 9] and r.erinnerungen[0].inhalt == "Bello war beim Tierarzt"
    assert r.rahmen.kaltstart is False and KzgTreffer.model_validate(ALT["kzg"][0]).arousal == 0.6
    from core import state
    eintraege = [c for c in vars(state).values()
                 if isinstance(c, type) and issubclass(c, state._Eintrag) and c is not state._Eintrag]
    assert len(eintraege) >= 11
    for art in (state._Eintrag, *eintraege):
        assert "__getitem__" not in vars(art) and "get" not in vars(art), art
    for e in (r, r.rahmen, r.erinnerungen[0], KzgTreffer.model_validate(ALT["kzg"][0])):
        with pytest.raises(TypeError):
            e["inhalt"]
        with pytest.raises(AttributeError):
            e.get("inhalt")


def test_a_newer_stores_unknown_key_is_ignored():
    e = Erinnerung.model_validate({**ALT["lzg_resonanz"]["erinnerungen"][0], "neu_in_spaeterer_fassung": 1})
    assert e.id == 7 and "neu_in_spaeterer_fassung" not in e.model_dump()
    with pytest.raises(ValueError):
        Erinnerung.model_validate({"inhalt": "ohne id"})
    with pytest.raises(ValueError):
        BibliothekTreffer.model_validate({"titel": "ohne Gewicht", "inhalt": "x"})


def test_the_tribunals_verdicts_are_typed_and_an_old_jobs_verdicts_still_read():
    from core.state import Urteil, UrteilRecord
    from pipeline.nodes.tribunal import verdict_of

    alt = {"urteile": [{"urteil": "mangel", "gruende": ["Termin ist Montag"], "runde": 0},
                       {"urteil": "ok", "gruende": [], "runde": 1}], "bestanden": True, "runden": 1, "reply": "x"}
    u = UrteilRecord.model_validate(alt)
    assert [(v.urteil, v.gruende, v.runde) for v in u.urteile] == [("mangel", ["Termin ist Montag"], 0), ("ok", [], 1)]
    assert u.model_dump(mode="json") == alt
    assert verdict_of(None, "kaputt", 2) == Urteil(urteil="unklar", gruende=["tribunal_kaputt"], runde=2)
    with pytest.raises(ValueError):
        Urteil.model_validate({"urteil": "vielleicht"})


def test_the_file_index_hits_of_an_old_job_read_typed():
    from core.state import DateiTreffer, Dateisuche

    alt = {"id": 4, "datei_id": 2, "pfad": "steuer.pdf#3", "titel": "Fristen", "datei": "steuer.pdf",
           "zusammenfassung": "Steuer", "auszug": "Abgabe bis 31. Juli", "cosinus": None, "kanal": "stichwort",
           "rang": 0.4}
    m = MemoryRecord.model_validate({"aufzeichnungen": [alt]})
    assert m.aufzeichnungen == [DateiTreffer(**alt)] and m.aufzeichnungen[0].kanal == "stichwort"
    assert m.model_dump(mode="json")["aufzeichnungen"] == [alt]
    assert Dateisuche.model_validate({"treffer": [alt], "bestand": 9, "schwaechster_kosinus": None}).bestand == 9


def test_the_acute_objects_of_an_old_job_read_typed_with_their_web_hits_as_they_came():
    from core.state import SachlageRecord, SachlageObjekt

    alt = {"objekte": [{"name": "Tritium", "behauptung": "ist radioaktiv",
                        "recherche": [{"titel": "Tritium", "url": "https://t", "snippet": "H-3", "position": 1}]},
                       {"name": "Helium", "behauptung": ""}]}
    s = SachlageRecord.model_validate(alt)
    assert [type(o) for o in s.objekte] == [SachlageObjekt, SachlageObjekt]
    assert s.objekte[0].recherche[0]["url"] == "https://t" and s.objekte[1].recherche is None
    assert s.model_dump(mode="json", exclude_none=True) == alt


def test_the_emotion_history_of_an_old_job_reads_typed_and_nova_s_state_keeps_it_as_json():
    from core.state import EmotionRecord, EmotionsEintrag

    alt = [{"emotion": "angst", "arousal": 0.8, "gewicht": 1.0}, {"emotion": "freude", "arousal": 0.3, "gewicht": 0.7}]
    e = EmotionRecord.model_validate({"emotions_verlauf": alt, "emotions_vektor": "einbruch"})
    assert e.emotions_verlauf[1] == EmotionsEintrag(emotion="freude", arousal=0.3, gewicht=0.7)
    assert e.model_dump(mode="json")["emotions_verlauf"] == alt


def test_testing_an_entry_for_a_key_is_refused_rather_than_always_false():
    r = Resonanz.model_validate(ALT["lzg_resonanz"])
    with pytest.raises(TypeError):
        "kaltstart" in r.rahmen


def test_the_verfasser_reads_the_file_hits_the_turn_carries():
    import asyncio

    from core.state import PairRecord
    from pipeline.nodes import verfasser
    from pipeline.runner import run_node
    from tests.scripted_llm import ScriptedLLM, deps_for

    treffer = {"id": 4, "datei_id": 2, "pfad": "steuer.pdf#3", "titel": "Fristen", "datei": "steuer.pdf",
               "zusammenfassung": "Steuer", "auszug": "Abgabe bis 31. Juli", "cosinus": 0.5, "kanal": "dicht"}
    s = Stimulus(user_id="u", character_id="nova", turn_id="t-1", user_prompt="Wann ist die Frist?")
    state = TurnState(stimulus=s, pair=PairRecord(character_name="Nova"), memory=MemoryRecord(aufzeichnungen=[treffer]))
    llm = ScriptedLLM({"verfasser": ["Die Frist ist der 31. Juli."]})
    out = asyncio.run(run_node(verfasser.NODE, state, deps_for(llm)))["verfasser"]
    assert out.inhalt == "Die Frist ist der 31. Juli."
    assert "- Fristen: Abgabe bis 31. Juli" in "\n".join(m["content"] for m in llm.calls[0]["messages"])
