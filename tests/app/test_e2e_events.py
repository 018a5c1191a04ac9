"""The push channel: messages Nova produces without being asked (a planned impulse, a `continue`
such as the Thinker's retry) reach an open events stream once committed, and a stream opened
later replays them from its cursor; replies to the human are not pushed."""
import json
import queue
import threading

import httpx
import pytest

from cluster.cli_common import hang_up
from tests.conftest import auth

pytestmark = pytest.mark.e2e


class Listener:
    """Reads a pair's events stream in a thread and hands over (event, id, data) as they come."""

    def __init__(self, url: str, key: str, path: str, cursor: str | None = None):
        self.got: queue.Queue = queue.Queue()
        self._response: httpx.Response | None = None
        headers = {**auth(key), **({"Last-Event-ID": cursor} if cursor else {})}
        self._client = httpx.Client(base_url=url, timeout=httpx.Timeout(10, read=None))
        self._thread = threading.Thread(target=self._read, args=(path, headers), daemon=True)
        self._thread.start()

    def _read(self, path, headers):
        try:
            with self._client.stream("GET", path, headers=headers) as r:
                self._response = r
                if r.status_code != 200:
                    self.got.put(("status", r.status_code, r.read().decode()))
                    return
                event, eid = None, None
                for line in r.iter_lines():
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("id:"):
                        eid = line[3:].strip()
                    elif line.startswith("data:"):
                        self.got.put((event, eid, json.loads(line[5:])))
        except (httpx.HTTPError, httpx.StreamError, OSError, RuntimeError):
            pass  # the stream was closed under the reading thread (`close`)

    def next(self, timeout: float = 60):
        return self.got.get(timeout=timeout)

    def close(self):
        """Hang up: the connection closes at once, so the server frees this user's stream place
        (at most `max_event_streams_per_user` are open at a time)."""
        hang_up(self._response)
        self._client.close()
        self._thread.join(timeout=10)


def _event(client, keys, character, **body):
    r = client.post(f"/v1/pairs/alice/{character}/events", json=body, headers=auth(keys["operator"]))
    assert r.status_code == 200, r.text
    return r.json()


def test_unasked_messages_reach_an_open_stream_and_replay_from_the_cursor(system, client, keys, character):
    ch = character("nova")
    path = f"/v1/pairs/alice/{ch}/events"
    live = Listener(system.url, keys["alice"], path)
    try:
        kind, start, data = live.next()
        assert kind == "bereit" and data["cursor"] == start == "0"
        # a reply to the human is answered in its own response, never pushed
        r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Hallo Nova."}, headers=auth(keys["alice"]))
        assert r.status_code == 200
        impuls = _event(client, keys, ch, kind="impulse", eigener_gedanke="Ich denke an den Garten.")
        kind, first_id, msg = live.next()
        assert kind == "nachricht"
        assert msg["turn_id"] == impuls["turn_id"] and msg["reply"] == impuls["reply"]
        assert msg["herkunft"] == "eigener_impuls" and msg["eigener_gedanke"] == "Ich denke an den Garten."
        # the Thinker's retry arrives as a `continue` of the turn it repeats
        retry = _event(client, keys, ch, kind="continue", user_prompt="Hallo Nova.", thinker_unsicher_retry=True,
                       reiz_herkunft="user")
        kind, second_id, msg = live.next()
        assert kind == "nachricht" and msg["turn_id"] == retry["turn_id"] and msg["herkunft"] == "self_trigger"
        assert second_id > first_id
    finally:
        live.close()

    # nobody listening: a later connect with the last id it saw gets what it missed, in order
    later = _event(client, keys, ch, kind="impulse", eigener_gedanke="Ob es morgen regnet?")
    replay = Listener(system.url, keys["alice"], path, cursor=first_id)
    try:
        assert replay.next()[0] == "bereit"
        got = [replay.next() for _ in range(2)]
        assert [e[1] for e in got][0] == second_id
        assert [m["turn_id"] for _, _, m in got] == [retry["turn_id"], later["turn_id"]]
    finally:
        replay.close()
    # a repeated turn_id is answered from its stored result and pushes nothing again
    again = _event(client, keys, ch, kind="impulse", eigener_gedanke="Ob es morgen regnet?", turn_id=later["turn_id"])
    assert again["replayed"] is True
    everything = Listener(system.url, keys["alice"], path, cursor="0")
    try:
        everything.next()
        ids = [everything.next()[2]["turn_id"] for _ in range(3)]
        assert ids == [impuls["turn_id"], retry["turn_id"], later["turn_id"]]
        with pytest.raises(queue.Empty):
            everything.next(timeout=3)
    finally:
        everything.close()


