"""Retention: the first outbox worker deletes pipeline_log rows, turn records and dead letters
past their time (core/settings.py: `pipeline_log_keep_days` 30, `turn_records_keep_days` 0 = kept,
`dead_letters_keep_days` 14) and keeps everything younger; 0 keeps a kind for good.

The rows are dated in the year 2000 and the pass is told it is 1 March 2000, so it touches no
other test's rows in the shared database — but for the before-images of taken-back turns
(`turn_undo_keep_days` 30): they are made now, and a pass told it is a month later takes every
finished test's along.

What is never older than a bound but could grow with one pair's use is kept to a number: the
swipes of a turn and of a pair (`swipes_per_turn`, `swipes_per_pair`, newest kept), a pair's
finished retractions (`retractions_kept_per_pair`); the record of evicted pair actors goes after
`evicted_pairs_keep_hours`."""
import asyncio
import uuid
from datetime import datetime, timedelta, timezone

from actors.worker import retention_pass
from core.settings import Settings
from memory import beziehung, erasure, pg, ruecknahme
from tests.conftest import with_pool
from core.wire import read_job
from tests.commit_jobs import result_dict

OLD, RECENT = "2000-01-01T10:00:00+00:00", "2000-02-25T10:00:00+00:00"
NOW = datetime(2000, 3, 1, tzinfo=timezone.utc)


def _job(user: str, at: str) -> dict:
    return {"kind": "turn", "turn": {
        "user_id": user, "character_id": "nova", "turn_id": f"{at[:10]}-{uuid.uuid4().hex[:6]}", "user_text": "hallo",
        "reply": "hi", "user_embedding": None, "result": result_dict(user, "nova", "t", "hi", created_at=at), "created_at": at},
        "log": [{"seq": 0, "node": "responder", "art": "switch", "entscheidung": "responder.ergebnis",
                 "outcome": "antwort", "inputs": {}, "at": at}]}


async def _scenario(stores):
    from redis.asyncio import Redis

    r = Redis.from_url(stores.redis_url)
    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    try:
        user, dead = f"ret-{uuid.uuid4().hex[:8]}", f"test:dead:{uuid.uuid4().hex[:8]}"
        ev = f"test:evicted:{uuid.uuid4().hex[:8]}"
        old, recent = _job(user, OLD), _job(user, RECENT)
        for job in (old, recent):
            await pg.write_turn_job(pool, read_job(job))
            at = datetime.fromisoformat(job["turn"]["created_at"])
            await r.xadd(dead, {"job": "{}", "reason": "test"}, id=f"{int(at.timestamp() * 1000)}-0")

        # the defaults: the old turn's log rows (over 30 days) and dead letter (over 14) go, its record stays
        got = await retention_pass(pool, r, Settings(), now=NOW, dead_stream=dead, evicted_key=ev)
        assert got == {"pipeline_log": 1, "turns": 0, "turn_vorher": 0, "zurueckgenommene_turns": 0, "dead_letters": 1,
                       "pairs:evicted": 0}
        assert [x["turn_id"] for x in await pg.pipeline_rows(pool, user, "nova")] == [recent["turn"]["turn_id"]]
        assert sorted(await pg.turn_ids(pool, user, "nova")) == sorted([old["turn"]["turn_id"],
                                                                        recent["turn"]["turn_id"]])
        assert [e[0].decode() for e in await r.xrange(dead)] == [f"{int(datetime.fromisoformat(RECENT).timestamp() * 1000)}-0"]

        # turn records with a time of their own: the old one goes, the recent one stays
        got = await retention_pass(pool, r, Settings(turn_records_keep_days=10), now=NOW, dead_stream=dead,
                                   evicted_key=ev)
        assert got == {"pipeline_log": 0, "turns": 1, "turn_vorher": 0, "zurueckgenommene_turns": 0, "dead_letters": 0,
                       "pairs:evicted": 0}
        assert await pg.turn_ids(pool, user, "nova") == [recent["turn"]["turn_id"]]

        # 0 keeps a kind for good, however late it is
        keep = Settings(pipeline_log_keep_days=0, turn_records_keep_days=0, dead_letters_keep_days=0,
                        turn_undo_keep_days=0)
        got = await retention_pass(pool, r, keep, now=datetime(2100, 1, 1, tzinfo=timezone.utc), dead_stream=dead,
                                   evicted_key=ev)
        assert got == {"pipeline_log": 0, "turns": 0, "turn_vorher": 0, "zurueckgenommene_turns": 0, "dead_letters": 0,
                       "pairs:evicted": 0}
        assert len(await pg.pipeline_rows(pool, user, "nova")) == 1 and await r.xlen(dead) == 1

        # a turn's before-images (kept so it can be taken back) and the record of a retracted turn
        await beziehung.profil_wachsen(pool, user, "nova", "praegung:t1", {"mensch_kern": "Ret segelt."},
                                       {"mensch_kern": 5})
        await ruecknahme.zuruecknehmen(pool, user, "nova", ["t0"])
        only_undo = Settings(pipeline_log_keep_days=0, turn_records_keep_days=0, dead_letters_keep_days=0)
        later = datetime.now(timezone.utc) + timedelta(days=31)
        got = await retention_pass(pool, r, only_undo, now=later - timedelta(days=2), dead_stream=dead, evicted_key=ev)
        assert (got["turn_vorher"], got["zurueckgenommene_turns"]) == (0, 0)  # within the 30 days: kept
        got = await retention_pass(pool, r, only_undo, now=later, dead_stream=dead, evicted_key=ev)
        assert got["turn_vorher"] >= 1 and got["zurueckgenommene_turns"] >= 1
        assert await erasure.export_table(pool, user, "turn_vorher") == []
        assert await erasure.export_table(pool, user, "zurueckgenommene_turns") == []
    finally:
        await pool.close()
        await r.aclose()


