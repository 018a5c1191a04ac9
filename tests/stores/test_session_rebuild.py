"""Redis lost a pair's session history (a restart without data): the pair rebuilds it from the
turns in Postgres before its next turn (issue #15), in the dispatcher's form — the human's message,
Nova's own thought by its speaker, no second message of the human for a Thinker retry — and never
over a history that is there."""
import asyncio

from redis.asyncio import Redis

from memory import pg, session
from core.state import SessionTurn
from tests.conftest import new_pair, with_pool
from core.wire import read_job
from tests.commit_jobs import result_dict


def _job(u, c, turn_id, text, reply, at, **result):
    return {"kind": "turn", "turn": {"user_id": u, "character_id": c, "turn_id": turn_id, "user_text": text, "reply": reply,
                     "user_embedding": None, "created_at": at,
                     "result": result_dict(u, c, turn_id, reply, created_at=at, **{"character_name": "Mira", "herkunft": "user", **result})},
            "log": []}


def test_a_lost_history_is_rebuilt_from_postgres_once(stores, pool):
    u, c = new_pair("rebuild")

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            for job in (_job(u, c, "t1", "Hallo Mira", "Hallo!", "2026-12-01T10:00:00+00:00"),
                        _job(u, c, "t2", "Ob es regnet?", "Vielleicht.", "2026-12-01T10:05:00+00:00",
                             herkunft="eigener_impuls"),
                        _job(u, c, "t2-retry", "Ob es regnet?", "Es bleibt trocken.", "2026-12-01T10:06:00+00:00",
                             herkunft="self_trigger", ursprung_turn_id="t2")):
                await pg.write_turn_job(p, read_job(job))

            def lade(limit):
                return pg.recent_turn_records(p, u, c, limit)

            assert await session.count_turns(r, u, c) == 0  # Redis holds nothing of the pair
            assert await session.verlauf_wiederherstellen(r, lade, u, c, 500) == 5
            turns = await session.load_turns(r, u, c, 50)
            assert [(t["rolle"], t["sprecher"], t["inhalt"]) for t in turns] == [
                ("user", "Person B", "Hallo Mira"), ("assistant", "Mira", "Hallo!"),
                ("assistant", "Mira (eigener Gedanke)", "Ob es regnet?"), ("assistant", "Mira", "Vielleicht."),
                ("assistant", "Mira", "Es bleibt trocken.")]
            assert all(t["quelle"] == "postgres" for t in turns)
            # the nodes read them as they read any session turn
            assert [SessionTurn.model_validate(t).herkunft for t in turns][-1] == "self_trigger"
            # a history that is there is never overwritten
            assert await session.verlauf_wiederherstellen(r, lade, u, c, 500) == 0
            assert len(await session.load_turns(r, u, c, 50)) == 5
            # only the last `keep` turns come back
            await r.delete(session.session_key(u, c))
            assert await session.verlauf_wiederherstellen(r, lade, u, c, 1) == 1
            assert [t["inhalt"] for t in await session.load_turns(r, u, c, 50)] == ["Es bleibt trocken."]
        finally:
            await r.aclose()

    asyncio.run(with_pool(pool, go))


def test_a_rebuilt_history_keeps_the_name_and_the_date_of_a_message(stores, pool):
    u, c = new_pair("rebuild-name")

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            await pg.write_turn_job(p, read_job(_job(u, c, "n1", "Ich war am See.", "Schön!", "2026-12-05T09:00:00+00:00",
                                                     name="Caroline", zeitpunkt="2023-05-08T12:00:00+00:00")))
            await pg.write_turn_job(p, read_job(_job(u, c, "n2", "Und heute?", "Regen.", "2026-12-05T09:01:00+00:00")))
            assert await session.verlauf_wiederherstellen(
                r, lambda limit: pg.recent_turn_records(p, u, c, limit), u, c, 500) == 4
            turns = [SessionTurn.model_validate(t) for t in await session.load_turns(r, u, c, 50)]
            er, sie, heute, _ = turns
            assert (er.sprecher, er.name, er.datiert, er.time.isoformat()) == (
                "Person B", "Caroline", True, "2023-05-08T12:00:00+00:00")
            assert (sie.rolle, sie.time.isoformat()) == ("assistant", "2023-05-08T12:00:00+00:00")
            assert (heute.name, heute.datiert, heute.time.isoformat()) == (None, None, "2026-12-05T09:01:00+00:00")
        finally:
            await r.aclose()

    asyncio.run(with_pool(pool, go))
