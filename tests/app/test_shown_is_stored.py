"""What the person is shown is what is stored: in the native stream, the OpenAI stream, the CLI and
the push channel, over turns in which each reviewer changes the responder's draft — the leak
guard, the tribunal with the corrector, the Thinker — and a turn nobody changes. By default no
client is sent the draft: the native stream says `schreibt`, then the `token` event, byte for byte
the committed reply; asked for (`?draft=true`, `novaberg chat --draft`), the draft streams as
`draft` events (provisional) before it."""
import io
import json
import uuid

import pyte
import pytest

from cluster import cli
from tests.app.conftest import (KORRIGIERT, LECK, LECK_ENTWURF, MANGEL, THINKER, THINKER_KORREKTUR)
from tests.conftest import auth
from tests.app.conftest import cli_against

pytestmark = pytest.mark.e2e

FAELLE = [
    # (marker in the message, a text that must not stay shown, what the stored reply must be, or None)
    pytest.param(LECK, "[REGELN]", None, id="leckschutz"),
    pytest.param(MANGEL, None, KORRIGIERT, id="tribunal_corrector"),
    pytest.param(THINKER, None, THINKER_KORREKTUR, id="thinker"),
    pytest.param("", None, None, id="unveraendert"),
]


def _stored(client, key, user, character, turn_id) -> str:
    r = client.get(f"/v1/pairs/{user}/{character}/turns", headers=auth(key), params={"limit": 50})
    assert r.status_code == 200, r.text
    mine = [t for t in r.json()["turns"] if t["turn_id"] == turn_id and t["rolle"] == "assistant"]
    assert len(mine) == 1, mine
    return mine[0]["inhalt"]


def _native(client, key, user, character, text, draft=True):
    turn_id = uuid.uuid4().hex
    events = []
    params = {"stream": "true", **({"draft": "true"} if draft else {})}
    with client.stream("POST", f"/v1/pairs/{user}/{character}/turns", params=params,
                       headers=auth(key), json={"text": text, "turn_id": turn_id}) as r:
        assert r.status_code == 200
        event = None
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                events.append((event, json.loads(line[5:])))
    return turn_id, events


@pytest.mark.parametrize("marker, gone, expected", FAELLE)
def test_native_stream_keeps_only_the_stored_reply(system, client, keys, character, marker, gone, expected):
    ch = character("nova")
    turn_id, events = _native(client, keys["alice"], "alice", ch, f"{marker} Was war am Montag?".strip())
    kinds = [k for k, _ in events]
    draft = "".join(d["text"] for k, d in events if k == "draft")
    shown = "".join(d["text"] for k, d in events if k == "token")
    final = next(d for k, d in events if k == "final")
    stored = _stored(client, keys["alice"], "alice", ch, turn_id)
    assert draft.strip(), "the draft streams while it is written"
    assert kinds.count("token") == 1 and kinds.index("token") > max(i for i, k in enumerate(kinds) if k == "draft")
    assert shown == stored == final["reply"]
    token = next(d for k, d in events if k == "token")
    if marker:  # the reviewer changed the draft: the kept reply says so and differs from it
        assert token["draft_kept"] is False and draft.strip() != stored
        if marker == LECK:
            assert draft.strip() == LECK_ENTWURF
    else:
        assert token["draft_kept"] is True and draft.strip() == stored
    if gone:
        assert gone not in stored
    if expected:
        assert stored == expected


@pytest.mark.parametrize("marker, gone, expected", FAELLE)
def test_native_stream_sends_no_draft_unless_asked(system, client, keys, character, marker, gone, expected):
    ch = character("nova")
    turn_id, events = _native(client, keys["alice"], "alice", ch, f"{marker} Was war am Montag?".strip(), draft=False)
    kinds = [k for k, _ in events]
    stored = _stored(client, keys["alice"], "alice", ch, turn_id)
    assert "draft" not in kinds
    assert kinds.count("schreibt") == 1 and kinds.index("schreibt") < kinds.index("token") < kinds.index("final")
    assert next(d for k, d in events if k == "schreibt") == {"node": "responder"}
    assert "".join(d["text"] for k, d in events if k == "token") == stored
    if marker == LECK:  # what the leak guard removed was never sent
        assert LECK_ENTWURF not in json.dumps(events) and "[REGELN]" not in json.dumps(events)


