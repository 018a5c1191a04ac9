"""Retention: the first outbox worker deletes pipeline_log rows, turn records and dead letters
past their time (core/settings.py: `pipeline_log_keep_days` 30, `turn_records_keep_days` 0 = kept,
`dead_letters_keep_days` 14) and keeps everything younger; 0 keeps a kind for good.

The rows are dated in the year 2000 and the pass is told it is 1 March 2000, so it touches no
other test's rows in the shared database — but for the before-images of taken-back turns
(`turn_undo_keep_days` 30): they are made now, and a pass told it is a month later takes every
finished test's along."""
import asyncio
import uuid
from datetime import datetime, timedelta, timezone

from actors.worker import retention_pass
from core.settings import Settings
from memory import beziehung, erasure, pg, ruecknahme

OLD, RECENT = "2000-01-01T10:00:00+00:00", "2000-02-25T10:00:00+00:00"
NOW = datetime(2000, 3, 1, tzinfo=timezone.utc)


def _job(user: str, at: str) -> dict:
    return {"kind": "turn", "turn": {
        "user_id": user, "character_id": "nova", "turn_id": f"{at[:10]}-{uuid.uuid4().hex[:6]}", "user_text": "hallo",
        "reply": "hi", "user_embedding": None, "result": {"reply": "hi"}, "created_at": at},
        "log": [{"seq": 0, "node": "responder", "art": "switch", "entscheidung": "responder.ergebnis",
                 "outcome": "antwort", "inputs": {}, "at": at}]}


async def _scenario(stores):
    from redis.asyncio import Redis

    r = Redis.from_url(stores.redis_url)
    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    try:
        user, dead = f"ret-{uuid.uuid4().hex[:8]}", f"test:dead:{uuid.uuid4().hex[:8]}"
        old, recent = _job(user, OLD), _job(user, RECENT)
        for job in (old, recent):
            await pg.write_turn_job(pool, job)
            at = datetime.fromisoformat(job["turn"]["created_at"])
            await r.xadd(dead, {"job": "{}", "reason": "test"}, id=f"{int(at.timestamp() * 1000)}-0")

        # the defaults: the old turn's log rows (over 30 days) and dead letter (over 14) go, its record stays
        got = await retention_pass(pool, r, Settings(), now=NOW, dead_stream=dead)
        assert got == {"pipeline_log": 1, "turns": 0, "turn_vorher": 0, "zurueckgenommene_turns": 0, "dead_letters": 1}
        assert [x["turn_id"] for x in await pg.pipeline_rows(pool, user, "nova")] == [recent["turn"]["turn_id"]]
        assert sorted(await pg.turn_ids(pool, user, "nova")) == sorted([old["turn"]["turn_id"],
                                                                        recent["turn"]["turn_id"]])
        assert [e[0].decode() for e in await r.xrange(dead)] == [f"{int(datetime.fromisoformat(RECENT).timestamp() * 1000)}-0"]

        # turn records with a time of their own: the old one goes, the recent one stays
        got = await retention_pass(pool, r, Settings(turn_records_keep_days=10), now=NOW, dead_stream=dead)
        assert got == {"pipeline_log": 0, "turns": 1, "turn_vorher": 0, "zurueckgenommene_turns": 0, "dead_letters": 0}
        assert await pg.turn_ids(pool, user, "nova") == [recent["turn"]["turn_id"]]

        # 0 keeps a kind for good, however late it is
        keep = Settings(pipeline_log_keep_days=0, turn_records_keep_days=0, dead_letters_keep_days=0,
                        turn_undo_keep_days=0)
        got = await retention_pass(pool, r, keep, now=datetime(2100, 1, 1, tzinfo=timezone.utc), dead_stream=dead)
        assert got == {"pipeline_log": 0, "turns": 0, "turn_vorher": 0, "zurueckgenommene_turns": 0, "dead_letters": 0}
        assert len(await pg.pipeline_rows(pool, user, "nova")) == 1 and await r.xlen(dead) == 1

        # a turn's before-images (kept so it can be taken back) and the record of a retracted turn
        await beziehung.profil_wachsen(pool, user, "nova", "praegung:t1", {"mensch_kern": "Ret segelt."},
                                       {"mensch_kern": 5})
        await ruecknahme.zuruecknehmen(pool, user, "nova", ["t0"])
        only_undo = Settings(pipeline_log_keep_days=0, turn_records_keep_days=0, dead_letters_keep_days=0)
        later = datetime.now(timezone.utc) + timedelta(days=31)
        got = await retention_pass(pool, r, only_undo, now=later - timedelta(days=2), dead_stream=dead)
        assert (got["turn_vorher"], got["zurueckgenommene_turns"]) == (0, 0)  # within the 30 days: kept
        got = await retention_pass(pool, r, only_undo, now=later, dead_stream=dead)
        assert got["turn_vorher"] >= 1 and got["zurueckgenommene_turns"] >= 1
        assert await erasure.export_table(pool, user, "turn_vorher") == []
        assert await erasure.export_table(pool, user, "zurueckgenommene_turns") == []
    finally:
        await pool.close()
        await r.aclose()


def test_retention_deletes_what_is_past_its_time_and_keeps_the_rest(migrated):
    asyncio.run(_scenario(migrated))
