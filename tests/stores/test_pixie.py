"""The pixie: serialised by its lock; a delegation is researched through the guarded web layer
and becomes a `bericht` and a `wissen` entry under the character's real name; a round that dies
after taking a task leaves it to be done again; a task done again writes nothing twice; a task
without a usable answer goes back, and is given up by name after its attempts."""
import asyncio
import json
import uuid

import pytest

from actors import pixie
from actors.delegation import DELEGATIONS
from core.settings import Settings
from memory import bibliothek, charaktere
from memory.config import MemoryConfig
from memory.ops import PoolStore
from pipeline.services import Services
from prompts import PromptLibrary
from tests.conftest import unit, with_pool
from tests.scripted_llm import ScriptedLLM
from tests.web_servers import LocalWeb, WebServers

ANTWORT = '{"titel": "Magnetare", "wissen": "Magnetare sind Neutronensterne mit extrem starkem Magnetfeld."}'


class _Embedder:
    """Unit vectors by text length: enough for the library's topic column. `fail` calls raise."""

    def __init__(self, fail: int = 0):
        self.fail = fail

    async def embed(self, trace, text):
        if self.fail:
            self.fail -= 1
            raise RuntimeError("embedder gone (a crash after the take)")
        return unit(len(text) % 300).tolist()


class _Store(PoolStore):
    """The memory operations in-process; `crash_after` names a library type whose write succeeds
    and then raises, as a round that dies right after the write."""

    def __init__(self, pool):
        super().__init__(pool)
        self.crash_after: str | None = None

    async def _run(self, op, args, kwargs):
        out = await super()._run(op, args, kwargs)
        if op == "bibliothek.add" and args[2] == self.crash_after:
            self.crash_after = None
            raise RuntimeError(f"round died after writing {args[2]}")
        return out


async def _clean(r):
    for pattern in (f"{DELEGATIONS}:*", f"{pixie.IN_ARBEIT}:*"):
        for k in [k async for k in r.scan_iter(pattern)]:
            await r.delete(k)
    await r.delete(pixie.LOCK, pixie.REIHUM)


def _services(p, r, llm, *, web=None, embedder=None, settings=None, store=None):
    services = Services(settings=settings or Settings(), llm=llm, embedder=embedder or _Embedder(),
                        store=store or _Store(p),
                        redis=r, prompts=PromptLibrary(), web=web)
    services.cache["memory_cfg"] = MemoryConfig()
    return services


def _run(stores, migrated, go):
    from redis.asyncio import Redis

    async def outer(p):
        r = Redis.from_url(stores.redis_url)
        try:
            await _clean(r)
            await go(p, r)
        finally:
            await _clean(r)
            await r.aclose()

    asyncio.run(with_pool(migrated.database_url, outer))


async def _lists(r, user, ch):
    queue = [json.loads(x) for x in await r.lrange(f"{DELEGATIONS}:{user}:{ch}", 0, -1)]
    work = [json.loads(x) for x in await r.lrange(f"{pixie.IN_ARBEIT}:{user}:{ch}", 0, -1)]
    return queue, work


