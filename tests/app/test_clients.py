"""The chat clients people use, at the OpenAI door: request bodies shaped exactly as SillyTavern
(Chat Completion, custom OpenAI-compatible source) and Open WebUI send them (tests/app/clients/,
written from their public source: SillyTavern's server forwards a fixed list of keys, older
versions add `logit_bias: {}`; Open WebUI 0.12 adds its built-in `tools`), the official client's
model list, and a Character Card and a file uploaded as a multipart form, the card's lorebook
reaching the prompt the way its author wrote the keys."""
import json
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse
from ray import serve

from memory import session
from tests.conftest import auth, redis_call

pytestmark = pytest.mark.e2e

BODIES = Path(__file__).parent / "clients"


def _body(name: str, model: str, **extra) -> dict:
    return {**json.loads((BODIES / f"{name}.json").read_text()), "model": model, **extra}


def _streamed(system, key: str, body: dict, seen: dict | None = None) -> tuple[str, str]:
    """The reply a streamed completion carried, and its X-Novaberg-Ignored header (`seen` gets
    every header of the answer)."""
    parts = []
    with httpx.Client(base_url=system.url, timeout=180) as c, \
            connect_sse(c, "POST", "/v1/chat/completions", json=body, headers=auth(key)) as es:
        assert es.response.status_code == 200, es.response.read()
        ignored = es.response.headers.get("x-novaberg-ignored", "")
        if seen is not None:
            seen.update(es.response.headers)
        for ev in es.iter_sse():
            if ev.data == "[DONE]":
                break
            chunk = json.loads(ev.data)
            assert "error" not in chunk, chunk
            parts += [ch["delta"].get("content") or "" for ch in chunk["choices"]]
    return "".join(parts), ignored


def test_sillytavern_and_open_webui_bodies_hold_a_conversation(system, keys, settings, character):
    cid = character("client")
    st = _body("sillytavern", cid)
    reply, ignored = _streamed(system, keys["alice"], st)
    assert reply.strip()
    named = ignored.split(", ")
    for field in ("temperature", "top_p", "max_tokens", "presence_penalty", "frequency_penalty",
                  "messages[role=system]"):
        assert field in named, (field, ignored)
    # an older SillyTavern, and one whose user set the sampler fields it forwards
    older = _body("sillytavern", cid, logit_bias={}, top_k=40, seed=7, n=1, stop=["\nUser:"],
                  messages=[*st["messages"], {"role": "assistant", "content": reply},
                            {"role": "user", "content": "Und was machst du gern?"}])
    reply2, ignored = _streamed(system, keys["alice"], older)
    assert reply2.strip() and {"top_k", "seed", "stop"} <= set(ignored.split(", "))
    # Open WebUI 0.12: its built-in tools come along; nothing else is set
    owui = _body("openwebui", cid, tools=[{"type": "function", "function": {"name": "get_current_timestamp",
                                                                              "parameters": {"type": "object"}}}],
                 messages=[{"role": "user", "content": "Erzaehl mir vom Meer."}])
    reply3, ignored = _streamed(system, keys["alice"], owui)
    assert reply3.strip() and ignored == "tools"
    # each human message is stored once, each reply as the client was shown it
    turns = redis_call(settings.redis_url, session.load_turns, "alice", cid, 20)
    human = [t["inhalt"] for t in turns if t["rolle"] == "user"]
    assert human == ["Hi Nova! Where are we headed today?", "Und was machst du gern?", "Erzaehl mir vom Meer."]
    assert [t["inhalt"] for t in turns if t["rolle"] == "assistant"][-3:] == [reply, reply2, reply3]


