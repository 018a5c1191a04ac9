"""The OpenAI-compatible route, driven by the official openai client."""

import pytest

from memory import session
from tests.conftest import redis_call

pytestmark = pytest.mark.e2e


def _client(system, key):
    from openai import OpenAI

    return OpenAI(base_url=f"{system.url}/v1", api_key=key, timeout=180)


def test_openai_client_plain_and_streamed(system, keys, settings, character):
    client = _client(system, keys["alice"])
    character = character("nova")
    out = client.chat.completions.create(model=character, user="alice",
                                         messages=[{"role": "user", "content": "Hallo, wer bist du?"}])
    assert out.choices[0].message.content.strip()
    assert out.model == character and out.usage.completion_tokens > 0

    stream = client.chat.completions.create(
        model=character, messages=[{"role": "user", "content": "Und was machst du gern?"}], stream=True,
        stream_options={"include_usage": True})
    parts, usage = [], None
    for c in stream:
        if c.choices and c.choices[0].delta.content:
            parts.append(c.choices[0].delta.content)
        if c.usage:
            usage = c.usage
    assert "".join(parts).strip()
    assert usage is not None and usage.completion_tokens > 0
    # both turns live server-side, though the client sent only the last message each time
    turns = redis_call(settings.redis_url, session.load_turns, "alice", character, 10)
    assert len(turns) == 4
    assert turns[2]["inhalt"] == "Und was machst du gern?"


def test_openai_route_enforces_the_key_owner(system, keys):
    from openai import PermissionDeniedError

    client = _client(system, keys["bob"])
    with pytest.raises(PermissionDeniedError):
        client.chat.completions.create(model="nova", user="alice", messages=[{"role": "user", "content": "hi"}])
