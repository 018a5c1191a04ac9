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


def test_the_first_message_again_is_its_regenerate():
    """A retry of a conversation's first request, or Open WebUI's regenerate of the first reply (the
    client shows the message alone, or after a greeting the server never stored)."""
    first = _c(("user", "Hallo"), ("assistant", "Hi!"))
    assert abgleichen(_c(("user", "Hallo")), first) == "regenerate"
    assert abgleichen(_c(("assistant", "Willkommen!"), ("user", "Hallo")), first) == "regenerate"
    assert abgleichen(_c(("user", "Hallo")), first[:1]) == "regenerate"  # its reply had failed
    # another first message (a new chat in the client) is a new one: nothing is taken back
    assert abgleichen(_c(("assistant", "Willkommen!"), ("user", "Servus")), first) == "neu"
    assert abgleichen(_c(("user", "Hallo")), SERVER) == "neu"  # not the first message of the history


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



def _bisher(client, server):
    """The reconciliation as it was first written (quadratic: each opening assistant message left
    aside copied and compared the whole history again): the reference its results keep."""
    def endet_mit(ganz, teil):
        return len(teil) <= len(ganz) and ganz[len(ganz) - len(teil):] == teil

    def passt(vorher):
        mensch = max((i for i, m in enumerate(server) if m[0] == "user"), default=None)
        return endet_mit(server, vorher) or (mensch is not None and endet_mit(server[:mensch], vorher))

    *vorher, letzte = client
    while vorher and vorher[0][0] == "assistant" and not passt(vorher):
        vorher = vorher[1:]
    mensch = max((i for i, m in enumerate(server) if m[0] == "user"), default=None)
    if not vorher and mensch == 0 and server[0] == letzte:
        return "regenerate"
    if not vorher or endet_mit(server, vorher):
        return "neu"
    if mensch is not None and endet_mit(server[:mensch], vorher):
        return "regenerate" if server[mensch] == letzte else "edit"
    return "abweichung"


def test_every_small_conversation_reconciles_as_the_first_reconciliation_did():
    import random

    rng = random.Random(7)
    words = [("user", "a"), ("user", "b"), ("assistant", "a"), ("assistant", "x")]
    seen = set()
    for _ in range(40_000):
        server = [rng.choice(words) for _ in range(rng.randint(0, 7))]
        # mostly a stored history's end with changes and openings, now and then anything
        if server and rng.random() < 0.7:
            client = server[rng.randint(0, len(server)):]
            for _ in range(rng.randint(0, 2)):
                if client:
                    client[rng.randrange(len(client))] = rng.choice(words)
            client = [("assistant", rng.choice("agx")) for _ in range(rng.randint(0, 3))] + client
        else:
            client = [rng.choice(words) for _ in range(rng.randint(0, 7))]
        client = client + [rng.choice(words[:2])]
        want = _bisher(client, server)
        seen.add(want)
        assert abgleichen(client, server) == want, (client, server)
    assert seen == {"neu", "regenerate", "edit", "abweichung"}


class _Text(str):
    """A message text that counts how often it is compared."""

    vergleiche = 0

    def __eq__(self, other):
        _Text.vergleiche += 1
        return str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


def _verlauf(n: int, anders_am_ende: bool = False):
    """A stored history of n assistant messages and a message of the human, and a client's that
    is the same (a new message follows) or differs in its last message alone (the stored one
    stands): each of its n opening assistant messages could be a greeting the server never stored."""
    server = [("assistant", _Text(f"m{i}")) for i in range(n)] + [("user", _Text("Hallo"))]
    client = [("assistant", _Text(f"m{i}")) for i in range(n)] + [("user", _Text("Hallo" if not anders_am_ende
                                                                                   else "Hallo!"))]
    return client + [("user", _Text("Und jetzt?"))], server


def test_reconciliation_compares_each_message_a_bounded_number_of_times():
    for n in (1000, 4000):
        for anders in (False, True):
            client, server = _verlauf(n, anders)
            _Text.vergleiche = 0
            assert abgleichen(client, server) == ("abweichung" if anders else "neu")
            assert _Text.vergleiche <= 3 * n, (n, anders, _Text.vergleiche)


def test_a_history_of_fifty_thousand_messages_reconciles():
    client, server = _verlauf(50_000, anders_am_ende=True)
    assert abgleichen(client, server) == "abweichung"
    server = [nachricht("user" if i % 2 else "assistant", f"m{i}") for i in range(50_000)]
    assert abgleichen(server[1:] + [nachricht("user", "weiter")], server) == "neu"
    assert abgleichen(server[:-1] + [server[-1]], server) == "regenerate"
    assert abgleichen([nachricht("assistant", "Willkommen")] * 50_000 + server[:-1] + [nachricht("user", "m?")],
                      server) == "edit"


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