def test_events_belong_to_the_pairs_user_and_take_a_valid_cursor(system, client, keys, character):
    ch = character("nova")
    path = f"/v1/pairs/alice/{ch}/events"
    other = Listener(system.url, keys["bob"], path)
    assert other.next()[:2] == ("status", 403)
    bad = Listener(system.url, keys["alice"], path, cursor="gestern")
    status, code, body = bad.next()
    assert code == 422 and "cursor" in body
    unknown = Listener(system.url, keys["alice"], "/v1/pairs/alice/gibt-es-nicht/events")
    assert unknown.next()[:2] == ("status", 404)


def test_the_thinkers_retry_reaches_an_open_stream_as_a_second_message(system, client, keys, character):
    """The Thinker cannot decide (its model answers in its reasoning alone, twice): the reply goes
    out with the gesture, the retry runs as its own turn through the pair's event consumer, and
    its message arrives on the events stream, naming the turn it continues — also when the pair actor
    dies right after the reply."""
    from tests.app.conftest import UNSICHER

    ch = character("nova")
    live = Listener(system.url, keys["alice"], f"/v1/pairs/alice/{ch}/events")
    try:
        assert live.next()[0] == "bereit"
        r = client.post(f"/v1/pairs/alice/{ch}/turns", headers=auth(keys["alice"]),
                        json={"text": f"Ist mein Termin am Montag um 14 Uhr? {UNSICHER}"})
        assert r.status_code == 200, r.text
        first = r.json()
        assert first["nachricht_folgt"] is True and first["pruefung"]["status"] == "self_trigger", (first["pruefung"], first["reply"])
        # the pair actor dies right after the reply (seed 000 §3.5: the follow-up is delivered all the
        # same — it went into the outbox with the turn, not into the actor's memory)
        import ray
        from actors.activation import pair_actor
        ray.kill(pair_actor(system.settings, "alice", ch), no_restart=False)
        kind, _, msg = live.next(timeout=120)
        assert kind == "nachricht" and msg["herkunft"] == "self_trigger"
        assert msg["ursprung_turn_id"] == first["turn_id"] and msg["turn_id"] == f"{first['turn_id']}-retry"
        # the retry never triggers again: nothing more arrives
        with pytest.raises(queue.Empty):
            live.next(timeout=5)
    finally:
        live.close()
    turns = client.get(f"/v1/pairs/alice/{ch}/turns", headers=auth(keys["alice"])).json()["turns"]
    assert [t["herkunft"] for t in turns] == ["user", "user", "self_trigger"]


def test_a_self_trigger_waits_while_an_order_waits_for_the_human(client, keys, settings, character):
    """Seed 000 §3.5: beside MAX_SELF_TRIGGERS the event consumer's lock `pending_agent` — Nova
    asked for what an order lacks, so no self-trigger speaks before the human answers; the blocked
    one uses up none of the three."""
    from memory import ausstehender_auftrag as aa
    from tests.conftest import redis_call

    ch = character("nova")
    stand = aa.Stand(turn_id="t-frage", ausgang="neu", auftrag=aa.AusstehenderAuftrag(
        agent="timeline", aktion="anlegen", parameter={"titel": "Zahnarzt"}, fehlt=["wann"],
        angabe="Tag und Uhrzeit des Termins", turn_id="t-frage"))
    assert redis_call(settings.redis_url, _schreiben, "alice", ch, stand)
    r = client.post(f"/v1/pairs/alice/{ch}/events", json={"kind": "continue", "user_prompt": "Noch etwas?"},
                    headers=auth(keys["operator"]))
    assert r.status_code == 409 and r.json()["error"]["type"] == "pending_agent", r.text
    # answered (nothing pending any more): the self-trigger runs and counts
    frei = stand.model_copy(update={"turn_id": "t-antwort", "ausgang": "erledigt", "auftrag": None})
    redis_call(settings.redis_url, _schreiben, "alice", ch, frei)
    out = _event(client, keys, ch, kind="continue", user_prompt="Noch etwas?")
    assert not out.get("dropped") and out["reply"].strip()


async def _schreiben(r, user, character, stand):
    from memory import ausstehender_auftrag as aa

    return await aa.schreiben(r, user, character, stand, gelesen=await aa.geschrieben_von(r, user, character))
