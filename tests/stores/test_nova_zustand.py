"""Nova's emotion state after a turn reaches the next turn without a store write on the reply's
path: ei_calc_persist hands it to the dispatcher, which commits it with the turn (Redis) and puts it
in the turn's outbox job (Postgres, where a later turn's state holds however the jobs arrive); the
next turn's db_zugriff reads the commit, or Postgres where Redis lost it."""
import asyncio
import uuid
from datetime import datetime, timedelta, timezone

from core.state import NovaZustandRecord
from memory import pg, session
from pipeline.nodes import db_zugriff
from tests.conftest import new_pair, with_pool
from core.wire import TurnJob
from tests.commit_jobs import commit, turn_job


def _z(emotion: str, arousal: float, minute: int) -> dict:
    stand = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc) + timedelta(minutes=minute)
    return {"emotion": emotion, "arousal": arousal, "vektor": "plateau", "verlauf": [{"emotion": emotion}],
            "stand": stand.isoformat()}


def _job(user: str, ch: str, z: dict) -> TurnJob:
    return turn_job(user, ch, uuid.uuid4().hex, "x", "y", created_at=z["stand"], nova_zustand=z)


def test_the_state_is_committed_once_with_its_turn(stores):
    async def go():
        from redis.asyncio import Redis

        r = Redis.from_url(stores.redis_url)
        try:
            user, ch = new_pair("zustand")
            assert await session.load_zustand(r, user, ch) is None
            def c(t: str, zustand: dict):
                return commit(user, ch, t, text=None, keep_turns=4, ttl_s=60, zustand=zustand)

            assert await session.commit_turn(r, c("t1", _z("freude", 0.7, 1))) is True
            # the same turn again (a retry) commits nothing: its state is not written twice
            assert await session.commit_turn(r, c("t1", _z("angst", 0.9, 2))) is False
            assert await session.load_zustand(r, user, ch) == _z("freude", 0.7, 1)
            assert await session.commit_turn(r, c("t2", _z("trauer", 0.4, 3))) is True
            assert (await session.load_zustand(r, user, ch))["emotion"] == "trauer"
        finally:
            await r.aclose()

    asyncio.run(go())


def test_the_outbox_job_puts_the_later_turns_state_in_postgres_whatever_the_order(pool):
    async def go(p):
        user, ch = new_pair("zustand")
        assert (await pg.load_pair(p, user, ch))["emotion_found"] is False
        later, earlier = _job(user, ch, _z("freude", 0.7, 5)), _job(user, ch, _z("angst", 0.9, 4))
        await pg.write_turn_job(p, later)
        await pg.write_turn_job(p, earlier)  # a re-claimed older job, applied after the newer one
        await pg.write_turn_job(p, later)  # and a job applied twice
        row = await pg.load_pair(p, user, ch)
        assert (row["nova_emotion"], row["nova_arousal"], row["emotion_found"]) == ("freude", 0.7, True)
        assert datetime.fromisoformat(row["emotion_stand"]) == datetime.fromisoformat(_z("freude", 0.7, 5)["stand"])

    asyncio.run(with_pool(pool, go))


def _rec(emotion: str, arousal: float, minute: int) -> NovaZustandRecord:
    """The state as the session client reads it."""
    return NovaZustandRecord.model_validate(_z(emotion, arousal, minute))


def test_db_zugriff_starts_from_the_later_of_the_commit_and_postgres():
    row = {"nova_emotion": "angst", "nova_arousal": 0.9, "emotion_found": True, "emotion_stand": _z("x", 0, 4)["stand"]}
    # the last turn's commit is later than what the outbox has put in Postgres yet
    merged = db_zugriff.mit_zustand(row, _rec("freude", 0.7, 5))
    assert (merged["nova_emotion"], merged["nova_arousal"]) == ("freude", 0.7)
    # Redis holds an older state than Postgres (a Redis restored from an old snapshot)
    assert db_zugriff.mit_zustand(row, _rec("freude", 0.7, 3)) == row
    # nothing committed in Redis (lost, or a pair from before): Postgres; and a cold start
    assert db_zugriff.mit_zustand(row, None) == row
    cold = {"nova_emotion": "neutral", "nova_arousal": 0.3, "emotion_found": False, "emotion_stand": None}
    assert db_zugriff.mit_zustand(cold, _rec("freude", 0.7, 1))["emotion_found"] is True