def test_delegation_becomes_bericht_and_wissen_under_the_real_name(stores, migrated):
    web_servers = WebServers()

    async def go(p, r):
        ch = f"mira-{uuid.uuid4().hex[:8]}"
        await charaktere.create(p, ch, {"name": "Mira", "identitaet": "Leuchtturmwaerterin"})
        user = "pixie-user"
        llm = ScriptedLLM({"pixie": [ANTWORT]})
        services = _services(p, r, llm, web=LocalWeb(web_servers.settings()), settings=web_servers.settings())
        await r.rpush(f"{DELEGATIONS}:{user}:{ch}", json.dumps({"aufgabe": "Was sind Magnetare?", "turn_id": "t-7"}))
        await r.set(pixie.LOCK, "someone-else", ex=5)
        assert await pixie.pixie_round(services) == {"status": "gesperrt", "geschrieben": 0}
        await r.delete(pixie.LOCK)

        out = await pixie.pixie_round(services)
        assert out["geschrieben"] == 1 and out["ausgaenge"] == ["geschrieben"]
        assert await r.get(pixie.LOCK) is None  # released
        assert await _lists(r, user, ch) == ([], [])  # done: neither queued nor taken

        # the prompt names the real character and carries the research (snippets and the page)
        prompt = "\n".join(m["content"] for m in llm.calls[0]["messages"])
        assert "Mira" in prompt and "Nova" not in prompt
        assert "Schnipsel 1 ueber Magnetare" in prompt and "extrem starken Magnetfeld" in prompt
        assert web_servers.calls["serper"] == 1 and web_servers.calls["pages"] == 1

        entries = await bibliothek.eintraege(p, user, ch)
        assert sorted(e.typ for e in entries) == ["bericht", "wissen"]
        bericht = next(e for e in entries if e.typ == "bericht")
        assert "Aufgabe: Was sind Magnetare?" in bericht.inhalt
        assert f"{web_servers.url}/artikel" in bericht.inhalt
        assert "Recherche: recherchiert ueber serper" in bericht.inhalt
        assert "Wissen »Magnetare« geschrieben" in bericht.inhalt
        # the reading path finds the wissen, never the bericht
        got = await bibliothek.suchen(p, user, ch, unit(len("Magnetare") % 300), MemoryConfig(library_threshold=0.9))
        assert [h.titel for h in got] == ["Magnetare"]
        assert await bibliothek.eintraege(p, user, "nova") == []  # the pair's library, no other's

    try:
        _run(stores, migrated, go)
    finally:
        web_servers.close()


def test_a_crash_after_the_take_leaves_the_task_and_a_redo_writes_nothing_twice(stores, migrated):
    async def go(p, r):
        user, ch = f"pixie-crash-{uuid.uuid4().hex[:8]}", "nova"
        llm = ScriptedLLM({"pixie": [ANTWORT, '{"titel": "Anderer Titel", "wissen": "Anders gesagt."}']})
        services = _services(p, r, llm, embedder=_Embedder(fail=1))  # no web provider: a named fallback
        delegation = json.dumps({"aufgabe": "Was sind Magnetare?", "turn_id": "t-9"})
        await r.rpush(f"{DELEGATIONS}:{user}:{ch}", delegation)

        # 1. the round dies after taking the task, before any write: the task stays taken
        with pytest.raises(RuntimeError, match="embedder gone"):
            await pixie.pixie_round(services)
        assert await r.get(pixie.LOCK) is None
        queue, work = await _lists(r, user, ch)
        assert queue == [] and [t["aufgabe"] for t in work] == ["Was sind Magnetare?"]
        assert await bibliothek.eintraege(p, user, ch) == []

        # 2. the next round takes it back and dies right after writing the wissen
        services.store.crash_after = "wissen"
        with pytest.raises(RuntimeError, match="after writing wissen"):
            await pixie.pixie_round(services)
        assert [e.typ for e in await bibliothek.eintraege(p, user, ch)] == ["wissen"]
        queue, work = await _lists(r, user, ch)
        assert queue == [] and [t["versuche"] for t in work] == [1]

        # 3. done again: the bericht is added, the wissen not written a second time
        out = await pixie.pixie_round(services)
        assert out["wiederaufgenommen"] == 1 and out["ausgaenge"] == ["geschrieben"]
        entries = await bibliothek.eintraege(p, user, ch)
        assert sorted(e.typ for e in entries) == ["bericht", "wissen"]
        assert next(e for e in entries if e.typ == "wissen").titel == "Magnetare"
        bericht = next(e for e in entries if e.typ == "bericht").inhalt
        assert "Recherche: keine_suchmaschine" in bericht and "Versuch 3" in bericht
        assert await _lists(r, user, ch) == ([], [])

        # 4. the same delegation delivered again: done already, no research, no model, no write
        calls = len(llm.calls)
        await r.rpush(f"{DELEGATIONS}:{user}:{ch}", delegation)
        out = await pixie.pixie_round(services)
        assert out["ausgaenge"] == ["bereits_erledigt"] and len(llm.calls) == calls
        assert len(await bibliothek.eintraege(p, user, ch)) == 2
        assert await _lists(r, user, ch) == ([], [])

    _run(stores, migrated, go)


