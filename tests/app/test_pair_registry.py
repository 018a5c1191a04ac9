"""One live actor per pair at any moment (actors/registry.py, actors/activation.py): a pair's
process comes warm from the reserve; two replicas racing to activate one pair end on one actor; an
actor killed during its hand-over, or replaced under a newer token, serves the pair no more."""
import asyncio
import uuid

import pytest
import ray
from redis import Redis

from actors import activation, registry
from core.settings import Settings
from tests.conftest import auth, wait_for

pytestmark = pytest.mark.e2e


def _reserve(settings) -> list[str]:
    r = Redis.from_url(settings.redis_url)
    try:
        return [n.decode() for n in r.lrange(registry.reserve_key(), 0, -1)]
    finally:
        r.close()


def _stand(settings, user, ch) -> registry.Eintrag | None:
    r = Redis.from_url(settings.redis_url)
    try:
        return registry.Eintrag.lesen(r.hget(registry.BESITZ, registry.pair_name(user, ch)))
    finally:
        r.close()


def _process(settings, user, ch) -> str:
    return ray.get(activation.pair_actor(settings, user, ch).status.remote(), timeout=60)["process"]


@ray.remote(num_cpus=0)
def _activate(settings: dict, user: str, ch: str) -> str:
    """One activation as an ingress replica makes it, in a process of its own."""
    from memory.redis_client import verbinden

    s = Settings(**settings)

    async def go():
        r = verbinden(s.redis_url, 5.0)
        try:
            h = await activation.aktivieren(r, s, user, ch)
            return (await h.status.remote())["process"]
        finally:
            await r.aclose()

    return asyncio.run(go())


def test_a_new_pair_is_served_by_a_warm_spare_and_the_reserve_refills(client, keys, settings, character):
    ch = character("reserve")
    wait_for(lambda: len(_reserve(settings)) >= settings.pair_spares, timeout=120)
    ready = set(_reserve(settings))
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Hallo"}, headers=auth(keys["alice"]))
    assert r.status_code == 200, r.text
    served_by = _process(settings, "alice", ch)
    assert served_by in ready  # a spare that was waiting, not a process started for the turn
    assert served_by not in _reserve(settings)
    wait_for(lambda: len(_reserve(settings)) >= settings.pair_spares, timeout=120)  # refilled
    stand = _stand(settings, "alice", ch)
    assert stand is not None and stand.aktor == served_by


def test_two_replicas_racing_to_activate_one_pair_end_on_one_actor(settings, system, character):
    ch = character("race")
    dump = settings.model_dump(mode="json", by_alias=False)
    for i in range(4):
        user = f"race{i}-{uuid.uuid4().hex[:4]}"
        won = ray.get([_activate.remote(dump, user, ch) for _ in range(2)], timeout=180)
        assert won[0] == won[1], won  # both callers hold the same process
        assert _stand(settings, user, ch).aktor == won[0]
        assert _serving(settings, user, ch) == [won[0]]  # the loser's spare serves nobody


def _serving(settings, user, ch) -> list[str]:
    """Every live pair process that says it serves the pair."""
    found = []
    for a in ray.util.list_named_actors(all_namespaces=True):
        if a["namespace"] != settings.namespace or not a["name"].startswith(registry.HOST_PREFIX):
            continue
        try:
            st = ray.get(ray.get_actor(a["name"], namespace=settings.namespace).status.remote(), timeout=60)
        except (registry.PairSuperseded, ray.exceptions.RayActorError, ValueError):
            continue  # a spare, or gone
        if (st["user_id"], st["character_id"]) == (user, ch):
            found.append(st["process"])
    return found


def test_an_actor_killed_during_its_hand_over_is_passed_over(client, keys, settings, character):
    """A replica claimed a spare for the pair and the spare died before it was bound: the next
    activation claims past the dead entry under a newer token, and the turn is answered."""
    ch = character("handover")
    name, h = activation.host_starten(settings)
    ray.get(h.vorwaermen.remote(), timeout=120)
    won, stand = asyncio.run(_claim(settings, registry.pair_name("alice", ch), name))
    assert won
    ray.kill(h, no_restart=True)  # gone between the claim and `binden`
    wait_for(lambda: activation.handle_by_name(name, settings) is None, timeout=30)
    resp = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Bist du da?"}, headers=auth(keys["alice"]))
    assert resp.status_code == 200, resp.text
    after = _stand(settings, "alice", ch)
    assert after.aktor != name and after.token > stand.token
    assert _serving(settings, "alice", ch) == [after.aktor]


async def _claim(settings, pair, name):
    from memory.redis_client import verbinden

    r = verbinden(settings.redis_url, 5.0)
    try:
        return await registry.beanspruchen(r, pair, await registry.eintrag(r, pair), name)
    finally:
        await r.aclose()


def _served_and_a_spare(client, keys, settings, ch):
    """The pair served after one turn: its entry, its process, and a warm spare of no pair."""
    h = auth(keys["alice"])
    assert client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Eins"}, headers=h).status_code == 200
    old = _stand(settings, "alice", ch)
    name, spare = activation.host_starten(settings)
    ray.get(spare.vorwaermen.remote(), timeout=120)
    return h, old, activation.handle_by_name(old.aktor, settings), name