@pytest.mark.parametrize("marker, gone, expected", FAELLE)
def test_openai_stream_shows_only_the_stored_reply(system, client, keys, character, marker, gone, expected):
    from openai import OpenAI

    ch = character("nova")
    turn_id = uuid.uuid4().hex
    oa = OpenAI(base_url=f"{system.url}/v1", api_key=keys["alice"], timeout=180)
    stream = oa.chat.completions.create(model=ch, messages=[{"role": "user", "content": f"{marker} Was war am Montag?"}],
                                        stream=True, extra_headers={"X-Turn-Id": turn_id})
    shown, finish = "", None
    for c in stream:
        if c.choices and c.choices[0].delta.content:
            shown += c.choices[0].delta.content
        if c.choices and c.choices[0].finish_reason:
            finish = c.choices[0].finish_reason
    assert finish == "stop"
    assert shown == _stored(client, keys["alice"], "alice", ch, turn_id)
    if gone:
        assert gone not in shown
    if expected:
        assert shown == expected


class _Terminal(io.StringIO):
    """stdout as a terminal: what is written is played on a screen (pyte) at the end."""

    def isatty(self) -> bool:
        return True


def _screen(text: str, columns: int = 80) -> list[str]:
    screen = pyte.Screen(columns, 40)
    pyte.Stream(screen).feed(text.replace("\n", "\r\n"))
    return [line.rstrip() for line in screen.display if line.strip()]


@pytest.mark.parametrize("marker, gone, expected", FAELLE)
def test_cli_leaves_the_stored_reply_on_the_screen(system, client, keys, monkeypatch, capsys, character,
                                                   marker, gone, expected):
    ch = character("nova")
    cli_against(monkeypatch, system, keys["operator"])
    text = f"{marker} Was war am Montag?".strip()
    # piped: the kept reply alone
    assert cli.main(["chat", "--user", "alice", "--character", ch, "--message", text, "--once"]) == 0
    lines = capsys.readouterr().out.splitlines()
    turns = client.get(f"/v1/pairs/alice/{ch}/turns", headers=auth(keys["alice"])).json()["turns"]
    assert lines[-1] == f"{ch}> {turns[-1]['inhalt']}"
    # on a terminal (24 columns, so the draft wraps): a writing state by default, the draft with
    # --draft; either is shown dimmed, then erased for the kept reply
    for extra in ([], ["--draft"]):
        term = _Terminal()
        with monkeypatch.context() as m:
            m.setattr("sys.stdout", term)
            m.setattr("shutil.get_terminal_size", lambda fallback=(80, 24): __import__("os").terminal_size((24, 40)))
            assert cli.main(["chat", "--user", "alice", "--character", ch, "--message", text, "--once", *extra]) == 0
        written = term.getvalue()
        turns = client.get(f"/v1/pairs/alice/{ch}/turns", headers=auth(keys["alice"])).json()["turns"]
        stored = turns[-1]["inhalt"]
        assert "\x1b[2m" in written, "the writing state or the draft was drawn, dimmed"
        if not extra:
            assert "schreibt" in written
            if marker == LECK:
                assert LECK_ENTWURF not in written and "[REGELN]" not in written
        screen = "".join(_screen(written, 24)).replace(" ", "")
        # the chat's header line, then the kept reply and nothing of the draft after it
        assert screen.endswith(f"{ch}> {stored}".replace(" ", "")), screen
        if gone:
            assert gone.replace(" ", "") not in screen


def test_push_channel_carries_the_stored_reply(system, client, keys, character):
    """A `continue` (a message nobody asked for) whose draft the leak guard replaces: the pushed
    message is the stored reply."""
    from tests.app.test_e2e_events import Listener

    ch = character("nova")
    path = f"/v1/pairs/alice/{ch}/events"
    live = Listener(system.url, keys["alice"], path)
    try:
        first = live.next()
        assert first[0] == "bereit", first
        turn_id = f"weiter-{uuid.uuid4().hex[:8]}"
        r = client.post(path, headers=auth(keys["operator"]),
                        json={"kind": "continue", "user_prompt": f"{LECK} Erzaehl weiter.", "turn_id": turn_id})
        assert r.status_code == 200, r.text
        event, _, message = live.next()
        assert event == "nachricht" and message["turn_id"] == turn_id
        turns = client.get(f"/v1/pairs/alice/{ch}/turns", headers=auth(keys["alice"])).json()["turns"]
        stored = [t for t in turns if t["turn_id"] == turn_id][-1]
        assert stored["rolle"] == "assistant" and message["reply"] == stored["inhalt"]
        assert "[REGELN]" not in message["reply"] and message["reply"] != LECK_ENTWURF
    finally:
        live.close()