@pytest.mark.parametrize("client_name", ["sillytavern", "openwebui"])
def test_a_regenerate_and_an_edit_leave_nova_s_history_as_the_client_shows_it(system, keys, settings, character,
                                                                             client_name):
    """A swipe / regenerate sends the same conversation again; an edit sends it with the last
    message changed: Nova's history ends as the client shows the conversation (its greeting aside,
    which the OpenAI door never stored)."""
    cid = character("swipe")
    body = _body(client_name, cid)
    shown = [m for m in body["messages"] if m["role"] in ("user", "assistant")]

    def send(messages: list[dict]) -> tuple[str, str]:
        seen: dict = {}
        reply, _ = _streamed(system, keys["alice"], {**body, "messages": messages}, seen)
        return reply, seen["x-novaberg-history"]

    first, art = send(shown)
    assert art == "neu"
    shown += [{"role": "assistant", "content": first}, {"role": "user", "content": "Und was machst du gern?"}]
    second, art = send(shown)
    assert art == "neu"
    swiped, art = send(shown)  # the same conversation again: another reply to the last message
    assert art == "regenerate" and swiped.strip()
    shown[-1] = {"role": "user", "content": "Und was isst du gern?"}  # the last message edited
    edited, art = send(shown)
    assert art == "edit"
    shown.append({"role": "assistant", "content": edited})
    turns = redis_call(settings.redis_url, session.load_turns, "alice", cid, 50)
    stored = [(t["rolle"], " ".join(t["inhalt"].split())) for t in turns]
    client_view = [(m["role"], " ".join(m["content"].split())) for m in shown]
    assert stored == client_view[len(client_view) - len(stored):] and len(stored) == 4, (stored, client_view)
    # an edit further back: the server's history stands, the last message is a new one
    first_user = next(i for i, m in enumerate(shown) if m["role"] == "user")
    shown[first_user] = {"role": "user", "content": "Etwas ganz anderes."}
    _, art = send([*shown, {"role": "user", "content": "Noch da?"}])
    assert art == "abweichung"
    # SillyTavern's continue ends with the reply to go on with: refused, nothing stored
    before = redis_call(settings.redis_url, session.load_turns, "alice", cid, 50)
    r = httpx.post(f"{system.url}/v1/chat/completions", headers=auth(keys["alice"]), timeout=60, json={
        **body, "stream": False, "messages": [*shown, {"role": "system", "content": "[Continue your last message]"}]})
    assert r.status_code == 422 and "continue" in r.json()["error"]["message"], r.text
    assert redis_call(settings.redis_url, session.load_turns, "alice", cid, 50) == before


OWUI_TITLE_TASK = """### Task:
Generate a concise, 3-5 word title with an emoji summarizing the chat history.
### Guidelines:
- The title should clearly represent the main theme or subject of the conversation.
### Output:
JSON format: { "title": "your concise title here" }
### Chat History:
<chat_history>
USER: Erzaehl mir vom Meer.
ASSISTANT: Das Meer ist weit.
</chat_history>"""


def test_open_webui_s_housekeeping_requests_make_no_turn(client, keys, settings, character):
    """Open WebUI asks the chat's model for a title, tags and follow-ups: the door answers the JSON
    each asks for and stores nothing of it in Nova's memory."""
    cid = character("aufgabe")
    for key, template in (("title", OWUI_TITLE_TASK), ("tags", OWUI_TITLE_TASK.replace('"title"', '"tags"')),
                          ("follow_ups", OWUI_TITLE_TASK.replace('"title"', '"follow_ups"'))):
        r = client.post("/v1/chat/completions", headers=auth(keys["alice"]), json=_body(
            "openwebui", cid, stream=False, messages=[{"role": "user", "content": template}]))
        assert r.status_code == 200 and r.headers["x-novaberg-history"] == "aufgabe", r.text
        answer = json.loads(r.json()["choices"][0]["message"]["content"])
        assert list(answer) == [key] and (answer[key] == "Nova" if key == "title" else answer[key] == [])
    assert redis_call(settings.redis_url, session.load_turns, "alice", cid, 20) == []


def test_a_sampling_field_of_the_wrong_type_is_a_clear_error(client, keys, character):
    cid = character("client")
    r = client.post("/v1/chat/completions", headers=auth(keys["alice"]),
                    json=_body("sillytavern", cid, stream=False, top_k="many"))
    assert r.status_code == 422 and "top_k" in r.text
    r = client.post("/v1/chat/completions", headers=auth(keys["alice"]), json=_body("openwebui", cid, n=2))
    assert r.status_code == 422 and "n" in r.text


def test_models_lists_the_characters(system, keys, character):
    from openai import OpenAI

    cid = character("modell", name="Modell-Mira")
    models = {m.id: m for m in OpenAI(base_url=f"{system.url}/v1", api_key=keys["alice"]).models.list()}
    assert "nova" in models and cid in models
    assert models[cid].owned_by == "novaberg" and models[cid].model_extra["name"] == "Modell-Mira"
    assert httpx.get(f"{system.url}/v1/models").status_code == 401


LOREBOOK_CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Seraphine", "description": "{{char}} is a ranger of Emberfall.", "first_mes": "Well met.",
    "character_book": {"name": "Emberfall Lore", "entries": [
        {"keys": ["dragon", "wyrm"], "content": "Dragons sleep beneath the Cinder Peaks and wake only in winter.",
         "enabled": True, "insertion_order": 90, "selective": True, "secondary_keys": [], "constant": False,
         "extensions": {"selectiveLogic": 0, "match_whole_words": None, "case_sensitive": None, "position": 1}},
        {"keys": ["inn", "tavern"], "secondary_keys": ["Rusty Flagon"], "selective": True,
         "content": "The only inn in town burned down last spring.", "enabled": True, "insertion_order": 50,
         "extensions": {"selectiveLogic": 2}}]}}}


