"""`POST /v1/pairs/{u}/{c}/memories/forget` (serve/routes/users.py) on the real stores, the route
alone: without `confirm` a preview of what `q` matches and nothing forgotten; with `confirm`
exactly those of the ids that still match, each with the short-term entries of its exchange and
what was derived from it (the summary's, the profile's sentences, the library entry and research
of its turn) and every derived sentence that holds `q`'s own words; ids that are no memory ids: 422."""
import asyncio
import json
import uuid
from datetime import datetime, timezone

import httpx
from fastapi import FastAPI

from core.wire import Episode, Verdichtung
from memory import beziehung, bibliothek, kzg, pg, session
from memory.ops import PoolStore
from serve.routes import common, users
from tests.conftest import unit

FAKT = "Mein Papagei Quastenflosser spricht drei Sprachen."


class _Ingress:
    """The parts of the ingress the routes use, over a pool and a Redis client."""

    def __init__(self, pool, r, settings):
        self.store_ops, self._r, self.settings = PoolStore(pool), r, settings

    async def principal(self, authorization):
        return "someone"

    def owner(self, principal, user_id):
        pass

    async def known_character(self, character_id):
        pass

    async def redis_client(self):
        return self._r


async def _scenario(stores, settings):
    from redis.asyncio import Redis

    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    r = Redis.from_url(stores.redis_url)
    app = FastAPI()
    app.include_router(users.router)
    app.dependency_overrides[common.ingress] = lambda: _Ingress(pool, r, settings)
    try:
        user, ch, t1 = f"ida{uuid.uuid4().hex[:6]}", "nova", uuid.uuid4().hex
        await lzg_schreiben(pool, user, ch, t1)
        await kzg.add_entry(r, user, ch, f"Person B: {FAKT}", unit(1).tolist(), quelle=t1, entry_id=f"turn-{t1}")
        await beziehung.profil_wachsen(pool, user, ch, f"selbstbild:{t1}", {
            "mensch_kern": "Ida hat einen Papagei namens Quastenflosser.",
            "nova_beziehung": "Nova freut sich, wenn Ida vom Papagei Quastenflosser erzaehlt."},
            {"mensch_kern": 5, "nova_beziehung": 5})
        await bibliothek.add(pool, user, ch, "wissen", "Papageien", "Sie lernen Sprachen.", unit(2),
                             schluessel=f"delegation:{t1}:abcdef0123456789:wissen")
        await session.set_summary(r, user, ch, "Ida erzaehlte vom Papagei Quastenflosser. Sie segelt gern. "
                                               "Der Quastenflosser war heute still.")  # the asked word alone
        await r.rpush(f"delegationen:{user}:{ch}", json.dumps({"aufgabe": "Papageien", "turn_id": t1}))
        url = f"/v1/pairs/{user}/{ch}/memories/forget"
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            vorschau = (await c.post(url, json={"q": "quastenflosser"})).json()
            arten = sorted(i["art"] for i in vorschau["vorschau"])
            assert arten == ["erinnerung", "kurzzeit", "profil.mensch_kern"], vorschau
            assert await session.get_summary(r, user, ch) != "Sie segelt gern."  # a preview forgets nothing
            assert (await c.post(url, json={"q": "x", "confirm": ["bogus-1"]})).status_code == 422
            assert (await c.post(url, json={"q": ""})).status_code == 422
            r2 = await c.post(url, json={"q": "quastenflosser", "confirm": [*vorschau["confirm"], "knoten-999999"]})
            assert r2.status_code == 200, r2.text
            out = r2.json()
            assert sorted(out["vergessen"]) == sorted(vorschau["confirm"]) and out["nicht_vergessen"] == ["knoten-999999"]
            assert out["abgeleitet"] == {"profil_saetze": 1, "bibliothek": 1, "zusammenfassung_saetze": 2,
                                         "recherchen": 1, "impulse": 0, "turn_saetze": 0, "verlauf_saetze": 0}
            assert (await c.post(url, json={"q": "quastenflosser"})).json()["vorschau"] == []
        assert await session.get_summary(r, user, ch) == "Sie segelt gern."
        assert "Quastenflosser" not in json.dumps((await beziehung.profile(pool, user, ch)).model_dump())
        assert await bibliothek.eintraege(pool, user, ch) == [] and await r.llen(f"delegationen:{user}:{ch}") == 0
    finally:
        await r.aclose()
        await pool.close()


async def lzg_schreiben(pool, user, ch, turn_id):
    from memory import lzg

    await lzg.episode_schreiben(pool, user, ch, Episode(quelle=turn_id, zeitpunkt=datetime.now(timezone.utc),
                                                        verdichtungen=[Verdichtung(inhalt=f"Person B: {FAKT}",
                                                                                   embedding=unit(3).tolist())]))


def test_forget_everything_about_a_word_previews_then_forgets_the_confirmed(migrated, settings):
    asyncio.run(_scenario(migrated, settings))
