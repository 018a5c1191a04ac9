"""The planner runs an order that changes what is stored — a note deleted, an appointment moved,
a character instruction lifted, replaced or merged — only when the message asks for a change."""
import pytest

from pipeline import regeln
from pipeline.nodes.planner import AENDERND


@pytest.mark.parametrize("text", [
    "Loesch bitte die Notiz zum Einkauf.", "Verschieb den Termin auf Freitag.",
    "Die mit der Botanik kann weg.", "Vergiss die Anweisung mit dem Dialekt.",
    "Fass die beiden Anweisungen zusammen.", "Deaktivier die zweite Anweisung.",
    "Ersetz die frechste durch: sei geduldig.", "Heb die letzte Anweisung auf.", "Hoer auf, Dialekt zu sprechen.",
])
def test_a_message_that_asks_for_a_change_is_seen(text):
    assert regeln.aenderung_verlangt(text)


@pytest.mark.parametrize("text", [
    "Was steht in meiner Notiz?", "Wann ist der Zahnarzt?", "Ich war gestern weg, am Meer.",
    "Welche Anweisungen hast du gerade?", "Ich gehe gleich raus in den Garten.",
])
def test_a_plain_question_asks_for_none(text):
    assert not regeln.aenderung_verlangt(text)


def test_the_instruction_changes_count_as_changes():
    assert {"deaktivieren", "ersetzen", "zusammenfassen", "loeschen", "verschieben", "aendern"} <= set(AENDERND)