def test_a_card_by_multipart_form_and_its_lorebook_in_the_prompt(client, keys):
    op = auth(keys["operator"])
    files = {"file": ("seraphine.json", json.dumps(LOREBOOK_CARD).encode(), "application/json")}
    r = client.post("/v1/characters/import", params={"character_id": "seraphine-form", "replace": True},
                    files=files, headers=op)
    assert r.status_code == 201, r.text
    assert r.json()["wissen_eintraege"] == 2 and r.json()["character"]["name"] == "Seraphine"
    form = b'--b\r\nContent-Disposition: form-data; name="note"\r\n\r\nx\r\n--b--\r\n'
    no_file = client.post("/v1/characters/import", content=form,
                          headers={**op, "Content-Type": "multipart/form-data; boundary=b"})
    assert no_file.status_code == 422 and "without a file part" in no_file.json()["error"]["message"]
    r = client.post("/v1/characters/import", content=b"--x\r\n", headers={**op, "Content-Type": "multipart/form-data"})
    assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_upload"

    llm = serve.get_deployment_handle("LLM", app_name="novaberg")
    prompts = {}
    for text in ("Are there Dragons up there?", "Let's get dinner at an inn.", "At the Rusty Flagon inn, then."):
        llm.record.remote(True).result()
        try:
            t = client.post("/v1/pairs/alice/seraphine-form/turns", json={"text": text}, headers=auth(keys["alice"]))
        finally:
            recorded = llm.record.remote(False).result()
        assert t.status_code == 200, t.text
        prompts[text] = "\n".join(m["content"] or "" for rec in recorded for m in rec["request"]["messages"])
    assert "Cinder Peaks" in prompts["Are there Dragons up there?"]  # "dragon" inside "Dragons"
    assert "burned down" in prompts["Let's get dinner at an inn."]
    assert "burned down" not in prompts["At the Rusty Flagon inn, then."]  # its secondary key says not there


def test_a_file_by_multipart_form(client, keys, character):
    cid = character("form")
    note = b"# Bello's medication\n\nBello gets half a tablet of carprofen every morning at seven."
    r = client.post(f"/v1/pairs/alice/{cid}/files", files={"file": ("notes/bello.md", note, "text/markdown")},
                    headers=auth(keys["alice"]))
    assert r.status_code == 201, r.text
    assert r.json()["datei"]["name"] == "bello.md" and r.json()["datei"]["art"] == "markdown"
    again = client.post(f"/v1/pairs/alice/{cid}/files", content=note,
                        headers={**auth(keys["alice"]), "Content-Type": "text/markdown"})
    assert again.status_code == 200 and not again.json()["neu"]  # the raw body: the same file


def test_open_webui_s_account_object_names_the_user_and_the_person(system, keys, settings, character):
    """Open WebUI sends `user` as its account object for a model it serves as a pipeline
    (`{name, id, email, role}`): the id names the user an operator key speaks for, the name is the
    person's (his message's history entry carries it); an account name the name rules refuse is
    left out (fallback `kontoname_unbrauchbar`) and the turn is answered; a user key stays its own
    user."""
    cid = character("konto")
    konto = {"name": "Caroline", "id": "3f2a9c1e-8b7d-4e21-9a0b-5c6d7e8f9a01", "email": "caro@example.org",
             "role": "user"}
    body = _body("openwebui", cid, user=konto, messages=[{"role": "user", "content": "Ich heisse Caroline."}])
    reply, ignored = _streamed(system, keys["operator"], body)
    assert reply.strip() and "user" not in ignored.split(", ")
    schlecht = {**konto, "name": "Caro: Admin"}
    reply2, _ = _streamed(system, keys["operator"], _body("openwebui", cid, user=schlecht, messages=[
        {"role": "user", "content": "Ich heisse Caroline."}, {"role": "assistant", "content": reply},
        {"role": "user", "content": "Und wie geht es dir?"}]))
    assert reply2.strip()
    turns = redis_call(settings.redis_url, session.load_turns, konto["id"], cid, 10)
    assert [(t["inhalt"], t.get("name")) for t in turns if t["rolle"] == "user"] == [
        ("Ich heisse Caroline.", "Caroline"), ("Und wie geht es dir?", None)]
    # a user key is its own user: the account's id (Open WebUI's) is left aside, its name is taken
    reply3, _ = _streamed(system, keys["alice"], _body("openwebui", cid, user=konto, messages=[
        {"role": "user", "content": "Hallo aus meinem eigenen Konto."}]))
    assert reply3.strip()
    mine = redis_call(settings.redis_url, session.load_turns, "alice", cid, 10)
    assert [(t["inhalt"], t.get("name")) for t in mine if t["rolle"] == "user"] == [
        ("Hallo aus meinem eigenen Konto.", "Caroline")]


