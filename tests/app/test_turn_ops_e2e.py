"""Rewind, regenerate and edit through the API, with the whole system: afterwards every store of
the pair is as it is for a pair that never had the turns taken back (two users talk to the same
character with the same turn ids; one of them takes a turn back), also when the pair's actor is
killed while it takes them back; a regenerated reply stays as a swipe; a taken-back turn_id is
not run again."""
import threading
import uuid

import pytest
import ray

from actors.background import erledigt_key
from actors.activation import pair_actor
from core.wire import EventDropped, PairEventRequest
from memory import erasure, kzg, pg
from tests.conftest import auth, pg_call, redis_call, wait_for

pytestmark = pytest.mark.e2e

VERGAENGLICH = {"created_at", "updated_at", "time", "zuletzt", "anker", "verstaerkt_am", "stand", "received_at",
                "timings", "at", "exported_at", "id", "nr", "von_id", "nach_id", "knoten_id", "ms", "dauer_ms",
                "beginn", "seq", "knoten", "ziele", "lzg_resonanz_ids", "episode", "anschluss",
                "zeitpunkt"}
"""Fields that differ between two pairs that had the same conversation: clocks and durations, the
order in which nodes that ran side by side were logged, and the serial ids of rows."""
EIGENE = ("zurueckgenommen:", "ruecknahme:", "pair:seq", "inflight:", "selftrigger:", "novaberg:outbox", "ops:",
          "pair:turns:")
"""The retraction's own records and its admission (`ops:`), the pair's arrival counters (they never
go back), the key index (its scores are the turns' clocks; tests/stores/test_ruecknahme.py compares
it), and the outbox (its processed jobs leave it by a trim of their own time; `_keine_jobs` looks at it)."""


def _gleich(x, user: str):
    """A stored value with the user's id, the clocks and the serial ids taken out."""
    if isinstance(x, dict):
        return {_gleich(k, user): _gleich(v, user) for k, v in x.items() if k not in VERGAENGLICH and
                not str(k).endswith(("_ms", "_at"))}
    if isinstance(x, list):
        return [_gleich(v, user) for v in x]
    if isinstance(x, str):
        import json

        try:
            parsed = json.loads(x)
        except ValueError:
            return x.replace(user, "U")
        if isinstance(parsed, float) and parsed > 1e9:  # a clock's reading (a marker's value)
            return "T"
        return _gleich(parsed, user) if isinstance(parsed, (dict, list)) else x.replace(user, "U")
    return x


def _keine_jobs(settings, user: str, turn_ids: list[str]) -> None:
    """No job of the taken-back turns is left in the outbox or among the dead letters."""
    from memory import outbox, ruecknahme

    for stream in (outbox.OUTBOX_STREAM, outbox.DEAD_STREAM):
        entries = redis_call(settings.redis_url, lambda rd: rd.xrange(stream))
        assert not [e for _, f in entries if outbox.job_owner(f[b"job"])[0] == user
                    and ruecknahme.job_turn(f[b"job"]) in turn_ids]


def _bild(settings, user: str) -> dict:
    tables = {t: sorted(map(repr, _gleich(pg_call(settings.database_url, erasure.export_table, user, t), user)))
              for t in erasure.EXPORT_TABLES if t != "zurueckgenommene_turns"}
    keys = redis_call(settings.redis_url, erasure.export_keys, user)
    keys = {k.replace(user, "U"): _gleich(v, user) for k, v in keys.items()
            if not k.startswith(EIGENE) and not k.endswith(":version")}
    return {"pg": tables, "redis": keys}


def _unterschiede(a: dict, b: dict) -> dict:
    """Per table (the rows only one side holds) and per key (both values) where the two differ."""
    out = {}
    for k in set(a["pg"]) | set(b["pg"]):
        x, y = a["pg"].get(k, []), b["pg"].get(k, [])
        if x != y:
            out[f"pg:{k}"] = ([r for r in x if r not in y], [r for r in y if r not in x])
    for k in set(a["redis"]) | set(b["redis"]):
        if a["redis"].get(k) != b["redis"].get(k):
            out[f"redis:{k}"] = (a["redis"].get(k), b["redis"].get(k))
    return out


def _reden(client, settings, user, key, ch, text, turn_id) -> dict:
    r = client.post(f"/v1/pairs/{user}/{ch}/turns", json={"text": text, "turn_id": turn_id}, headers=auth(key))
    assert r.status_code == 200, r.text
    _fertig(settings, user, ch, turn_id)
    return r.json()


