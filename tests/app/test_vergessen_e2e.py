"""Forget means never in a prompt again, through the API with the whole system: a fact told live
in a turn and one imported (memory/importer.py), each with what the stores derived from it (a
sentence of Nova's view of the person and of the person's profile, the session summary, a library
entry and research still queued from the turn), forgotten as "everything about X" (the preview,
then the confirmed ids); afterwards turns that ask near the facts, their background work and a
pixie round send neither fact's distinctive word in any prompt of any node."""
import asyncio
import json
import time
import uuid

import pytest
from ray import serve

from memory import beziehung, bibliothek, importer, session
from tests.conftest import auth, pg_call, redis_call
from tests.app.test_turn_ops_e2e import _paar, _reden

pytestmark = pytest.mark.e2e

LIVE = "Mein Papagei Quastenflosser spricht drei Sprachen."
IMPORTIERT = "Meine Schildkroete Zinnoberkante wohnt im Garten."
WOERTER = ("quastenflosser", "zinnoberkante")


def _embed(texts: list[str]) -> list[list[float]]:
    h = serve.get_deployment_handle("Embedder", app_name="novaberg")
    return [h.embed.remote(t).result() for t in texts]


def _importieren(settings, user: str, ch: str) -> None:
    """An imported conversation whose first part holds the fact and whose second one (46 turns) pushes
    it, and the live turn before it, out of the session window and the short-term memory."""
    conv = {"speaker_a": "Anna", "speaker_b": "Nova", "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2_date_time": "2:10 pm on 9 May, 2023",
            "session_1": [{"speaker": "Anna", "dia_id": "D1:1", "text": IMPORTIERT},
                          {"speaker": "Nova", "dia_id": "D1:2", "text": "Wie schoen."}],
            "session_2": [{"speaker": "Anna" if i % 2 == 0 else "Nova", "dia_id": f"D2:{i}",
                           "text": f"Heute sprachen wir ueber das Wetter, zum {i}. Mal."} for i in range(46)]}
    _, turns = importer.load_conversation({"conversation": conv})
    texte = [importer.node_text(t) for t in turns]
    vektoren = dict(zip(texte, _embed(texte)))  # the handle is called outside the event loop

    async def go(pool):
        from redis.asyncio import Redis

        r = Redis.from_url(settings.redis_url)
        try:
            return await importer.import_conversation(pool, r, user, ch, turns, "Anna",
                                                     lambda xs: [vektoren[x] for x in xs])
        finally:
            await r.aclose()

    assert pg_call(settings.database_url, go)["lzg_nodes"] == 48


def _abgeleitet(settings, user: str, ch: str, turn_id: str) -> None:
    """What the background and the pixie derive from such facts, as they store it."""
    pg_call(settings.database_url, beziehung.profil_wachsen, user, ch, f"praegung:{turn_id}-abgeleitet", {
        "nova_beziehung": "Nova mag es, wenn Person B vom Papagei Quastenflosser erzaehlt.",
        "mensch_kern": "Person B hat eine Schildkroete namens Zinnoberkante, die im Garten wohnt."},
        {"nova_beziehung": 5, "mensch_kern": 5})
    pg_call(settings.database_url, bibliothek.add, user, ch, "wissen", "Papageien",
            "Graupapageien wie Quastenflosser lernen viele Sprachen und werden sehr alt.",
            _embed(["Papagei Sprachen"])[0], 1.0)
    # the library entry under the live turn's delegation key (pg_call passes no keywords)
    pg_call(settings.database_url, lambda pool: _schluessel(pool, user, ch, turn_id))
    redis_call(settings.redis_url, lambda rd: rd.rpush(f"delegationen:{user}:{ch}", *[json.dumps(d) for d in (
        {"aufgabe": "Recherchiere, wie alt Papageien wie Quastenflosser werden.", "turn_id": turn_id, "versuche": 0},
        {"aufgabe": "Recherchiere Segelreviere am Wannsee.", "turn_id": "anders", "versuche": 0})]))


async def _schluessel(pool, user, ch, turn_id):
    async with pool.connection() as conn:
        await conn.execute("UPDATE autonomous_wissen SET schluessel=%s WHERE user_id=%s AND character_id=%s"
                           " AND titel='Papageien'", (f"delegation:{turn_id}:{'0' * 16}:wissen", user, ch))


