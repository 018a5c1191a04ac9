"""The session client's commit path (memory/session_store.SessionStore) against a real Redis: a
typed commit lands once, its entries read back as `SessionTurn`s, its result as the turn's
result; the human's part kept alone is kept once."""
import asyncio
import uuid

from core.state import SessionTurn
from core.wire import HumanCommit
from memory.session_store import SessionStore
from tests.commit_jobs import commit, entry
from tests.conftest import new_pair


def test_a_typed_commit_lands_once_and_reads_back_typed(stores):
    async def go():
        from redis.asyncio import Redis

        r = Redis.from_url(stores.redis_url)
        try:
            user, ch = new_pair("ssc")
            s, turn = SessionStore(r), uuid.uuid4().hex
            assert await s.stored_result(user, ch, turn) is None
            c = commit(user, ch, turn, reply="Hallo Ben.", text="Hallo Nova.")
            assert await s.commit_turn(c) is True
            assert await s.commit_turn(commit(user, ch, turn, reply="Anders.")) is False  # once per turn_id
            turns = await s.load_turns(user, ch, 10)
            assert all(isinstance(t, SessionTurn) for t in turns)
            assert [(t.rolle, t.inhalt) for t in turns] == [("user", "Hallo Nova."), ("assistant", "Hallo Ben.")]
            stored = await s.stored_result(user, ch, turn)
            assert stored.reply == "Hallo Ben." and stored.turn_id == turn

            later = uuid.uuid4().hex
            kept = HumanCommit(user_id=user, character_id=ch, turn_id=later, mensch=entry("Bist du da?", later),
                               keep_turns=50, ttl_s=60)
            assert await s.commit_human(kept) == 1
            assert await s.commit_human(kept) == 2  # his part was kept before
            assert (await s.load_turns(user, ch, 1))[0].inhalt == "Bist du da?"
        finally:
            await r.aclose()

    asyncio.run(go())