def _fertig(settings, user, ch, turn_id) -> None:
    """The turn's background work has run: nothing of it is still on its way to a store."""
    wait_for(lambda: redis_call(settings.redis_url, lambda rd: rd.exists(erledigt_key(user, ch, turn_id))), timeout=90)
    wait_for(lambda: pg_call(settings.database_url, pg.turn_record, user, ch, turn_id) is not None, timeout=60)


TEXTE = ("Ich heisse Erin und segle gern.", "Mein Bruder heisst Jonas.", "Ich habe Angst vor Hunden.")


def _paar(settings) -> tuple[str, str]:
    user = f"erin{uuid.uuid4().hex[:6]}"
    return user, pg_call(settings.database_url, pg.create_api_key, user)


def test_rewind_leaves_the_pair_as_one_that_never_had_the_turn(client, settings, character):
    ch, tag = character("rewind"), uuid.uuid4().hex[:8]
    (a, a_key), (b, b_key) = _paar(settings), _paar(settings)
    for i, text in enumerate(TEXTE):
        _reden(client, settings, a, a_key, ch, text, f"{tag}{i}")
    for i, text in enumerate(TEXTE[:2]):
        _reden(client, settings, b, b_key, ch, text, f"{tag}{i}")
    r = client.post(f"/v1/pairs/{a}/{ch}/turns/rewind", json={"n": 1, "op_id": f"op{tag}"}, headers=auth(a_key))
    assert r.status_code == 200, r.text
    assert r.json()["zurueckgenommen"] == [f"{tag}2"] and r.json()["by_store"]["pg:turns"] == 1
    # a thought Nova planned in the taken-back turn, delivered late, is dropped and writes nothing
    actor = pair_actor(settings, a, ch)
    late = ray.get(actor.event.remote(PairEventRequest(kind="impulse", eigener_gedanke="Ob Erin Hunde mag?",
                                                       turn_id=f"imp-{tag}2-late", aus_turn=f"{tag}2")), timeout=120)
    assert isinstance(late, EventDropped) and late.reason == "zurueckgenommen"
    diff = _unterschiede(_bild(settings, a), _bild(settings, b))
    assert not diff, "\n".join(f"{k}: {v}" for k, v in diff.items())
    _keine_jobs(settings, a, [f"{tag}2"])
    # the same op_id answers what it did and takes nothing more back
    again = client.post(f"/v1/pairs/{a}/{ch}/turns/rewind", json={"n": 1, "op_id": f"op{tag}"}, headers=auth(a_key))
    assert again.status_code == 200 and again.json()["zurueckgenommen"] == [f"{tag}2"]
    assert len(client.get(f"/v1/pairs/{a}/{ch}/turns", headers=auth(a_key)).json()["turns"]) == 4
    # the taken-back turn_id is not run again; another person's key takes nothing of hers back
    r = client.post(f"/v1/pairs/{a}/{ch}/turns", json={"text": TEXTE[2], "turn_id": f"{tag}2"}, headers=auth(a_key))
    assert r.status_code == 409 and r.json()["error"]["type"] == "turn_retracted"
    assert client.post(f"/v1/pairs/{a}/{ch}/turns/rewind", json={}, headers=auth(b_key)).status_code == 403


def test_rewind_with_the_pair_actor_killed_in_the_middle_ends_the_same(client, settings, character, system):
    ch, tag = character("kill"), uuid.uuid4().hex[:8]
    (a, a_key), (b, b_key) = _paar(settings), _paar(settings)
    for i, text in enumerate(TEXTE):
        _reden(client, settings, a, a_key, ch, text, f"{tag}{i}")
    _reden(client, settings, b, b_key, ch, TEXTE[0], f"{tag}0")
    body = {"n": 2, "op_id": f"op{tag}"}
    first: dict = {}
    t = threading.Thread(target=lambda: first.update(r=client.post(f"/v1/pairs/{a}/{ch}/turns/rewind", json=body,
                                                                   headers=auth(a_key))))
    t.start()

    def live_actor():  # the pair's actor (an idle one evicted itself: the rewind makes it again)
        try:
            return pair_actor(settings, a, ch)
        except ValueError:
            return None

    ray.kill(wait_for(live_actor, timeout=60, interval=0.05), no_restart=False)  # Ray restarts it; the operation is finished by the next call at the latest
    t.join(120)
    r = client.post(f"/v1/pairs/{a}/{ch}/turns/rewind", json=body, headers=auth(a_key))
    assert r.status_code == 200, r.text
    assert r.json()["zurueckgenommen"] == [f"{tag}1", f"{tag}2"]
    diff = _unterschiede(_bild(settings, a), _bild(settings, b))
    assert not diff, "\n".join(f"{k}: {v}" for k, v in diff.items())
    _keine_jobs(settings, a, [f"{tag}1", f"{tag}2"])


