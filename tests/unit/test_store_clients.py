"""The store's typed clients (memory/clients.py) against the operations the store deployment runs
(memory/ops.py): every declared operation has its implementation, with the same parameters as the
caller sees them, and a wrong argument fails in the caller before anything travels."""
import asyncio
import inspect

import pytest

from memory import clients
from memory.ops import OPS


def _declared():
    return {f"{c.MODULE}.{name}": getattr(c, name) for c in clients.MODULES for name in c.ops()}


def test_every_declared_operation_is_run_by_the_store_and_nothing_else():
    assert set(_declared()) == set(OPS) and len(OPS) > 60


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_declaration_has_its_implementations_parameters(name):
    declared = list(inspect.signature(_declared()[name]).parameters.values())[1:]  # without self
    implemented = list(inspect.signature(OPS[name]).parameters.values())[1:]  # without the pool
    assert [(p.name, p.kind, p.default) for p in declared] == [(p.name, p.kind, p.default) for p in implemented]


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_declaration_has_its_implementations_types(name):
    """The caller reads what the store returns by the declared type (a model, not a dict with
    agreed keys): the declaration's annotations are the implementation's, the return type too."""
    declared, implemented = inspect.signature(_declared()[name]), inspect.signature(OPS[name])
    assert [p.annotation for p in list(declared.parameters.values())[1:]] == \
        [p.annotation for p in list(implemented.parameters.values())[1:]]
    assert declared.return_annotation == implemented.return_annotation


def test_the_long_term_read_is_declared_to_return_the_typed_recall():
    assert inspect.signature(clients.Lesepfad.erinnern).return_annotation == "Resonanz"


def test_the_transport_gets_the_operations_name_and_a_wrong_call_fails_in_the_caller():
    sent = []

    async def transport(op, args, kwargs):
        sent.append((op, args, kwargs))
        return "ok"

    ops = clients.StoreOps(transport)
    assert asyncio.run(ops.lzg.has_nodes("u", "nova")) == "ok"
    assert asyncio.run(ops.timeline.find_by_keyword("u", "nova", "Zahnarzt", "Europe/Berlin", limit=3)) == "ok"
    assert sent == [("lzg.has_nodes", ("u", "nova"), {}),
                    ("timeline.find_by_keyword", ("u", "nova", "Zahnarzt", "Europe/Berlin"), {"limit": 3})]
    with pytest.raises(TypeError):
        asyncio.run(ops.lzg.has_nodes("u"))
    with pytest.raises(TypeError):
        asyncio.run(ops.timeline.find_by_keyword("u", "nova", "Zahnarzt", "Europe/Berlin", grenze=3))
    assert len(sent) == 2


TYPED_RELATIONSHIP_READS = {
    "beziehung.directives": "list[Direktive]", "beziehung.instructions": "list[Anweisung]",
    "beziehung.anweisungen_lage": "AnweisungsLage", "beziehung.anweisungen_aendern": "AnweisungsAenderung",
    "beziehung.profile": "Beziehungsprofil", "beziehung.profil_wachsen": "ProfilGewachsen",
    "beziehung.load_emotion": "NovaEmotion | None", "ziele.bilden": "Zielbildung",
    "ziele.turn_ereignis": "ZielEreignis | None", "ziele.load_goals": "list[PaarZiel]", "notizen.find_by_keyword": "list[Notiz]",
    "notizen.find_fulltext": "list[Notiz]", "notizen.proactive_listing": "list[NotizUebersicht]",
}


@pytest.mark.parametrize("name", sorted(TYPED_RELATIONSHIP_READS))
def test_the_relationship_goal_and_note_ops_are_declared_to_return_core_models(name):
    """What crosses the store's seam of a pair's relationship, goals and notes is a model of
    core/beziehung.py, read by attribute; the names resolve there."""
    from core import beziehung

    declared = inspect.signature(_declared()[name]).return_annotation
    assert declared == TYPED_RELATIONSHIP_READS[name]
    model = declared.removeprefix("list[").removesuffix("]").removesuffix(" | None")
    assert issubclass(getattr(beziehung, model), beziehung.BaseModel)


