"""Forgetting reaches what was derived from the forgotten item (memory/erinnerungen.py
`nachvergessen`, `redis_nachvergessen`): the profile's sentences and the session summary's
sentences that repeat its distinctive words (and their before-images, so a rewind brings none
back), the library entries the pixie wrote from its turn, the research still queued from that turn
and the impulses planned from it; what has other words, or came from another turn, stays."""
import asyncio
import json
import uuid
from datetime import datetime, timezone

from core.bestand import ErinnerungQuelle, Nachvergessen
from core.wire import Episode, Verdichtung
from memory import beziehung, bibliothek, erinnerungen, lzg, pg, redis_vorher, ruecknahme, session
from tests.conftest import unit

FAKT = "Mein Papagei Quastenflosser spricht drei Sprachen."


def test_the_distinctive_words_rule():
    woerter = erinnerungen.inhaltswoerter(f"[04 December 2026] Person B: {FAKT}")
    assert woerter == {"papagei", "quastenflosser", "spricht", "drei", "sprachen"}
    assert erinnerungen.verraet("Person B hat einen Papagei namens Quastenflosser.", [woerter], 2)
    assert not erinnerungen.verraet("Person B hat einen Papagei.", [woerter], 2)  # one shared word
    assert not erinnerungen.verraet("Person B mag Tee und spricht leise.", [woerter], 2)
    assert erinnerungen.verraet("Der Tierarzt kam.", [erinnerungen.inhaltswoerter("Tierarzt")], 2)  # all of its one
    assert not erinnerungen.verraet("Alles gut.", [frozenset()], 2)


async def _scenario(stores):
    from redis.asyncio import Redis

    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    r = Redis.from_url(stores.redis_url)
    try:
        user, ch = f"ida{uuid.uuid4().hex[:6]}", "nova"
        t1, t2, t3 = (uuid.uuid4().hex for _ in range(3))
        await lzg.episode_schreiben(pool, user, ch, Episode(quelle=t1, zeitpunkt=datetime.now(timezone.utc), verdichtungen=[
            Verdichtung(inhalt=f"Person B: {FAKT}", embedding=unit(1).tolist())]))
        await beziehung.profil_wachsen(pool, user, ch, f"selbstbild:{t1}", {
            "mensch_kern": "Ida hat einen Papagei namens Quastenflosser.",
            "nova_beziehung": "Nova freut sich, wenn Ida vom Quastenflosser erzaehlt, der Sprachen spricht."},
            {"mensch_kern": 5, "nova_beziehung": 5})
        await beziehung.profil_wachsen(pool, user, ch, f"selbstbild:{t2}", {
            "mensch_kern": "Ida segelt gern.", "nova_beziehung": "Nova mag Idas Humor."},
            {"mensch_kern": 5, "nova_beziehung": 5})
        await beziehung.profil_wachsen(pool, user, ch, f"praegung:{t3}", {"mensch_themen": "Segeln"},
                                       {"mensch_themen": 3})
        await bibliothek.add(pool, user, ch, "wissen", "Papageien", "Papageien lernen Sprachen.", unit(2),
                             schluessel=f"delegation:{t1}:abcdef0123456789:wissen")
        await bibliothek.add(pool, user, ch, "wissen", "Segeln", "Der Wannsee ist flach.", unit(3),
                             schluessel=f"delegation:{t2}:abcdef0123456789:wissen")
        key = session.summary_key(user, ch)
        await session.set_summary(r, user, ch, "Ida erzaehlte vom Papagei Quastenflosser. Sie segelt gern.")
        await redis_vorher.festhalten(r, user, ch, t3, key)  # a later fold's before-image holds it too
        await session.set_summary(r, user, ch, "Ida erzaehlte vom Papagei Quastenflosser.\nSie segelt gern. Tee.")
        for t in (t1, t2):
            await r.rpush(f"delegationen:{user}:{ch}", json.dumps({"aufgabe": f"Recherche {t}", "turn_id": t,
                                                                  "versuche": 0}))
        await r.zadd("impulse:faellig", {json.dumps({"id": "i1", "user_id": user, "character_id": ch,
                                                     "gedanke": "Quastenflosser fragen", "aus_turn": t1}): 1.0})

        knoten = next(i for i in await erinnerungen.auflisten(pool, user, ch) if i.art == "erinnerung")
        quelle = await erinnerungen.beschreiben(pool, user, ch, knoten.id)
        assert quelle == ErinnerungQuelle(inhalt=f"Person B: {FAKT}", turn_id=t1)
        assert await erinnerungen.vergessen(pool, user, ch, knoten.id)
        pg_out = await erinnerungen.nachvergessen(pool, user, ch, [quelle.inhalt], [t1], 2)
        redis_out = await erinnerungen.redis_nachvergessen(r, user, ch, [quelle.inhalt], [t1], 2)
        assert pg_out == Nachvergessen(profil_saetze=2, bibliothek=1, turn_saetze=0)
        assert redis_out == {"zusammenfassung_saetze": 1, "verlauf_saetze": 0, "recherchen": 1, "impulse": 1}

        profil = await beziehung.profile(pool, user, ch)
        assert profil.mensch_kern == "Ida segelt gern." and profil.nova_beziehung == "Nova mag Idas Humor."
        assert [e.titel for e in await bibliothek.eintraege(pool, user, ch)] == ["Segeln"]
        assert await session.get_summary(r, user, ch) == "Sie segelt gern. Tee."
        assert [json.loads(x)["turn_id"] for x in await r.lrange(f"delegationen:{user}:{ch}", 0, -1)] == [t2]
        due = [json.loads(m) for m in await r.zrange("impulse:faellig", 0, -1)]  # shared by every pair
        assert [i for i in due if i.get("user_id") == user] == []
        # taking the later turns back brings none of it back: their before-images were cleaned too
        await ruecknahme.zuruecknehmen(pool, user, ch, [t3, t2])
        await redis_vorher.zuruecksetzen(r, user, ch, [t3])
        assert "Quastenflosser" not in json.dumps((await beziehung.profile(pool, user, ch)).model_dump())
        assert await session.get_summary(r, user, ch) == "Sie segelt gern."
        # a summary every sentence of which repeats the item is left empty
        await session.set_summary(r, user, ch, "Quastenflosser spricht Sprachen.")
        assert await erinnerungen.redis_nachvergessen(r, user, ch, [FAKT], [], 2) == \
            {"zusammenfassung_saetze": 1, "verlauf_saetze": 0, "recherchen": 0, "impulse": 0}
        assert await session.get_summary(r, user, ch) == ""
    finally:
        await r.aclose()
        await pool.close()


def test_forgetting_takes_what_was_derived_from_the_item(migrated):
    asyncio.run(_scenario(migrated))