def test_regenerate_answers_again_and_keeps_the_old_reply_as_a_swipe(client, settings, character):
    ch, tag = character("regen"), uuid.uuid4().hex[:8]
    (a, a_key), (b, b_key) = _paar(settings), _paar(settings)
    old = _reden(client, settings, a, a_key, ch, TEXTE[0], f"{tag}0")
    r = client.post(f"/v1/pairs/{a}/{ch}/turns/regenerate", json={"turn_id": f"{tag}r"}, headers=auth(a_key))
    assert r.status_code == 200, r.text
    new = r.json()["turn"]
    assert new["turn_id"] == f"{tag}r" and r.json()["zurueckgenommen"] == [f"{tag}0"]
    _fertig(settings, a, ch, f"{tag}r")
    swipes = client.get(f"/v1/pairs/{a}/{ch}/turns/{tag}r/swipes", headers=auth(a_key)).json()["swipes"]
    assert [(s["turn_id"], s["reply"]) for s in swipes] == [(f"{tag}0", old["reply"])]
    history = client.get(f"/v1/pairs/{a}/{ch}/turns", headers=auth(a_key)).json()["turns"]
    assert [(t["rolle"], t["inhalt"]) for t in history] == [("user", TEXTE[0]), ("assistant", new["reply"])]
    # every store as for a pair whose first turn was the regenerated one — but for the swipe
    _reden(client, settings, b, b_key, ch, TEXTE[0], f"{tag}r")
    diff = _unterschiede(_bild(settings, a), _bild(settings, b))
    assert set(diff) == {"pg:antwort_varianten"}, diff


def test_a_retried_regenerate_replays_and_takes_nothing_back(client, settings, character):
    """The same turn id answers its stored result: a regenerate sent again (a client's retry, without
    the op_id) or one that names the last turn's own id takes nothing back and runs no new turn."""
    ch, tag = character("regen2"), uuid.uuid4().hex[:8]
    a, a_key = _paar(settings)
    old = _reden(client, settings, a, a_key, ch, TEXTE[0], f"{tag}0")
    own = client.post(f"/v1/pairs/{a}/{ch}/turns/regenerate", json={"turn_id": f"{tag}0"}, headers=auth(a_key))
    assert own.status_code == 200, own.text
    assert own.json()["zurueckgenommen"] == [] and own.json()["turn"]["reply"] == old["reply"]
    assert own.json()["turn"]["replayed"] is True
    first = client.post(f"/v1/pairs/{a}/{ch}/turns/regenerate", json={"turn_id": f"{tag}r"}, headers=auth(a_key))
    assert first.status_code == 200 and first.json()["zurueckgenommen"] == [f"{tag}0"]
    _fertig(settings, a, ch, f"{tag}r")
    again = client.post(f"/v1/pairs/{a}/{ch}/turns/regenerate", json={"turn_id": f"{tag}r"}, headers=auth(a_key))
    assert again.status_code == 200, again.text
    assert again.json()["zurueckgenommen"] == [] and again.json()["turn"]["reply"] == first.json()["turn"]["reply"]
    history = client.get(f"/v1/pairs/{a}/{ch}/turns", headers=auth(a_key)).json()["turns"]
    assert [(t["rolle"], t["turn_id"]) for t in history] == [("user", f"{tag}r"), ("assistant", f"{tag}r")]
    rows = pg_call(settings.database_url, erasure.export_table, a, "turns")
    assert [t["turn_id"] for t in rows] == [f"{tag}r"]  # the record of the new turn stays, once


