"""A question's reading in time (memory/lesart.py): the read's recency tie-break applies to a
question about the present state, not to one about a past event."""
import pytest

from memory.lesart import GEGENWART, VERGANGENHEIT, lesart


@pytest.mark.parametrize("frage", [
    "Wo wohnt Person B jetzt?", "Wie geht es Bello?", "Wann hat Leonie Geburtstag?", "Raucht Daniel noch?",
    "Was macht Tobias beruflich?", "Welchen Lauf hat sich Ute vorgenommen?", "Ist Matt verheiratet?",
    "How is Bello?", "Where does Mike live these days?", "Is Matt still married to Claire?",
    "What is Caroline excited about?", "When does Anna go to the gym?", "Do I like sushi?"])
def test_a_question_about_the_present_state_reads_as_present(frage):
    assert lesart(frage).name == GEGENWART


@pytest.mark.parametrize(("frage", "marker"), [
    ("Wann warst du in Rom?", "warst"), ("Was hattest du zum Frühstück?", "hattest"),
    ("Was hast du damals gemacht?", "damals"), ("Wann hast du das Auto gekauft?", "gekauft"),
    ("Wann hast du Person B kennengelernt?", "kennengelernt"), ("Was hast du letztes Jahr gemacht?", "letztes Jahr"),
    ("When did Caroline go to the LGBTQ support group?", "did"), ("Was Bello sick?", "Was"),
    ("Where were they last year?", "were"), ("How long has Caroline had her friends?", "has Caroline had"),
    ("Who inspired Maria to start volunteering?", "inspired"), ("What did Maria do in May 2023?", "May 2023"),
    ("Wo war Jonas am 3. Mai?", "3. Mai")])
def test_a_question_about_a_past_event_reads_as_past_and_names_its_marker(frage, marker):
    assert lesart(frage) == (VERGANGENHEIT, marker)
