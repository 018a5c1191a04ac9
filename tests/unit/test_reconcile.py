"""The OpenAI door's reconciliation of a client's conversation with the stored one (serve/reconcile.py)."""
from serve.reconcile import abgleichen, gespeichert, nachricht


def _c(*pairs):
    return [nachricht(r, t) for r, t in pairs]


SERVER = _c(("user", "Hallo"), ("assistant", "Hi!"), ("user", "Wie geht es dir?"), ("assistant", "Gut, danke."))


def test_a_new_message_after_the_whole_history_or_its_latest_part():
    assert abgleichen(_c(*[(r, t) for r, t in SERVER], ("user", "Schoen.")), SERVER) == "neu"
    assert abgleichen(_c(("user", "Wie geht es dir?"), ("assistant", "Gut,  danke. "), ("user", "Schoen.")),
                      SERVER) == "neu"
    assert abgleichen(_c(("user", "Nur das.")), SERVER) == "neu"  # no history: nothing to reconcile
    assert abgleichen(_c(("user", "Hallo")), []) == "neu"


def test_the_same_conversation_again_is_a_regenerate_and_a_changed_last_message_an_edit():
    before = _c(("user", "Hallo"), ("assistant", "Hi!"))
    assert abgleichen(before + _c(("user", "Wie geht es dir?")), SERVER) == "regenerate"
    assert abgleichen(before + _c(("user", "Wie geht es Ihnen?")), SERVER) == "edit"
    # a message whose reply failed (stored alone), asked for again
    assert abgleichen(before + _c(("user", "Wie geht es dir?")), SERVER[:3]) == "regenerate"


def test_a_greeting_the_server_never_stored_is_left_aside():
    greeted = _c(("assistant", "Willkommen an Bord!"), ("user", "Hallo"), ("assistant", "Hi!"))
    assert abgleichen(greeted + _c(("user", "Wie geht es dir?")), SERVER) == "regenerate"
    assert abgleichen(greeted + _c(("user", "Wie geht es dir?"), ("assistant", "Gut, danke."), ("user", "Fein.")),
                      SERVER) == "neu"


def test_a_divergence_further_back_lets_the_server_history_stand():
    assert abgleichen(_c(("user", "Hallo!!"), ("assistant", "Hi!"), ("user", "Wie geht es dir?"),
                         ("assistant", "Gut, danke."), ("user", "Fein.")), SERVER) == "abweichung"
    # a message Nova sent unasked, which the client never saw
    pushed = SERVER + _c(("assistant", "Uebrigens: ich habe an dich gedacht."))
    assert abgleichen(_c(*[(r, t) for r, t in SERVER], ("user", "Fein.")), pushed) == "abweichung"


def test_stored_entries_read_as_the_client_shows_them():
    entries = [{"rolle": "user", "inhalt": "Hallo  du", "turn_id": "a"}, {"rolle": "assistant", "inhalt": "Hi!"}]
    assert gespeichert(entries) == [("user", "Hallo du"), ("assistant", "Hi!")]


OWUI_TITLE = """### Task:
Generate a concise, 3-5 word title with an emoji summarizing the chat history.
### Output:
JSON format: { "title": "your concise title here" }
### Chat History:
<chat_history>
USER: Hallo Nova
ASSISTANT: Hallo!
</chat_history>"""


def test_a_client_task_is_told_from_a_message_of_the_person():
    from serve.reconcile import client_aufgabe

    assert client_aufgabe(OWUI_TITLE) == "title"
    assert client_aufgabe(OWUI_TITLE.replace('"title"', '"follow_ups"')) == "follow_ups"
    assert client_aufgabe(OWUI_TITLE.replace('{ "title": "your concise title here" }', "")) == "text"
    assert client_aufgabe("Kannst du mir einen Titel fuer mein Buch vorschlagen? Als JSON mit \"title\".") is None
    assert client_aufgabe("### Task: das ist meine Ueberschrift, ohne Verlauf") is None