@pytest.mark.parametrize("turn_id", ["begruessung", "imp-7", "import-3"])
def test_a_reserved_turn_id_is_refused(client, settings, character, turn_id):
    ch = character("reserviert")
    a, a_key = _paar(settings)
    for path, body in ((f"/v1/pairs/{a}/{ch}/turns", {"text": "Hallo", "turn_id": turn_id}),
                       (f"/v1/pairs/{a}/{ch}/turns/regenerate", {"turn_id": turn_id})):
        r = client.post(path, json=body, headers=auth(a_key))
        assert r.status_code == 422, r.text
        assert "reserved" in r.text


def test_edit_answers_the_changed_message_in_place_of_the_old(client, settings, character):
    ch, tag = character("edit"), uuid.uuid4().hex[:8]
    a, a_key = _paar(settings)
    _reden(client, settings, a, a_key, ch, TEXTE[0], f"{tag}0")
    _reden(client, settings, a, a_key, ch, "Mein Bruder heisst Jonsa.", f"{tag}1")
    r = client.post(f"/v1/pairs/{a}/{ch}/turns/edit", json={"text": TEXTE[1], "turn_id": f"{tag}e"},
                    headers=auth(a_key))
    assert r.status_code == 200, r.text
    _fertig(settings, a, ch, f"{tag}e")
    history = client.get(f"/v1/pairs/{a}/{ch}/turns", headers=auth(a_key)).json()["turns"]
    assert [t["inhalt"] for t in history if t["rolle"] == "user"] == [TEXTE[0], TEXTE[1]]
    rows = pg_call(settings.database_url, erasure.export_table, a, "turns")
    assert sorted(t["user_text"] for t in rows) == sorted(TEXTE[:2])
    # every store as for a pair whose second message was the edited one from the start
    b, b_key = _paar(settings)
    _reden(client, settings, b, b_key, ch, TEXTE[0], f"{tag}0")
    _reden(client, settings, b, b_key, ch, TEXTE[1], f"{tag}e")
    diff = _unterschiede(_bild(settings, a), _bild(settings, b))
    assert not diff, "\n".join(f"{k}: {v}" for k, v in diff.items())
    # nothing to take back for a pair without a message
    other = character("leer")
    r = client.post(f"/v1/pairs/{a}/{other}/turns/regenerate", headers=auth(a_key))
    assert r.status_code == 409 and r.json()["error"]["type"] == "nothing_to_retract"


def test_the_chat_changes_regenerates_and_takes_back(system, client, keys, monkeypatch, capsys, character):
    from cluster import cli
    from tests.app.conftest import cli_against

    ch = character("chat")
    cli_against(monkeypatch, system, keys["operator"])
    messages = ["Hallo.", "Mein Bruder heisst Jonsa.", "/aendern Mein Bruder heisst Jonas.", "/aendern", "/neu",
                "/zurueck x", "/zurueck 1", ""]
    argv = ["chat", "--user", "alice", "--character", ch]
    for m in messages:
        argv += ["--message", m]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("(1 turn(s) taken back)") == 3, out
    assert "(/aendern needs the changed message" in out and "(/zurueck takes a number" in out
    turns = client.get(f"/v1/pairs/alice/{ch}/turns", headers=auth(keys["alice"])).json()["turns"]
    assert [t["inhalt"] for t in turns if t["rolle"] == "user"] == ["Hallo."]


