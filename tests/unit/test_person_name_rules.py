"""The rules of the person's name and of an operator's date, without services: what a name may be,
which dates a replayed message may carry, that a regenerate or edit keeps the name and the
operator's date of the message it takes back (and only such a date), and that the Thinker's retry
of a named, dated message carries both."""
from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from actors.ruecknahme import planen
from core.wire import PairEventRequest, PairRuecknahmeRequest
from pipeline.nodes.praegung import _sprecher
from pipeline.reiz import retry_nutzlast, stimulus_from_event
from core.state import Stimulus
from serve.schemas import TurnRequest, person_name

DATUM = datetime(2023, 5, 8, 12, 0, tzinfo=timezone.utc)


def test_a_name_is_one_plain_line_and_not_the_label_of_the_prompts():
    assert person_name("  Caroline ") == "Caroline"
    assert person_name("Jean-Luc O'Neill") == "Jean-Luc O'Neill"
    assert person_name("Zoë Müller") == "Zoë Müller"
    assert person_name("Anna (Annie)") == "Anna (Annie)"
    assert person_name("") is None and person_name("   ") is None and person_name(None) is None
    # no frame of a memory's text, no placeholder of a card, no bracket that could pass for a block's
    # header, not the label of either speaker
    for bad in ("Caro: line", "A\nB", "x" * 65, "[Caro]", "Caro\u2028line", "Caro\u202eenil", "Caro\uff1a",
                "Caro\x00", "person b", "Person B", "PERSON A", "{{char}}", "<BOT>", "\uff3bSZENE\uff3d",
                "\u3010Nova\u3011", "Caro{"):
        with pytest.raises(ValueError):
            person_name(bad)


def test_a_name_is_read_in_its_compatibility_form_and_no_look_alike_of_a_label_passes():
    assert person_name("\uff23aro") == "Caro"  # a fullwidth letter is the letter
    assert person_name("Zoe\u0301") == "Zo\u00e9"  # composed
    assert person_name("Persona") == "Persona" and person_name("Person C") == "Person C"
    for bad in ("Person\u00a0A", "Person\u2003B", "Person  B", "\uff30\uff45\uff52\uff53\uff4f\uff4e \uff21",
                "\u0420erson A", "\u03a1\u0435r\u0455\u043en \u0391", "Pers0n B", "P\u00e8rson b",
                "Caro\ufe55x", "Caro \ufe55", "\ufe5dCaro\ufe5e"):  # small colon, small brackets
        with pytest.raises(ValueError):
            person_name(bad)
    with pytest.raises(ValidationError):
        TurnRequest(text="Hallo", name="Person\u00a0B")


def test_a_date_has_its_zone_and_a_sane_year():
    assert TurnRequest(text="Hallo", zeitpunkt="2023-05-08T12:00:00Z").zeitpunkt == DATUM
    for bad in ("2023-05-08T12:00:00", "0001-01-01T00:00:00+01:00", "1899-12-31T23:00:00Z"):
        with pytest.raises(ValidationError):
            TurnRequest(text="Hallo", zeitpunkt=bad)


def _stim(**kw) -> Stimulus:
    return Stimulus(user_id="u", character_id="nova", turn_id="t1", user_prompt="Ich male gern.", **kw)


def test_his_utterance_is_labelled_by_his_name_unless_it_is_the_characters(caplog):
    assert _sprecher(_stim(), "Nova") == "Person B"
    assert _sprecher(_stim(person_name="Caroline"), "Nova") == "Caroline"
    assert _sprecher(_stim(person_name="nova"), "Nova") == "Person B"
    assert "fallback name_wie_figur" in caplog.text


def _entries(**user) -> list[dict]:
    return [{"rolle": "user", "sprecher": "Person B", "inhalt": "Ich male gern.", "turn_id": "t1",
             "time": DATUM.isoformat(), **user},
            {"rolle": "assistant", "sprecher": "Nova", "inhalt": "Was denn?", "turn_id": "t1",
             "time": DATUM.isoformat()}]


def test_a_regenerate_or_edit_keeps_the_name_and_an_operators_date():
    regen = PairRuecknahmeRequest(art="regenerate", op_id="o1")
    v = planen(_entries(name="Caroline", datiert=True), regen, "t2")
    assert (v.name, v.received_at, v.text) == ("Caroline", DATUM, "Ich male gern.")
    # an arrival time is no date of the message's own: the new turn is dated when it runs
    v = planen(_entries(name="Caroline"), regen, "t2")
    assert (v.name, v.received_at) == ("Caroline", None)
    edit = PairRuecknahmeRequest(art="edit", op_id="o2", text="Ich male gern Berge.")
    assert planen(_entries(name="Caroline"), edit, "t3").name == "Caroline"
    assert planen(_entries(name="Caroline"), edit.model_copy(update={"name": "Caro"}), "t3").name == "Caro"
    assert planen(_entries(), regen, "t2").name is None
    rewind = planen(_entries(name="Caroline", datiert=True), PairRuecknahmeRequest(art="rewind", op_id="o3"), "x")
    assert (rewind.name, rewind.received_at) == (None, None)


def test_the_thinkers_retry_keeps_the_name_and_only_an_operators_date():
    datiert = _stim(person_name="Caroline", received_at=DATUM, datiert=True)
    payload = retry_nutzlast(datiert).model_dump(mode="json", exclude_none=True)
    # the payload goes through the outbox as JSON and comes back as the pair's event
    event = PairEventRequest(kind="continue", **payload)
    retry = stimulus_from_event("u", "nova", event.model_dump(), "self_trigger")
    assert (retry.person_name, retry.received_at, retry.datiert) == ("Caroline", DATUM, True)
    assert retry.turn_id == "t1-retry"
    # a message dated by its arrival: the retry is dated when it runs
    plain = retry_nutzlast(_stim(person_name="Caroline", received_at=DATUM))
    retry = stimulus_from_event("u", "nova", PairEventRequest(kind="continue", **plain.model_dump(
        mode="json", exclude_none=True)).model_dump(), "self_trigger")
    assert retry.person_name == "Caroline" and not retry.datiert and retry.received_at > DATUM
