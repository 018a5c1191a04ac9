"""Notes CRUD and search; directives, at most three active instructions, profiles, emotion state;
decision rates from pipeline_log match a direct count."""
import asyncio

import psycopg
import pytest

from memory import beziehung, notizen, pg
from tests.conftest import new_pair, with_pool
from tests.commit_jobs import turn_job


def test_notes(pool):
    async def go(p):
        user, _ = new_pair("notes")
        a = await notizen.create(p, user, "Einkaufsliste", "Milch, Brot, Kaese", "Wocheneinkauf", ["haushalt"])
        b = await notizen.create(p, user, "Reiseplanung", "Zug nach Wien buchen", "Urlaub im Mai", ["reise"])
        assert [n.id for n in await notizen.find_by_keyword(p, user, "einkauf")] == [a]
        assert [n.id for n in await notizen.find_by_keyword(p, user, "REISE")] == [b]
        assert [n.id for n in await notizen.find_fulltext(p, user, "Wien")] == [b]
        assert await notizen.update(p, user, a, inhalt="Milch, Eier", themen=["haushalt", "essen"])
        assert [n.id for n in await notizen.find_by_keyword(p, user, "essen")] == [a]
        with pytest.raises(ValueError):
            await notizen.update(p, user, a, owner="x")
        listing = await notizen.proactive_listing(p, user)
        assert listing[0].model_dump() == {"name": "Einkaufsliste", "zusammenfassung": "Wocheneinkauf",
                                           "themen": ["haushalt", "essen"]}
        assert not await notizen.delete(p, "someone-else", b)
        assert await notizen.delete(p, user, b)
        assert [n.name for n in await notizen.proactive_listing(p, user)] == ["Einkaufsliste"]

    asyncio.run(with_pool(pool, go))


def test_instructions_directives_profiles_emotion(pool):
    async def go(p):
        user, ch = new_pair("char")
        ids = [await beziehung.add_instruction(p, user, ch, f"Anweisung {i}") for i in range(3)]
        with pytest.raises(beziehung.TooManyInstructions):
            await beziehung.add_instruction(p, user, ch, "vierte")
        assert await beziehung.deactivate_instruction(p, user, ch, ids[0])
        await beziehung.add_instruction(p, user, ch, "vierte")
        assert [i.text for i in await beziehung.instructions(p, user, ch)] == ["Anweisung 1", "Anweisung 2", "vierte"]
        d = await beziehung.add_directive(p, user, ch, "Sprich mich mit Du an.")
        assert [x.model_dump() for x in await beziehung.directives(p, user, ch)] == [{"id": d, "text": "Sprich mich mit Du an."}]
        await beziehung.set_directive_active(p, user, ch, d, False)
        assert await beziehung.directives(p, user, ch) == []
        await beziehung.set_profile(p, user, ch, nova_kern="neugierig", mensch_kern="Gaertnerin")
        await beziehung.set_profile(p, user, ch, nova_beziehung="vertraut")
        prof = await beziehung.profile(p, user, ch)
        assert prof.nova_kern == "neugierig" and prof.mensch_kern == "Gaertnerin"
        assert prof.nova_beziehung == "vertraut"
        assert (await pg.load_pair(p, user, ch))["nova_kern"] == "neugierig"
        assert await beziehung.load_emotion(p, user, ch) is None
        await beziehung.save_emotion(p, user, ch, "freude", 0.7, "erholung", [{"emotion": "freude"}])
        assert (await beziehung.load_emotion(p, user, ch)).vektor == "erholung"

    asyncio.run(with_pool(pool, go))


def test_decision_rates_match_sql(pool):
    async def go(p):
        user, ch = new_pair("rates")
        rows = [{"seq": i, "node": "thinker", "art": "switch", "entscheidung": "thinker.schnellcheck",
                 "outcome": "reasoning" if i % 4 == 0 else "pass", "inputs": {}, "at": "2026-11-30T10:00:00+00:00"}
                for i in range(8)]
        await pg.write_turn_job(p, turn_job(user, ch, "t1", "a", "b", created_at="2026-11-30T10:00:00+00:00", log=rows))
        return await pg.decision_rates(p)

    rates = {(r.entscheidung, r.outcome): r for r in asyncio.run(with_pool(pool, go))}
    with psycopg.connect(pool) as conn:
        total, reasoning = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE outcome = 'reasoning') FROM pipeline_log"
            " WHERE art = 'switch' AND entscheidung = 'thinker.schnellcheck'").fetchone()
    r = rates[("thinker.schnellcheck", "reasoning")]
    assert r.count == reasoning and abs(r.rate - reasoning / total) < 1e-6
