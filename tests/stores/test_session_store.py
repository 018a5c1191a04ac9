"""The typed Redis clients of the nodes (memory/session_store.py) against a real Redis: what the
store modules wrote comes back as models (`SessionTurn`, `SessionZusammenfassung`,
`NovaZustandRecord`, the pending order's `Stand`), and each write lands where the store modules'
readers find it."""
import asyncio
import json
from datetime import datetime, timezone

from core.settings import Settings
from core.state import AusstehenderAuftrag, LandschaftRecord, NovaZustandRecord, SessionTurn
from memory import agent_quoten, kzg, redis_vorher, session
from memory.ausstehender_auftrag import Stand
from memory.kzg import KZGIndex
from memory.session import SessionZusammenfassung
from memory.session_store import (AuftragStore, AusstehendeTurns, ImpulsStore, KzgStore, LandschaftStore,
                                  QuotenStore, SessionStore, gv_key)
from pipeline.services import Deps, Services
from pipeline.trace import TurnTrace
from prompts import PromptLibrary
from tests.conftest import new_pair, unit


def _entry(i: int, **extra) -> dict:
    return {"rolle": "user" if i % 2 == 0 else "assistant", "sprecher": "Person B" if i % 2 == 0 else "Nova",
            "inhalt": f"Beitrag {i}", "turn_id": f"t{i // 2}", "herkunft": "user",
            "time": datetime(2026, 12, 1, 12, i, tzinfo=timezone.utc).isoformat(), **extra}


async def _with_redis(url, go):
    from redis.asyncio import Redis

    r = Redis.from_url(url)
    try:
        return await go(r)
    finally:
        await r.aclose()


def test_the_session_comes_back_as_session_turns(stores):
    async def go(r):
        user, ch = new_pair("sst")
        await r.rpush(session.session_key(user, ch), *[json.dumps(_entry(i, emotion="freude")) for i in range(20)])
        s = SessionStore(r)
        window = await s.load_window(user, ch, 6)
        assert all(isinstance(t, SessionTurn) for t in window)
        assert [t.inhalt for t in window] == [e["inhalt"] for e in await session.load_window(r, user, ch, 6)]
        assert window[-1] == SessionTurn(**_entry(19, emotion="freude"))
        assert len(await s.load_window(user, ch, 10, hoechstens=True)) <= 10
        last = await s.load_turns(user, ch, 3)
        assert [t.turn_id for t in last] == ["t8", "t9", "t9"] and last[0].rolle == "assistant"
        assert await s.count_turns(user, ch) == 20
        assert await s.annotate_turn(user, ch, "t9", {"kern": "Hunde"})
        assert (await s.load_turns(user, ch, 2))[0].kern == "Hunde"
        assert await s.load_turns("niemand", ch, 5) == []

    asyncio.run(_with_redis(stores.redis_url, go))


def test_a_session_the_person_forgot_a_sentence_of_still_reads_typed(stores):
    async def go(r):
        user, ch = new_pair("sstv")
        eintraege = [_entry(i) for i in range(4)]
        eintraege[0]["inhalt"] = "Mein Hund heisst Bello. Er ist drei."
        eintraege[2]["inhalt"] = "Bello war krank."
        await r.rpush(session.session_key(user, ch), *[json.dumps(e) for e in eintraege])
        assert await session.verlauf_vergessen(r, user, ch, lambda satz: "Bello" in satz) == 2
        window = await SessionStore(r).load_window(user, ch, 10)
        assert [(t.inhalt, t.vergessen) for t in window] == [
            ("Er ist drei.", True), ("Beitrag 1", None), (session.VERGESSEN_PLATZHALTER, True), ("Beitrag 3", None)]
        assert [t.turn_id for t in await SessionStore(r).load_turns(user, ch, 2)] == ["t1", "t1"]

    asyncio.run(_with_redis(stores.redis_url, go))


def test_the_summary_and_the_entries_it_waits_for_are_typed(stores):
    async def go(r):
        user, ch = new_pair("sss")
        await r.rpush(session.session_key(user, ch), *[json.dumps(_entry(i)) for i in range(24)])
        s = SessionStore(r)
        assert await s.load_summary(user, ch) == SessionZusammenfassung()
        assert await s.summary_text(user, ch) is None
        offen = await s.ausstehend(user, ch, window=8, marke="", limit=4)
        assert isinstance(offen, AusstehendeTurns) and offen.stand == "anfang" and offen.rueckstand == 16
        assert [e.inhalt for _, e in offen.eintraege] == [f"Beitrag {i}" for i in range(4)]
        assert all(isinstance(e, SessionTurn) for _, e in offen.eintraege)
        marke = offen.eintraege[-1][0]
        assert await s.fold_summary(user, ch, nach_marke="", text="Sie sprachen.", marke=marke,
                                    bis_turn_id="t1", neu=4, turn_id="t11")
        assert not await s.fold_summary(user, ch, nach_marke="", text="Zweimal.", marke=marke, bis_turn_id="t1", neu=4)
        assert await s.load_summary(user, ch) == SessionZusammenfassung(text="Sie sprachen.", marke=marke,
                                                                        bis_turn_id="t1", gefaltet=4)
        assert await s.summary_text(user, ch) == "Sie sprachen."
        weiter = await s.ausstehend(user, ch, window=8, marke=marke, limit=50)
        assert weiter.stand == "gefunden" and weiter.eintraege[0][1].inhalt == "Beitrag 4"

    asyncio.run(_with_redis(stores.redis_url, go))