def test_unusable_answers_return_the_task_then_give_it_up(stores, migrated):
    async def go(p, r):
        user, ch = f"pixie-fail-{uuid.uuid4().hex[:8]}", "nova"
        llm = ScriptedLLM({"pixie": ["unbrauchbar"]})
        services = _services(p, r, llm)
        await r.rpush(f"{DELEGATIONS}:{user}:{ch}", json.dumps({"aufgabe": "Was ist Ebbe?", "turn_id": "t-1"}))
        await r.rpush(f"{DELEGATIONS}:{user}:entfernt-{uuid.uuid4().hex[:6]}", json.dumps({"aufgabe": "x"}))

        out = await pixie.pixie_round(services)
        assert sorted(out["ausgaenge"]) == ["verworfen", "zurueck"]  # the removed character's task is dropped
        assert [t["versuche"] for t in (await _lists(r, user, ch))[0]] == [1]
        assert (await pixie.pixie_round(services))["ausgaenge"] == ["zurueck"]
        assert await bibliothek.eintraege(p, user, ch) == []

        out = await pixie.pixie_round(services)
        assert out["ausgaenge"] == ["aufgegeben"] and out["geschrieben"] == 0
        entries = await bibliothek.eintraege(p, user, ch)
        assert [e.typ for e in entries] == ["bericht"]
        assert "aufgegeben: keine verwertbare Antwort des Modells (kein_json)" in entries[0].inhalt
        assert await _lists(r, user, ch) == ([], [])

    _run(stores, migrated, go)


def test_a_delegation_is_queued_once_however_often_its_job_is_delivered(stores, migrated):
    """The background job queues its turn's delegations; a worker that dies after queueing and
    before the job is marked done leaves the job to be delivered again, and salience runs again: a
    model may word the task differently the second time. The second delivery queues nothing, so
    the pixie researches the turn's task once; a second task of the turn, and a task of another
    turn, are queued."""
    from actors.background import schreiben
    from core.state import DelegationSchreiben, Stimulus
    from pipeline.trace import TurnTrace

    async def go(p, r):
        ch, user = f"deleg-{uuid.uuid4().hex[:8]}", "pixie-user"
        services = Services(settings=Settings(), llm=None, embedder=None, store=None, redis=r,
                            prompts=PromptLibrary())

        async def job(turn_id, *aufgaben):
            s = Stimulus(user_id=user, character_id=ch, turn_id=turn_id, user_prompt="Finde etwas heraus.")
            await schreiben(services, TurnTrace(user, ch, turn_id), s, [DelegationSchreiben(aufgabe=a) for a in aufgaben])

        await job("t-1", "Was sind Magnetare?")
        await job("t-1", "Recherchiere: Magnetare")  # delivered again, the model worded it anew
        await job("t-1", "Magnetare?", "Wie heiss ist die Sonne?")  # again, now with a second task
        await job("t-2", "Was sind Magnetare?")
        queue, _ = await _lists(r, user, ch)
        assert [(t["aufgabe"], t["turn_id"]) for t in queue] == [
            ("Was sind Magnetare?", "t-1"), ("Wie heiss ist die Sonne?", "t-1"), ("Was sind Magnetare?", "t-2")]
        # the queued task is what the pixie reads
        assert pixie.Delegation.model_validate(queue[0]).schluessel().startswith("delegation:t-1:")

    _run(stores, migrated, go)


async def _sql(p, query, args):
    async with p.connection() as conn:
        await conn.execute(query, args)