def test_a_retry_with_its_turn_id_is_a_replay_and_loses_no_turn(system, keys, settings, character):
    """The official client sends a request again (its own retries, or the caller's) with the same
    `X-Turn-Id`: from the second message on the stored history then ends with that turn, which
    reconciles like a regenerate; the turn id decides: the stored reply comes back
    (`X-Novaberg-History: wiederholung`), streamed or not, and each turn keeps its one record."""
    import uuid

    from openai import OpenAI

    from memory import pg
    from tests.conftest import pg_call, wait_for

    cid, tag = character("retry"), uuid.uuid4().hex[:8]
    oa = OpenAI(base_url=f"{system.url}/v1", api_key=keys["alice"], timeout=180, max_retries=0)
    messages: list[dict] = []
    for i, text in enumerate(["Ich heisse Mara.", "Ich wohne am Hafen.", "Was weisst du von mir?"]):
        messages.append({"role": "user", "content": text})
        turn_id = f"{tag}{i}"
        first = oa.chat.completions.with_raw_response.create(model=cid, messages=messages,
                                                             extra_headers={"X-Turn-Id": turn_id})
        reply = first.parse().choices[0].message.content
        wait_for(lambda: pg_call(settings.database_url, pg.turn_record, "alice", cid, turn_id) is not None, timeout=60)
        again = oa.chat.completions.with_raw_response.create(model=cid, messages=messages,
                                                             extra_headers={"X-Turn-Id": turn_id})
        assert again.headers["x-novaberg-history"] == "wiederholung"
        assert again.parse().choices[0].message.content == reply
        streamed = "".join(c.choices[0].delta.content or "" for c in oa.chat.completions.create(
            model=cid, messages=messages, stream=True, extra_headers={"X-Turn-Id": turn_id}) if c.choices)
        assert streamed == reply
        messages.append({"role": "assistant", "content": reply})
    turns = redis_call(settings.redis_url, session.load_turns, "alice", cid, 20)
    assert [t["turn_id"] for t in turns if t["rolle"] == "user"] == [f"{tag}0", f"{tag}1", f"{tag}2"]
    assert [t["inhalt"] for t in turns if t["rolle"] == "assistant"] == [m["content"] for m in messages[1::2]]
    for i in range(3):  # none taken back: each record stays
        assert pg_call(settings.database_url, pg.turn_record, "alice", cid, f"{tag}{i}") is not None
    bad = httpx.post(f"{system.url}/v1/chat/completions", headers={**auth(keys["alice"]), "X-Turn-Id": "begruessung"},
                     json={"model": cid, "messages": [{"role": "user", "content": "Hallo"}]}, timeout=60)
    assert bad.status_code == 422 and "reserved" in bad.text


@pytest.mark.parametrize("client_name", ["sillytavern", "openwebui"])
def test_each_request_of_a_client_sent_twice_leaves_one_record_per_turn(system, keys, settings, character,
                                                                      client_name):
    """SillyTavern and Open WebUI send no turn id: a request sent again is, to them and to the door,
    another reply to the same message (a swipe, a regenerate). Each message of the human still ends
    with one turn record and one reply in the history — the one the client shows last; none is lost."""
    from memory import pg
    from tests.conftest import pg_call, wait_for

    cid = character("zweimal")
    body = _body(client_name, cid)
    shown = [m for m in body["messages"] if m["role"] in ("user", "assistant")]
    for text in (None, "Und was machst du gern?"):
        if text is not None:
            shown.append({"role": "user", "content": text})
        for _ in range(2):  # the same request again
            reply, _ = _streamed(system, keys["alice"], {**body, "messages": shown})
        shown.append({"role": "assistant", "content": reply})
    turns = redis_call(settings.redis_url, session.load_turns, "alice", cid, 50)
    assert [(t["rolle"], t["inhalt"]) for t in turns] == [(m["role"], m["content"]) for m in shown[-4:]]
    ids = [t["turn_id"] for t in turns if t["rolle"] == "user"]
    for t in ids:
        wait_for(lambda t=t: pg_call(settings.database_url, pg.turn_record, "alice", cid, t) is not None, timeout=60)
    assert sorted(pg_call(settings.database_url, pg.turn_ids, "alice", cid)) == sorted(ids)