def test_novas_state_comes_back_as_its_record(stores):
    async def go(r):
        user, ch = new_pair("ssz")
        s = SessionStore(r)
        assert await s.load_zustand(user, ch) is None
        stand = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
        await r.set(session.zustand_key(user, ch), json.dumps({"emotion": "freude", "arousal": 0.7, "vektor": "plateau",
                                                               "verlauf": [], "stand": stand.isoformat()}))
        assert await s.load_zustand(user, ch) == NovaZustandRecord(emotion="freude", arousal=0.7, vektor="plateau",
                                                                   stand=stand)

    asyncio.run(_with_redis(stores.redis_url, go))


def test_the_pending_order_the_landscape_and_the_counters(stores):
    async def go(r):
        user, ch = new_pair("ssa")
        auftrag = AuftragStore(r)
        assert await auftrag.laden(user, ch) is None and await auftrag.geschrieben_von(user, ch) == ""
        stand = Stand(turn_id="t1", ausgang="neu", auftrag=AusstehenderAuftrag(agent="timeline", aktion="eintragen",
                                                                             turn_id="t1"))
        assert await auftrag.schreiben(user, ch, stand, gelesen="")
        assert await auftrag.laden(user, ch) == stand and await auftrag.geschrieben_von(user, ch) == "t1"
        assert not await auftrag.schreiben(user, ch, stand.model_copy(update={"turn_id": "t3"}), gelesen="t2")

        landschaft = LandschaftStore(r)
        assert await landschaft.cluster(user, ch) is None
        await landschaft.schreiben(user, ch, "t1", LandschaftRecord(cluster="angst", gv_detail="Hunde"))
        await landschaft.schreiben(user, ch, "t2", LandschaftRecord(cluster="neugier", gv_detail="Segeln"))
        assert await landschaft.cluster(user, ch) == "neugier"
        # t2 run again under its id: its previous turn is still t1's, however often it writes
        assert await landschaft.cluster(user, ch, "t2") == "angst"
        await landschaft.schreiben(user, ch, "t2", LandschaftRecord(cluster="nebel", gv_detail="Segeln"))
        assert await landschaft.cluster(user, ch, "t2") == "angst" and await landschaft.cluster(user, ch, "t3") == "nebel"
        assert await redis_vorher.zuruecksetzen(r, user, ch, ["t2"]) == 1  # the detail before t2 was kept
        assert (await r.hgetall(gv_key(user, ch)))[b"gv_detail"] == b"Hunde"

        quoten = QuotenStore(r)
        before = int(await r.hget(agent_quoten.ROUTED, "human") or 0)
        await quoten.geroutet("human", f"{user}:{ch}:t1")
        await quoten.geroutet("human", f"{user}:{ch}:t1")  # the same turn again: counted once
        assert int(await r.hget(agent_quoten.ROUTED, "human")) == before + 1

    asyncio.run(_with_redis(stores.redis_url, go))


def test_impulses_are_planned_once_per_turn_and_kzg_is_read_through_the_pairs_index(stores):
    async def go(r):
        user, ch = new_pair("ssi")
        impulse = ImpulsStore(r)
        assert not await impulse.geplant(user, ch, "t1") and await impulse.offen(user, ch) == 0
        imp = {"id": "t1-ab", "user_id": user, "character_id": ch, "gedanke": "Hunde?", "aus_turn": "t1"}
        assert await impulse.planen(imp, 1e9)
        assert not await impulse.planen({**imp, "id": "t1-cd"}, 1e9)  # the turn planned one already
        assert await impulse.geplant(user, ch, "t1") and await impulse.offen(user, ch) == 1

        store = KzgStore(r)
        entry = await kzg.add_entry(r, user, ch, "Hunde", unit(0), emotion="freude")
        assert await store.count(user, ch) == 1
        index = KZGIndex(user, ch)
        await store.refresh(index)
        hits = await store.search(index, unit(0), threshold=0.5, top_k=3, refreshed=True)
        assert [h.id for h in hits] == [entry] and hits[0].emotion == "freude"

    asyncio.run(_with_redis(stores.redis_url, go))


def test_deps_hand_the_clients_out_over_the_services_redis(stores):
    def deps(redis) -> Deps:
        return Deps(Services(settings=Settings(), llm=None, embedder=None, store=None, redis=redis,
                             prompts=PromptLibrary()), TurnTrace("u", "nova", "t1"))

    ohne = deps(None)
    assert all(getattr(ohne, n) is None for n in ("session", "auftrag", "quoten", "landschaft", "kzg", "impulse"))

    async def go(r):
        d = deps(r)
        kinds = {n: type(getattr(d, n)) for n in ("session", "auftrag", "quoten", "landschaft", "kzg", "impulse")}
        assert kinds == {"session": SessionStore, "auftrag": AuftragStore, "quoten": QuotenStore,
                         "landschaft": LandschaftStore, "kzg": KzgStore, "impulse": ImpulsStore}
        assert d.session.redis is r

    asyncio.run(_with_redis(stores.redis_url, go))
