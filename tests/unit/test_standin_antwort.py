"""The stand-in's reply to the person at a real reply's length (bench/standin.py `antwort_text`):
with `--cache` the responder's replies are as long as the middle of the `mittel` corridor, so a
conversation's history grows as it does with a model; every other call answers as before."""
import json

from bench import standin
from pipeline import vocab


def responder_body(nachricht: str) -> dict:
    return {"messages": [{"role": "system", "content": "[ROLLE] …"},
                         {"role": "user", "content": f"[GESPRAECHSVERLAUF]\n…\n\n{standin.AKTUELL}{nachricht}"}]}


def test_the_reply_to_the_person_has_the_asked_length_in_whole_sentences():
    text = standin.answer(responder_body("Wie war dein Tag?"), antwort_zeichen=standin.ANTWORT_ZEICHEN)
    assert standin.ANTWORT_ZEICHEN == sum(vocab.UMFANG_SPANNE["mittel"]) // 2
    assert standin.ANTWORT_ZEICHEN <= len(text) < standin.ANTWORT_ZEICHEN + max(map(len, standin.REDE)) + 1
    assert text.endswith((".", "?"))
    # the same request gets the same reply (a retried call answers alike), another one may start elsewhere
    assert text == standin.answer(responder_body("Wie war dein Tag?"), antwort_zeichen=standin.ANTWORT_ZEICHEN)


def test_without_a_length_and_for_every_other_call_the_answers_stay_as_they_were():
    assert standin.answer(responder_body("Hallo")) == standin.SATZ
    strukturiert = {"messages": [{"role": "user", "content": standin.AKTUELL + "Hallo"}],
                    "response_format": {"type": "json_schema", "json_schema": {
                        "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "string"}},
                                                "required": ["a"]}}}}
    assert json.loads(standin.answer(strukturiert, antwort_zeichen=262)) == {"a": "x"}
    frei = {"messages": [{"role": "user", "content": "Fasse zusammen."}]}
    assert standin.answer(frei, antwort_zeichen=262) == standin.SATZ