def test_the_person_sees_what_nova_remembers_and_forgets_one(client, settings, character):
    ch, tag = character("mem"), uuid.uuid4().hex[:8]
    (a, a_key), (b, b_key) = _paar(settings), _paar(settings)
    _reden(client, settings, a, a_key, ch, TEXTE[2], f"{tag}0")
    r = client.get(f"/v1/pairs/{a}/{ch}/memories", headers=auth(a_key))
    assert r.status_code == 200, r.text
    items = r.json()["memories"]
    assert items and all(i["turn_id"] == f"{tag}0" and i["aus"]["text"] == TEXTE[2] for i in items
                         if i["art"] == "erinnerung"), items
    node = next(i for i in items if i["art"] == "erinnerung")
    # the short-term memory of the exchange (salience's entry, written here whatever its score) and another
    vec = [1.0] * 384
    redis_call(settings.redis_url, lambda rd: kzg.add_entry(rd, a, ch, f"Person B: {TEXTE[2]}", vec,
                                                            quelle=f"{tag}0", entry_id=f"turn-{tag}0"))
    redis_call(settings.redis_url, lambda rd: kzg.add_entry(rd, a, ch, "Person B: Ich mag Tee.", vec,
                                                            quelle="anders", entry_id=f"x{tag}"))
    items = client.get(f"/v1/pairs/{a}/{ch}/memories", headers=auth(a_key)).json()["memories"]
    assert {(i["id"], i["turn_id"]) for i in items if i["art"] == "kurzzeit"} >= {(f"kzg-turn-{tag}0", f"{tag}0"),
                                                                                (f"kzg-x{tag}", "anders")}
    assert client.get(f"/v1/pairs/{a}/{ch}/memories", headers=auth(b_key)).status_code == 403
    assert client.delete(f"/v1/pairs/{a}/{ch}/memories/{node['id']}", headers=auth(b_key)).status_code == 403
    assert client.delete(f"/v1/pairs/{a}/{ch}/memories/bogus-1", headers=auth(a_key)).status_code == 422
    r = client.delete(f"/v1/pairs/{a}/{ch}/memories/{node['id']}", headers=auth(a_key))
    assert r.status_code == 200, r.text
    assert r.json()["kurzzeit"] == 1  # the exchange's short-term entry went with it, the other stayed
    left = {i["id"] for i in client.get(f"/v1/pairs/{a}/{ch}/memories", headers=auth(a_key)).json()["memories"]}
    assert node["id"] not in left and f"kzg-turn-{tag}0" not in left and f"kzg-x{tag}" in left
    assert redis_call(settings.redis_url, lambda rd: rd.hexists(f"kzg:{a}:{ch}:entries", f"turn-{tag}0")) == 0
    r = client.delete(f"/v1/pairs/{a}/{ch}/memories/{node['id']}", headers=auth(a_key))
    assert r.status_code == 404 and r.json()["error"]["type"] == "unknown_memory"
    r = client.delete(f"/v1/pairs/{a}/{ch}/memories/kzg-x{tag}", headers=auth(a_key))
    assert r.status_code == 200 and r.json()["kurzzeit"] == 1
    assert client.delete(f"/v1/pairs/{a}/{ch}/memories/kzg-x{tag}", headers=auth(a_key)).status_code == 404


ZAEHLER = ("pair:seq:", "pair:seqstarted:", "inflight:", "ops:", "user:paare:")
"""Keys no turn owns: the pair's arrival counters (they never go back), the admission leases and
the index of the user's pairs (a pair stays the user's whatever its turns)."""
NICHT_VOM_TURN = ("api_keys", "dateien", "aufzeichnungen")
"""Tables no turn writes: the person's keys, the files given to the pair (docs/TURN_WRITES.md)."""


def test_everything_a_turn_writes_carries_its_turn_id(client, settings, character):
    """Provenance: after one turn of a new pair (and its background work), every row of every table
    and every key of the person either carries the turn's id, or its change is kept as the turn's
    before-image (`turn_vorher`, `vorher:…:{turn}`) — or it is one of the counters no turn owns."""
    import json

    from memory import vorher

    ch, tag = character("herkunft"), uuid.uuid4().hex[:8]
    a, a_key = _paar(settings)
    t = f"{tag}0"
    _reden(client, settings, a, a_key, ch, "Ich heisse Ida. Notiere bitte: Boot putzen.", t)
    bilder = pg_call(settings.database_url, erasure.export_table, a, "turn_vorher")
    gemacht = {(b["tabelle"], json.dumps(b["schluessel"], sort_keys=True)) for b in bilder if b["turn_id"] == t}
    ohne = []
    for table in set(erasure.EXPORT_TABLES) - set(NICHT_VOM_TURN):
        for row in pg_call(settings.database_url, erasure.export_table, a, table):
            key = {k: row[k] for k in vorher.TABELLEN.get(table, ())}
            if t not in json.dumps(row, default=str) and (table, json.dumps(key, sort_keys=True)) not in gemacht:
                ohne.append((table, row))
    keys = redis_call(settings.redis_url, erasure.export_keys, a)
    vorher_keys = set(keys.get(f"vorher:{a}:{ch}:{t}", {}))
    for k, v in keys.items():
        if k.startswith(ZAEHLER) or k.endswith(":version") or t in k or t in json.dumps(v) or k in vorher_keys:
            continue
        ohne.append((k, v))
    assert not ohne, ohne
    assert {row["tabelle"] for row in bilder} >= {"pair_profiles", "nova_emotion"}
