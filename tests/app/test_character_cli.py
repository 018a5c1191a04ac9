"""`novaberg character …` against the running app: add, list, show, import a PNG card, export it,
remove — and a clear error for what does not exist."""
import json
import uuid

import pytest

from cluster import cli
from tests.app.test_e2e_characters import _png_card
from tests.app.conftest import cli_against

pytestmark = pytest.mark.e2e


@pytest.fixture()
def novaberg(system, keys, monkeypatch, capsys):
    cli_against(monkeypatch, system, keys["operator"])

    def run(*argv) -> tuple[int, str, str]:
        rc = cli.main(["character", *argv])
        out = capsys.readouterr()
        return rc, out.out, out.err

    return run


def test_character_commands(novaberg, tmp_path):
    cid = f"cli-{uuid.uuid4().hex[:6]}"
    rc, out, _ = novaberg("add", cid, "--name", "Ole", "--identitaet", "Ein alter Fischer.", "--begruessung", "Moin.")
    assert rc == 0 and json.loads(out)["name"] == "Ole"
    rc, out, _ = novaberg("list")
    assert rc == 0 and any(line.startswith(f"{cid}\tOle\t") for line in out.splitlines())
    rc, out, _ = novaberg("show", cid)
    assert rc == 0 and json.loads(out)["begruessung"] == "Moin."
    rc, _, err = novaberg("add", cid, "--name", "Ole")
    assert rc == 1 and "error 409" in err

    card = tmp_path / "mira.png"
    card.write_bytes(_png_card("Mira"))
    mid = f"mira-{uuid.uuid4().hex[:6]}"
    rc, out, _ = novaberg("import", str(card), "--id", mid)
    assert rc == 0 and json.loads(out)["quelle"] == "png" and json.loads(out)["wissen_eintraege"] == 1
    rc, out, _ = novaberg("import", str(card), "--id", mid, "--replace")
    assert rc == 0
    exported = tmp_path / "mira.json"
    rc, out, _ = novaberg("export", mid, "-o", str(exported))
    assert rc == 0 and json.loads(exported.read_text())["data"]["character_book"]["entries"][0]["keys"] == ["Fenja"]

    for c in (cid, mid):
        rc, out, _ = novaberg("remove", c)
        assert rc == 0 and out.strip() == f"removed {c}"
    rc, _, err = novaberg("show", cid)
    assert rc == 1 and "error 404" in err and "GET /v1/characters" in err


def test_chat_opens_a_new_pair_with_the_greeting(system, keys, monkeypatch, capsys, character):
    cli_against(monkeypatch, system, keys["operator"])
    ch = character("gruss", name="Ole", begruessung="Moin {{user}}, ich bin {{char}}.")
    assert cli.main(["chat", "--user", "alice", "--character", ch, "--message", "Hallo", "--once"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"Talking to Ole ({ch}) as alice")
    assert out[1] == f"{ch}> Moin du, ich bin Ole."
    assert out[2].startswith(f"{ch}> ") and len(out[2]) > len(f"{ch}> ")
    # a pair that has talked before is not greeted again; an unknown character is refused clearly
    assert cli.main(["chat", "--user", "alice", "--character", ch, "--message", "Noch da?", "--once"]) == 0
    assert "Moin" not in capsys.readouterr().out
    assert cli.main(["chat", "--user", "alice", "--character", "gibt-es-nicht", "--once"]) == 1
    assert "404" in capsys.readouterr().err


def test_a_chat_that_ended_gives_its_event_stream_back(system, keys, settings, monkeypatch, capsys, character):
    """Each chat reads the pair's events stream beside the conversation; at the chat's end it hangs
    up, so a process that chats more often than `max_event_streams_per_user` is never refused one."""
    from tests.app.test_e2e_events import Listener

    cli_against(monkeypatch, system, keys["operator"])
    ch = character("hangup")
    for i in range(settings.max_event_streams_per_user + 1):
        assert cli.main(["chat", "--user", "bob", "--character", ch, "--message", f"Runde {i}.", "--once"]) == 0
    capsys.readouterr()
    live = Listener(system.url, keys["bob"], f"/v1/pairs/bob/{ch}/events")
    try:
        assert live.next()[0] == "bereit"
    finally:
        live.close()
