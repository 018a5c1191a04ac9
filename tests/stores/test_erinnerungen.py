"""What Nova remembers, as the person sees it (memory/erinnerungen.py): every kind of item with the
turn and message it came from — a profile sentence's turn found in the profile's before-images —
narrowed by a query; forgetting one takes it and what hangs on it, and taking a later turn back
never brings it back."""
import asyncio
import uuid
from datetime import datetime, timezone

import pytest

from memory import beziehung, erinnerungen, lzg, notizen, pg, ruecknahme, timeline, ziele
from tests.conftest import unit
from core.wire import Episode, Verdichtung
from core.wire import read_job
from tests.commit_jobs import result_dict


def _job(user: str, ch: str, t: str, text: str) -> dict:
    return {"kind": "turn", "turn": {"user_id": user, "character_id": ch, "turn_id": t, "user_text": text,
                                     "reply": "Ah.", "user_embedding": None, "result": result_dict(user, ch, t, "Ah."),
                                     "created_at": datetime.now(timezone.utc).isoformat()}, "log": []}


async def _scenario(stores):
    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    try:
        user, ch = f"ida{uuid.uuid4().hex[:6]}", "nova"
        t1, t2 = uuid.uuid4().hex, uuid.uuid4().hex
        await pg.write_turn_job(pool, read_job(_job(user, ch, t1, "Ich segle gern.")))
        await beziehung.profil_wachsen(pool, user, ch, f"praegung:{t1}", {"mensch_kern": "Ida segelt gern."},
                                       {"mensch_kern": 5})
        await lzg.episode_schreiben(pool, user, ch, Episode(quelle=t1, zeitpunkt=datetime.now(timezone.utc), verdichtungen=[
            Verdichtung(inhalt="Ida segelt auf dem Wannsee", embedding=unit(1).tolist())]))
        note = await notizen.create(pool, user, "Segeln", "Boot putzen", turn_id=t1, schritt="n:0")
        await pg.write_turn_job(pool, read_job(_job(user, ch, t2, "Ich habe Angst vor Hunden.")))
        await beziehung.profil_wachsen(pool, user, ch, f"praegung:{t2}", {"mensch_kern": "Ida hat Angst vor Hunden."},
                                       {"mensch_kern": 5})
        await timeline.add(pool, user, ch, "Tierarzt", datetime(2026, 12, 9, 9), "Europe/Berlin", turn_id=t2,
                           schritt="t:0")
        await ziele.bilden(pool, ch, user, "Hunde meiden", "kurz", 0.4, unit(2), quelle_turn=t2)
        await notizen.update(pool, user, note, turn=(ch, t2), inhalt="Boot putzen und Segel flicken")

        items = {i.inhalt: i for i in await erinnerungen.auflisten(pool, user, ch)}
        assert {i.art for i in items.values()} == {"profil.mensch_kern", "erinnerung", "notiz", "termin", "ziel"}
        assert items["Ida segelt gern."].turn_id == t1 and items["Ida segelt gern."].aus.text == "Ich segle gern."
        assert items["Ida hat Angst vor Hunden."].aus.text == "Ich habe Angst vor Hunden."
        assert items["Ida segelt auf dem Wannsee"].aus.text == "Ich segle gern."
        assert items["Hunde meiden"].turn_id == t2
        assert sorted(i.inhalt for i in await erinnerungen.auflisten(pool, user, ch, q="HUND")) == \
            ["Hunde meiden", "Ida hat Angst vor Hunden."]
        assert await erinnerungen.auflisten(pool, f"x{user}", ch) == []

        # forgetting a sentence and a note: gone, and a rewind of the turn that changed them brings neither back
        assert await erinnerungen.vergessen(pool, user, ch, items["Ida segelt gern."].id)
        assert await erinnerungen.vergessen(pool, user, ch, f"notiz-{note}")
        assert not await erinnerungen.vergessen(pool, user, ch, f"notiz-{note}")
        assert not await erinnerungen.vergessen(pool, f"x{user}", ch, items["Hunde meiden"].id)
        with pytest.raises(ValueError):
            await erinnerungen.vergessen(pool, user, ch, "lzg_knoten-1; DROP TABLE turns")
        await ruecknahme.zuruecknehmen(pool, user, ch, [t2])
        left = {i.inhalt for i in await erinnerungen.auflisten(pool, user, ch)}
        assert left == {"Ida segelt auf dem Wannsee"}
        assert (await beziehung.profile(pool, user, ch)).mensch_kern == ""
        node = [i for i in await erinnerungen.auflisten(pool, user, ch)][0]
        assert await erinnerungen.vergessen(pool, user, ch, node.id)
        assert await lzg.count_by_quelle(pool, user, ch) == {} and await erinnerungen.auflisten(pool, user, ch) == []
    finally:
        await pool.close()


def test_memories_show_where_they_came_from_and_stay_forgotten(migrated):
    asyncio.run(_scenario(migrated))
