"""The full chains with the real tiny model: agents through the planner, found again later; an
impulse turn; the self-trigger limit; background writes visible to the next turn."""

import pytest
import ray

from actors.pair import MAX_SELF_TRIGGERS
from actors.activation import pair_actor
from core.wire import EventDropped, PairEventRequest, TurnResult
from memory import ausstehender_auftrag, lzg, pg
from tests.conftest import auth, pg_call, redis_call, wait_for

pytestmark = pytest.mark.e2e


def _post(client, key, user, character, text):
    r = client.post(f"/v1/pairs/{user}/{character}/turns", json={"text": text}, headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()


def _decisions(settings, user, character, turn_id):
    rows = wait_for(lambda: pg_call(settings.database_url, pg.pipeline_rows, user, character, turn_id))
    return [(x["entscheidung"], x["outcome"]) for x in rows if x["art"] == "switch"]


def _agents(settings, user, character):
    """What the planner and the agents did in each turn of the pair: read when a test fails."""
    rows = pg_call(settings.database_url, pg.pipeline_rows, user, character)
    return "\n".join(f'{x["turn_id"][-6:]} {x["entscheidung"]} {x["outcome"]} {x["inputs"]}' for x in rows
                     if x["node"] in ("planner", "agent_dispatch", "router"))


def test_note_and_appointment_through_the_agents_are_found_later(client, keys, settings, character):
    ch = character("agents")
    first = _post(client, keys["alice"], "alice", ch, "Notiz Einkauf: Milch, Brot und Kaese")
    second = _post(client, keys["alice"], "alice", ch, "Trag einen Termin ein: Zahnarzt, morgen um 14 Uhr")
    d1 = _decisions(settings, "alice", ch, first["turn_id"])
    assert ("agent_dispatch.zustellung", "abgeschlossen") in d1, _agents(settings, "alice", ch)
    d2 = _decisions(settings, "alice", ch, second["turn_id"])
    assert ("agent_dispatch.zustellung", "abgeschlossen") in d2, _agents(settings, "alice", ch)
    # a later turn finds both again: the note in the proactive listing, the appointment in the window
    third = _post(client, keys["alice"], "alice", ch, "Was steht eigentlich an?")
    from ray import serve

    store = serve.get_deployment_handle("Store", app_name="novaberg")
    notes = store.call.remote("notizen.find_by_keyword", "alice", "Einkauf").result()
    assert any(n.inhalt == "Milch, Brot und Kaese" for n in notes), f"{notes}\n{_agents(settings, 'alice', ch)}"
    window = store.call.remote("timeline.proaktives_fenster", "alice", ch, settings.timezone).result()
    assert [(t.titel, t.bezug) for t in window] == [("Zahnarzt", "morgen")], _agents(settings, "alice", ch)
    assert window[0].beginn_lokal[11:16] == "14:00"
    d3 = _decisions(settings, "alice", ch, third["turn_id"])
    assert ("reducer.zusammenfuehrung", "eintraege") in d3  # both reached the memory context


def test_impulse_turn_and_the_self_trigger_limit(client, keys, settings, character):
    ch = character("impulse")
    _post(client, keys["alice"], "alice", ch, "Ich gehe morgen wandern.")
    r = client.post(f"/v1/pairs/alice/{ch}/events", json={"kind": "impulse", "eigener_gedanke": "Ob das Wetter haelt?"},
                    headers=auth(keys["operator"]))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["herkunft"] == "eigener_impuls" and body["eigener_gedanke"] == "Ob das Wetter haelt?"
    d = _decisions(settings, "alice", ch, body["turn_id"])
    assert ("responder.nachricht", "verlauf_mit_auftrag") in d
    hist = client.get(f"/v1/pairs/alice/{ch}/turns", headers=auth(keys["alice"])).json()["turns"]
    assert hist[-2]["sprecher"] == f"{body['character_name']} (eigener Gedanke)"
    assert hist[-2]["inhalt"] == "Ob das Wetter haelt?"
    assert client.post(f"/v1/pairs/alice/{ch}/events", json={"kind": "impulse", "eigener_gedanke": "x"},
                       headers=auth(keys["alice"])).status_code == 403
    # self-triggers: MAX_SELF_TRIGGERS run, the next is dropped and counted
    actor = pair_actor(settings, "alice", ch)
    outs = [ray.get(actor.event.remote(PairEventRequest(kind="continue", eigener_gedanke=f"Nachgedanke {i}")))
            for i in range(MAX_SELF_TRIGGERS + 1)]
    assert all(isinstance(o, TurnResult) for o in outs[:MAX_SELF_TRIGGERS]), outs
    assert outs[-1] == EventDropped(reason="max_self_triggers", counter=MAX_SELF_TRIGGERS + 1)
    # a message of the human resets the counter: the next continue is not dropped at the limit — it
    # runs, unless the model's planner left an order waiting for the human's answer (then the seed's
    # other lock holds it, pending_agent)
    _post(client, keys["alice"], "alice", ch, "Da bin ich wieder.")
    assert redis_call(settings.redis_url, lambda r: r.exists(f"selftrigger:alice:{ch}")) == 0
    waiting = redis_call(settings.redis_url, ausstehender_auftrag.offen, "alice", ch)
    out = ray.get(actor.event.remote(PairEventRequest(kind="continue", eigener_gedanke="Noch etwas.")))
    assert isinstance(out, TurnResult) if not waiting else out == EventDropped(reason="pending_agent"), (out, waiting)


def test_background_writes_are_visible_to_the_next_turn(client, keys, settings, character):
    ch = character("bg")
    first = _post(client, keys["alice"], "alice", ch, "Mein Hund Bello ist heute krank geworden, ich mache mir Sorgen.")
    # the reply came back before the background chain ran; its writes arrive through the outbox
    rows = wait_for(lambda: [x for x in pg_call(settings.database_url, pg.pipeline_rows, "alice", ch, first["turn_id"])
                             if x["node"] == "aufgriff"], timeout=120)
    assert rows
    assert pg_call(settings.database_url, lzg.count_nodes, "alice", ch) >= 1  # praegung imprinted the turn
    second = _post(client, keys["alice"], "alice", ch, "Weisst du noch, was mit Bello ist?")
    d = _decisions(settings, "alice", ch, second["turn_id"])
    assert any(k == "enricher.rewrite" for k, _ in d)  # the memory search ran: there was memory now
    rows2 = pg_call(settings.database_url, pg.pipeline_rows, "alice", ch, second["turn_id"])
    verschiebung = [x for x in rows2 if x["entscheidung"] == "enricher.verschiebung"]
    assert verschiebung and verschiebung[-1]["outcome"] != "keine_gedaechtnis_suche"  # memory existed now
