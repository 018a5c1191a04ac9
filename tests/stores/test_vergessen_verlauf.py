"""Forgetting reaches the conversation itself: the session's entries (the history every node
reads, what a summary fold folds) and the turn records a lost session is rebuilt from lose the
sentences that repeat the forgotten item; an entry with nothing left stays as a placeholder, so the
conversation keeps its turns; other sentences, and other pairs, stay as they were."""
import asyncio
import json
import uuid
from datetime import datetime, timezone

from memory import erinnerungen, pg, session
from core.wire import read_job
from tests.commit_jobs import result_dict

FAKT = "[04 December 2026] Person B: Mein Papagei Quastenflosser spricht drei Sprachen."


def _job(user: str, ch: str, t: str, text: str, reply: str) -> dict:
    now = datetime.now(timezone.utc).isoformat()
    return {"kind": "turn", "turn": {"user_id": user, "character_id": ch, "turn_id": t, "user_text": text,
                                     "reply": reply, "user_embedding": None, "result": result_dict(user, ch, t, reply),
                                     "created_at": now}, "log": []}


async def _scenario(stores):
    from redis.asyncio import Redis

    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    r = Redis.from_url(stores.redis_url)
    try:
        user, other, ch = f"ida{uuid.uuid4().hex[:6]}", f"ole{uuid.uuid4().hex[:6]}", "nova"
        t1, t2 = uuid.uuid4().hex, uuid.uuid4().hex
        said = [(t1, "Mein Papagei Quastenflosser spricht drei Sprachen. Ich segle gern.",
                 "Quastenflosser spricht Sprachen? Toll!\nDer Papagei Quastenflosser ist klug."),
                (t2, "Wie war dein Tag?", "Ruhig, danke.")]
        for u in (user, other):
            for t, text, reply in said:
                await r.rpush(session.session_key(u, ch),
                              json.dumps({"rolle": "user", "inhalt": text, "turn_id": t}),
                              json.dumps({"rolle": "assistant", "inhalt": reply, "turn_id": t}))
                await pg.write_turn_job(pool, read_job(_job(u, ch, t, text, reply)))

        pg_out = await erinnerungen.nachvergessen(pool, user, ch, [FAKT], [t1], 2)
        redis_out = await erinnerungen.redis_nachvergessen(r, user, ch, [FAKT], [t1], 2)
        assert pg_out.turn_saetze == 3 and redis_out["verlauf_saetze"] == 3

        turns = await session.load_turns(r, user, ch, 10)
        assert [t["inhalt"] for t in turns] == ["Ich segle gern.", "Toll!", "Wie war dein Tag?", "Ruhig, danke."]
        assert [bool(t.get("vergessen")) for t in turns] == [True, True, False, False]
        rec = await pg.turn_record(pool, user, ch, t1)
        assert rec["user_text"] == "Ich segle gern." and rec["reply"] == "Toll!"
        assert "Quastenflosser" not in json.dumps(rec["result"])
        # an entry with nothing left stays as a placeholder
        await r.rpush(session.session_key(user, ch), json.dumps({"rolle": "user", "inhalt": "Quastenflosser spricht.",
                                                                 "turn_id": "t3"}))
        assert await session.verlauf_vergessen(r, user, ch, lambda s: "Quastenflosser" in s) == 1
        assert (await session.load_turns(r, user, ch, 1))[-1]["inhalt"] == session.VERGESSEN_PLATZHALTER
        # another pair's conversation keeps every word
        assert [t["inhalt"] for t in await session.load_turns(r, other, ch, 10)][:2] == list(said[0][1:])
        assert (await pg.turn_record(pool, other, ch, t1))["user_text"] == said[0][1]
    finally:
        await r.aclose()
        await pool.close()


def test_forgetting_takes_the_item_s_sentences_out_of_the_conversation(migrated):
    asyncio.run(_scenario(migrated))