def _prompts(llm) -> str:
    return "\n".join(str(m.get("content") or "") for rec in llm.record.remote(False).result()
                     for m in rec["request"]["messages"]).casefold()


def _pixie_runde(settings) -> dict:
    from actors.pixie import pixie_round
    from pipeline.services import Services

    async def go():
        return await pixie_round(Services.connect(settings))

    return asyncio.run(go())


def test_a_forgotten_fact_reaches_no_prompt_again(client, settings, character):
    ch, tag = character("vgs"), uuid.uuid4().hex[:8]
    user, key = _paar(settings)
    llm = serve.get_deployment_handle("LLM", app_name="novaberg")
    _reden(client, settings, user, key, ch, LIVE, f"{tag}0")
    _importieren(settings, user, ch)
    _abgeleitet(settings, user, ch, f"{tag}0")

    llm.record.remote(True).result()
    _reden(client, settings, user, key, ch, "Wie geht es eigentlich meinem Papagei und meiner Schildkroete?", f"{tag}1")
    vorher = _prompts(llm)
    assert all(w in vorher for w in WOERTER)  # both facts reach the prompts before they are forgotten
    redis_call(settings.redis_url, lambda rd: session.set_summary(
        rd, user, ch, "Person B erzaehlte vom Papagei Quastenflosser. Zinnoberkante, die Schildkroete, wohnt im "
                      "Garten. Es ging viel um das Wetter."))

    for q in WOERTER:
        r = client.post(f"/v1/pairs/{user}/{ch}/memories/forget", json={"q": q}, headers=auth(key))
        assert r.status_code == 200, r.text
        vorschau = r.json()
        assert vorschau["confirm"] and all(q in i["inhalt"].casefold() for i in vorschau["vorschau"])
        assert client.get(f"/v1/pairs/{user}/{ch}/memories", params={"q": q},
                          headers=auth(key)).json()["memories"]  # a preview forgets nothing
        r = client.post(f"/v1/pairs/{user}/{ch}/memories/forget", json={"q": q, "confirm": vorschau["confirm"]},
                        headers=auth(key))
        assert r.status_code == 200, r.text
        assert sorted(r.json()["vergessen"]) == sorted(vorschau["confirm"]) and not r.json()["nicht_vergessen"]
        assert client.get(f"/v1/pairs/{user}/{ch}/memories", params={"q": q},
                          headers=auth(key)).json()["memories"] == []
    assert r.json()["abgeleitet"]["zusammenfassung_saetze"] == 1
    assert redis_call(settings.redis_url, lambda rd: session.get_summary(rd, user, ch)) == \
        "Es ging viel um das Wetter."
    assert [e.titel for e in pg_call(settings.database_url, bibliothek.eintraege, user, ch)] == []
    assert not any(w in json.dumps(pg_call(settings.database_url, beziehung.profile, user, ch).model_dump()).casefold()
                   for w in WOERTER)

    llm.record.remote(True).result()
    for i, text in enumerate(("Wie heisst nochmal mein Papagei, der Sprachen spricht?",
                              "Und wie heisst meine Schildkroete im Garten?"), start=2):
        _reden(client, settings, user, key, ch, text, f"{tag}{i}")
    nachher = ""
    for _ in range(40):  # the pixie serves the pairs in turn (other tests' pairs may come first), and the
        assert _pixie_runde(settings)["status"] in ("gelaufen", "gesperrt")  # system's own pixie may hold
        nachher += _prompts(llm)  # the round: until this pair's task ran (reading ends the recording)
        if "wannsee" in nachher:
            break
        llm.record.remote(True).result()
        time.sleep(0.5)
    assert [w for w in WOERTER if w in nachher] == []
    assert "papagei" in nachher and "wannsee" in nachher  # the turns and the pixie's other task were recorded
    # bad input: ids that are no memory ids, too many of them
    r = client.post(f"/v1/pairs/{user}/{ch}/memories/forget", json={"q": "x", "confirm": ["bogus-1"]},
                    headers=auth(key))
    assert r.status_code == 422
    assert client.post(f"/v1/pairs/{user}/{ch}/memories/forget", json={"q": ""}, headers=auth(key)).status_code == 422