def test_retention_deletes_what_is_past_its_time_and_keeps_the_rest(migrated):
    asyncio.run(_scenario(migrated))


async def _swipes(pool, user: str, n: int, *, je_turn: int, je_paar: int) -> list[str]:
    """`n` regenerates of the pair's last turn, each replacing the one before, the caps given."""
    turn = "r0"
    for i in range(1, n + 1):
        await ruecknahme.zuruecknehmen(pool, user, "nova", [turn], varianten_an=f"r{i}",
                                       verworfen={turn: f"Antwort {i - 1}"}, varianten_max=(je_turn, je_paar))
        turn = f"r{i}"
    return [s.reply for s in await ruecknahme.varianten(pool, user, "nova", turn)]


def test_a_turns_and_a_pairs_swipes_are_kept_to_their_newest(migrated):
    """Regenerating the same turn again and again keeps the turn's newest `swipes_per_turn`
    replies, oldest first; a pair's swipes over all its turns stay within `swipes_per_pair`."""

    async def go(pool):
        user = f"swipe-{uuid.uuid4().hex[:8]}"
        assert await _swipes(pool, user, 8, je_turn=3, je_paar=100) == ["Antwort 5", "Antwort 6", "Antwort 7"]
        other = f"swipe-{uuid.uuid4().hex[:8]}"
        assert await _swipes(pool, other, 4, je_turn=100, je_paar=100) == [f"Antwort {i}" for i in range(4)]
        # another turn of the same pair regenerated: the pair's cap takes the oldest of the first turn
        for i in range(1, 4):
            await ruecknahme.zuruecknehmen(pool, other, "nova", [f"s{i - 1}"], varianten_an=f"s{i}",
                                           verworfen={f"s{i - 1}": f"Zweite {i - 1}"}, varianten_max=(100, 5))
        assert [s.reply for s in await ruecknahme.varianten(pool, other, "nova", "s3")] == [
            "Zweite 0", "Zweite 1", "Zweite 2"]
        assert [s.reply for s in await ruecknahme.varianten(pool, other, "nova", "r4")] == ["Antwort 2", "Antwort 3"]
        # the store's own users: every other pair keeps what it had
        assert len(await ruecknahme.varianten(pool, user, "nova", "r8")) == 3

    asyncio.run(with_pool(migrated.database_url, go))


def test_a_pairs_finished_retractions_are_kept_to_their_newest(stores):
    """A pair's record of retractions (`ruecknahme:{user}:{character}`) keeps its newest
    `retractions_kept_per_pair` finished operations and every unfinished one; it expires."""
    from redis.asyncio import Redis

    from actors import ruecknahme as vorgaenge

    class _Services:
        def __init__(self, r):
            self.redis, self.settings = r, Settings(retractions_kept_per_pair=3)

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            user = f"ops-{uuid.uuid4().hex[:8]}"
            services = _Services(r)
            offen = vorgaenge.Vorgang(op_id="offen", art="rewind", zurueckgenommen=["t0"], seit=1.0)
            await vorgaenge.speichern(services, user, "nova", offen)
            for i in range(10):
                v = vorgaenge.Vorgang(op_id=f"op{i}", art="rewind", zurueckgenommen=[f"t{i}"], stand="fertig")
                await vorgaenge.speichern(services, user, "nova", v)
            key = vorgaenge.vorgaenge_key(user, "nova")
            assert sorted(k.decode() for k in await r.hkeys(key)) == ["offen", "op7", "op8", "op9"]
            assert [v.op_id for v in await vorgaenge.offene(services, user, "nova")] == ["offen"]
            assert 0 < await r.ttl(key) <= vorgaenge.VORGANG_TTL_S
            assert (await vorgaenge.laden(services, user, "nova", "op9")).stand == "fertig"
            await r.delete(key)
        finally:
            await r.aclose()

    asyncio.run(go())


def test_the_record_of_evicted_pairs_is_kept_for_its_hours(migrated, stores):
    from redis.asyncio import Redis

    async def go(pool):
        r = Redis.from_url(stores.redis_url)
        ev = f"test:evicted:{uuid.uuid4().hex[:8]}"
        try:
            now = datetime(2030, 1, 1, tzinfo=timezone.utc)
            await r.zadd(ev, {"alt:a": (now - timedelta(hours=30)).timestamp(),
                              "juenger:b": (now - timedelta(hours=2)).timestamp()})
            keep_all = Settings(pipeline_log_keep_days=0, turn_records_keep_days=0, dead_letters_keep_days=0,
                                turn_undo_keep_days=0)
            got = await retention_pass(pool, r, keep_all, now=now, dead_stream=f"test:dead:{uuid.uuid4().hex}",
                                       evicted_key=ev)
            assert got["pairs:evicted"] == 1 and [m.decode() for m in await r.zrange(ev, 0, -1)] == ["juenger:b"]
            shorter = keep_all.model_copy(update={"evicted_pairs_keep_hours": 1.0})
            got = await retention_pass(pool, r, shorter, now=now, dead_stream=f"test:dead:{uuid.uuid4().hex}",
                                       evicted_key=ev)
            assert got["pairs:evicted"] == 1 and await r.zcard(ev) == 0
        finally:
            await r.delete(ev)
            await r.aclose()

    asyncio.run(with_pool(migrated.database_url, go))