def test_an_actor_replaced_under_a_newer_token_refuses_the_pair_and_exits(client, keys, settings, character):
    ch = character("fence")
    h, old, old_actor, name = _served_and_a_spare(client, keys, settings, ch)
    won, new = asyncio.run(_claim(settings, registry.pair_name("alice", ch), name))
    assert won and new.token > old.token
    from core.wire import PairTurnRequest

    with pytest.raises(registry.PairSuperseded):  # the fence: the old process writes nothing of the turn
        ray.get(old_actor.turn.remote(PairTurnRequest(text="Zwei", turn_id=uuid.uuid4().hex)), timeout=120)
    wait_for(lambda: activation.handle_by_name(old.aktor, settings) is None, timeout=30)  # it exited
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Drei"}, headers=h)
    assert r.status_code == 200, r.text
    assert _serving(settings, "alice", ch) == [name]
    texts = [t["inhalt"] for t in client.get(f"/v1/pairs/alice/{ch}/turns", headers=h).json()["turns"]]
    assert "Zwei" not in texts and texts.count("Drei") == 1


def test_a_turn_whose_process_was_replaced_mid_turn_is_committed_only_by_the_new_one(client, keys, settings,
                                                                                      character):
    """The pair is handed to another process while a turn runs in the old one (past the fence at
    its start): the old one's commit is refused by the commit's own fence, nothing of the turn is
    stored by it, and the same turn_id at the door is answered by the new process, stored once."""
    import time

    from core.wire import PairTurnRequest
    from memory import session
    from tests.app.conftest import LATENCY_S
    from tests.conftest import redis_call

    ch = character("zaun")
    h, _, old_actor, name = _served_and_a_spare(client, keys, settings, ch)
    turn_id = uuid.uuid4().hex
    ref = old_actor.turn.remote(PairTurnRequest(text="Zwei", turn_id=turn_id))
    wait_for(lambda: ray.get(old_actor.status.remote(), timeout=30)["busy"], timeout=60, interval=0.02)
    time.sleep(1.5 * LATENCY_S)  # past the turn's start: its first model call is under way
    won, _ = asyncio.run(_claim(settings, registry.pair_name("alice", ch), name))
    assert won
    with pytest.raises(registry.PairSuperseded):
        ray.get(ref, timeout=120)

    def entries():
        turns = redis_call(settings.redis_url, session.load_turns, "alice", ch, 100)
        return [t for t in turns if t.get("turn_id") == turn_id]

    assert entries() == []  # the replaced process stored nothing of it
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Zwei", "turn_id": turn_id}, headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["replayed"] is False and len(entries()) == 2  # his message and her reply, once
    assert _serving(settings, "alice", ch) == [name]


def _ungebunden(handle) -> bool:
    try:
        ray.get(handle.status.remote(), timeout=60)
    except registry.PairSuperseded:
        return True
    except ray.exceptions.RayActorError:
        return False  # still restarting
    return False


def test_a_process_ray_restarted_that_nobody_calls_gives_its_entry_up_and_exits(client, keys, settings, character):
    """A pair's process crashed and Ray started it again: it serves no pair now. Called by nobody
    for the idle timeout, it gives up the registry's entry that still names it and exits (fallback
    `verwaist`); the pair's next turn is served by another process."""
    import os
    import signal

    ch = character("neustart")
    h = auth(keys["alice"])
    assert client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Eins"}, headers=h).status_code == 200
    old = _stand(settings, "alice", ch)
    actor = activation.handle_by_name(old.aktor, settings)
    os.kill(ray.get(actor.status.remote(), timeout=60)["pid"], signal.SIGKILL)
    wait_for(lambda: _ungebunden(actor), timeout=60)  # back, under the same name, bound to nothing
    wait_for(lambda: activation.handle_by_name(old.aktor, settings) is None, timeout=60)
    assert _stand(settings, "alice", ch) is None
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Zwei"}, headers=h)
    assert r.status_code == 200, r.text
    assert _serving(settings, "alice", ch) == [_stand(settings, "alice", ch).aktor] != [old.aktor]


def test_spares_of_an_old_code_version_go_once_its_keepers_are_gone(client, keys, settings, character):
    """A deployment of new code: the reserve is kept per version of the code, so no activation takes
    a spare that runs the old code; once the old version's keepers are gone, its spares go — and
    those of the list a release before versions left (`pairs:reserve`) — on the next check of a
    keeper of the new code (fallback `alte_fassung`), while a version whose keeper still lives (a
    rolling update) keeps its own."""
    alt, rollend = "a1d000000000", "b2e000000000"
    spares = {}
    for version in (alt, rollend, ""):
        name, h = activation.host_starten(settings)
        ray.get(h.vorwaermen.remote(), timeout=120)
        spares[version] = name
    r = Redis.from_url(settings.redis_url)
    try:
        r.set(registry.LEBT + rollend, "1", ex=600)  # a keeper of that version still runs
        for version, name in spares.items():
            r.rpush(registry.reserve_key(version) if version else registry.RESERVE, name)
        # a new pair is served from this version's reserve (or a process started now), never another's
        ch = character("fassung")
        assert client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Neu hier"},
                           headers=auth(keys["alice"])).status_code == 200
        assert _stand(settings, "alice", ch).aktor not in spares.values()
        # the ingress's keeper sweeps on its next check (every `pair_spares_check_s`)
        for version in (alt, ""):
            wait_for(lambda: activation.handle_by_name(spares[version], settings) is None, timeout=90)
        assert not r.exists(registry.reserve_key(alt)) and not r.exists(registry.RESERVE)
        assert [n.decode() for n in r.lrange(registry.reserve_key(rollend), 0, -1)] == [spares[rollend]]
        assert activation.handle_by_name(spares[rollend], settings) is not None
    finally:
        r.delete(registry.reserve_key(rollend), registry.LEBT + rollend, registry.reserve_key(alt), registry.RESERVE)
        r.close()
        for name in spares.values():
            if (h := activation.handle_by_name(name, settings)) is not None:
                ray.kill(h, no_restart=True)