def test_the_round_decays_the_librarys_weights(stores, migrated):
    """`gewicht_decay` (seed 001 §3.2a): each round decays the library's weights on the LZG nodes'
    forgetting curve by the time since each entry's last decay, up to the cap and with no floor;
    the read path divides the decayed weight onto 0–1. How often rounds run changes nothing."""
    cfg = MemoryConfig()
    rest = 1 - cfg.lzg_decay_per_day

    async def go(p, r):
        user, ch = f"pixie-zerfall-{uuid.uuid4().hex[:8]}", "nova"
        services = _services(p, r, ScriptedLLM())
        add = lambda typ, gewicht, achse: bibliothek.add(p, user, ch, typ, f"{typ}-{achse}", "Inhalt", unit(achse),
                                                           gewicht)
        ids = {"wissen": await add("wissen", pixie.WISSEN_GEWICHT, 3),
               "bericht": await add("bericht", pixie.BERICHT_GEWICHT, 4),
               "ueber_cap": await add("wissen", 12.0, 5), "inaktiv": await add("wissen", 5.0, 6),
               "frisch": await add("wissen", 5.0, 7)}

        async def zurueck(name, tage):
            await _sql(p, "UPDATE autonomous_wissen SET zerfall_stand = zerfall_stand - make_interval(days => %s)"
                       " WHERE id = %s", (tage, ids[name]))

        async def gewichte():
            return {n: next(e.gewicht for e in await bibliothek.eintraege(p, user, ch) if e.id == i)
                    for n, i in ids.items()}

        for name in ("wissen", "bericht", "inaktiv"):
            await zurueck(name, 30)
        await zurueck("ueber_cap", 2)
        await _sql(p, "UPDATE autonomous_wissen SET aktiv = false WHERE id = %s", (ids["inaktiv"],))
        out = await pixie.pixie_round(services)
        assert out["status"] == "gelaufen" and out["gewicht_decay"]["status"] == "verfallen"
        assert out["gewicht_decay"]["verfallen"] >= 3
        w = await gewichte()
        assert w["wissen"] == pytest.approx(5.0 * rest ** 30, rel=1e-4)
        assert w["bericht"] == pytest.approx(rest ** 30, rel=1e-4)
        assert w["ueber_cap"] == cfg.library_weight_cap  # runs up to the cap
        assert w["inaktiv"] == 5.0 and w["frisch"] == 5.0  # not active; decayed less than a day ago
        # the reader: the library plugin's search gets the decayed weight divided by the cap
        hit = (await bibliothek.suchen(p, user, ch, unit(3), cfg))[0]
        assert hit.titel == "wissen-3" and hit.gewicht == pytest.approx(5.0 * rest ** 30 / 10.0, rel=1e-4)

        # a round right after decays nothing twice; thirty days more continue the same curve
        await pixie.pixie_round(services)
        assert await gewichte() == w
        await zurueck("wissen", 30)
        await pixie.pixie_round(services)
        assert (await gewichte())["wissen"] == pytest.approx(5.0 * rest ** 60, rel=1e-4)

    _run(stores, migrated, go)


def test_a_decay_that_fails_is_named_and_the_round_does_its_tasks(stores, migrated):
    class _Weg(_Store):
        async def _run(self, op, args, kwargs):
            if op == "bibliothek.zerfall":
                raise RuntimeError("store away")
            return await super()._run(op, args, kwargs)

    async def go(p, r):
        user, ch = f"pixie-weg-{uuid.uuid4().hex[:8]}", "nova"
        services = _services(p, r, ScriptedLLM({"pixie": [ANTWORT]}), store=_Weg(p))
        await r.rpush(f"{DELEGATIONS}:{user}:{ch}", json.dumps({"aufgabe": "Was sind Magnetare?", "turn_id": "t-9"}))
        out = await pixie.pixie_round(services)
        assert out["gewicht_decay"] == {"status": "gewicht_decay_ausgefallen"}
        assert out["ausgaenge"] == ["geschrieben"]

    _run(stores, migrated, go)