def test_a_relationship_model_is_read_by_attribute_not_by_key():
    from core.beziehung import AnweisungsAenderung, Beziehungsprofil, Notiz

    out = AnweisungsAenderung.model_validate({"status": "voll", "aktiv": [{"id": 1, "text": "Kurz."}],
                                              "vorgemerkt": {"id": 4, "text": "Lang."}, "neu_im_naechsten": 1})
    assert (out.aktiv[0].text, out.vorgemerkt.id, out.wiederholt, out.neu) == ("Kurz.", 4, False, [])
    with pytest.raises(TypeError):
        out["status"]
    with pytest.raises(TypeError):
        "status" in out
    assert Beziehungsprofil().model_dump() == dict.fromkeys(Beziehungsprofil.model_fields, "")
    from memory.beziehung import PROFILE_FIELDS
    assert PROFILE_FIELDS == ("nova_kern", "nova_adaptiv", "nova_emotions", "nova_intentionen", "nova_beziehung",
                              "mensch_kern", "mensch_beziehung", "mensch_themen")
    note = Notiz(id=3, name="Einkauf", updated_at="2026-01-01T10:00:00+00:00")
    assert list(note.model_dump()) == ["id", "name", "inhalt", "zusammenfassung", "themen", "aktiv", "updated_at"]


TYPED_STORE_READS = {
    "pg.recent_turn_records": "list[StoredTurn]", "charaktere.get": "Charakter | None",
    "bibliothek.bestand": "BibliothekBestand", "bibliothek.zerfall": "BibliothekZerfall", "timeline.find_by_date_range": "list[Termin]",
    "timeline.find_by_keyword": "list[Termin]", "timeline.proaktives_fenster": "list[FensterTermin]",
}


@pytest.mark.parametrize("name", sorted(TYPED_STORE_READS))
def test_the_stores_remaining_reads_are_declared_to_return_core_models(name):
    """What else crosses the store's seam (stored turns, characters, the library's figures, the
    timeline's entries, the erasure's counts) is a model of core/bestand.py."""
    from core import bestand

    declared = inspect.signature(_declared()[name]).return_annotation
    assert declared == TYPED_STORE_READS[name]
    model = declared.removeprefix("list[").removesuffix("]").removesuffix(" | None")
    assert issubclass(getattr(bestand, model), bestand.BaseModel)


def test_a_stored_turn_reads_its_result_typed_and_a_kept_message_rebuilds_its_entry():
    from core.bestand import StoredTurn
    from core.result import TurnResult
    from core.wire import KeptTurn
    from memory.session import eintraege_aus_records

    kept = StoredTurn.model_validate({
        "turn_id": "k1", "user_text": "Hallo?", "reply": None, "created_at": "2026-12-01T10:00:00+00:00",
        "result": {"turn_id": "k1", "user_id": "u", "character_id": "mira", "herkunft": "user",
                   "fehler_knoten": "responder", "name": "Tom", "created_at": "2026-12-01T10:00:00+00:00"}})
    assert isinstance(kept.result, KeptTurn) and kept.result.fehler_knoten == "responder"
    assert eintraege_aus_records([kept]) == [
        {"turn_id": "k1", "herkunft": "user", "time": "2026-12-01T10:00:00+00:00", "quelle": "postgres",
         "rolle": "user", "sprecher": "Person B", "inhalt": "Hallo?", "name": "Tom"}]
    done = StoredTurn.model_validate({
        "turn_id": "t1", "user_text": "Hi", "reply": "Hallo!", "created_at": "2026-12-01T10:00:00+00:00",
        "result": {"turn_id": "t1", "user_id": "u", "character_id": "mira", "character_name": "Mira",
                   "reply": "Hallo!", "herkunft": "user", "model": "m", "usage": {},
                   "created_at": "2026-12-01T10:00:00+00:00", "neu_in_einer_neueren_version": 1}})
    assert isinstance(done.result, TurnResult)
    assert [e["sprecher"] for e in eintraege_aus_records([done])] == ["Person B", "Mira"]