def test_a_task_of_a_turn_taken_back_writes_nothing(stores, migrated):
    """Taking a turn back reaches the pixie: a task of that turn still queued does no research, and
    one whose turn is taken back while it runs writes nothing to the library (fallback
    `zurueckgenommen`); a task of another turn is done."""
    from memory.ruecknahme import zurueckgenommen_key

    async def go(p, r):
        ch = f"mira-{uuid.uuid4().hex[:8]}"
        await charaktere.create(p, ch, {"name": "Mira", "identitaet": "Leuchtturmwaerterin"})
        user = f"pixie-{uuid.uuid4().hex[:6]}"
        queue = f"{DELEGATIONS}:{user}:{ch}"
        llm = ScriptedLLM({"pixie": [ANTWORT]})
        services = _services(p, r, llm)
        await r.sadd(zurueckgenommen_key(user, ch), "t-weg")
        await r.rpush(queue, json.dumps({"aufgabe": "Was sind Pulsare?", "turn_id": "t-weg"}))
        out = await pixie.pixie_round(services)
        assert out["ausgaenge"] == ["zurueckgenommen"] and llm.calls == []  # no research, no model call
        assert await bibliothek.eintraege(p, user, ch) == [] and await _lists(r, user, ch) == ([], [])

        # taken back while the model answers: nothing is written
        class _Zuruecknehmen(ScriptedLLM):
            async def chat(self, trace, node, messages, **kw):
                await r.sadd(zurueckgenommen_key(user, ch), "t-spaet")
                return await super().chat(trace, node, messages, **kw)

        services = _services(p, r, _Zuruecknehmen({"pixie": [ANTWORT]}))
        await r.rpush(queue, json.dumps({"aufgabe": "Was sind Magnetare?", "turn_id": "t-spaet"}))
        assert (await pixie.pixie_round(services))["ausgaenge"] == ["zurueckgenommen"]
        assert await bibliothek.eintraege(p, user, ch) == []

        await r.rpush(queue, json.dumps({"aufgabe": "Was sind Magnetare?", "turn_id": "t-bleibt"}))
        assert (await pixie.pixie_round(_services(p, r, ScriptedLLM({"pixie": [ANTWORT]}))))["ausgaenge"] == [
            "geschrieben"]
        assert sorted(e.typ for e in await bibliothek.eintraege(p, user, ch)) == ["bericht", "wissen"]

    _run(stores, migrated, go)


def test_the_pairs_take_turns_whatever_their_keys(stores, migrated):
    """Three pairs whose keys sort first, with many tasks each, and one pair whose key sorts last,
    with one task: a round takes one task per pair, beginning after the pair the round before
    served last, so the last pair's task is taken in the second round (not after the others'
    queues ran dry), and over the rounds every pair is served in turn."""

    async def go(p, r):
        tag = uuid.uuid4().hex[:6]
        vorne = [f"a{i}-{tag}" for i in range(3)]
        hinten = f"z-{tag}"
        ch = f"weg-{tag}"  # no such character: each task is dropped by name, quickly
        for user in vorne:
            for n in range(6):
                await r.rpush(f"{DELEGATIONS}:{user}:{ch}", json.dumps({"aufgabe": f"Aufgabe {n}", "turn_id": f"t{n}"}))
        await r.rpush(f"{DELEGATIONS}:{hinten}:{ch}", json.dumps({"aufgabe": "Meine einzige", "turn_id": "t0"}))
        services = _services(p, r, ScriptedLLM())

        async def uebrig(user):
            return await r.llen(f"{DELEGATIONS}:{user}:{ch}")

        first = await pixie.pixie_round(services, max_tasks=3)
        assert first["ausgaenge"] == ["verworfen"] * 3
        assert [await uebrig(u) for u in vorne] == [5, 5, 5] and await uebrig(hinten) == 1
        await pixie.pixie_round(services, max_tasks=3)
        assert await uebrig(hinten) == 0  # served in the second round
        assert [await uebrig(u) for u in vorne] == [4, 4, 5]
        await pixie.pixie_round(services, max_tasks=3)
        assert [await uebrig(u) for u in vorne] == [3, 3, 4]  # the third pair first, then round again

    _run(stores, migrated, go)


def test_reihum_begins_after_the_pair_served_last():
    keys = ["d:c", "d:a", "d:b"]
    assert pixie.reihum(keys, None) == ["d:a", "d:b", "d:c"]
    assert pixie.reihum(keys, "d:a") == ["d:b", "d:c", "d:a"]
    assert pixie.reihum(keys, "d:c") == ["d:a", "d:b", "d:c"]
    assert pixie.reihum(keys, "d:aa") == ["d:b", "d:c", "d:a"]  # a queue gone since: the next one after it


def test_the_turn_marker_expires(stores, migrated):
    """The marker of the pair served last names a pair: it does not outlive its day."""

    async def go(p, r):
        await r.rpush(f"{DELEGATIONS}:m-{uuid.uuid4().hex[:6]}:weg-x", json.dumps({"aufgabe": "x", "turn_id": "t"}))
        await pixie.pixie_round(_services(p, r, ScriptedLLM()))
        assert 0 < await r.ttl(pixie.REIHUM) <= pixie.REIHUM_S

    _run(stores, migrated, go)
