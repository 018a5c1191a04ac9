"""Taking a turn back (memory/ruecknahme.py) leaves every store as it was before the turn: a pair
gets a first turn's writes, is read whole (every table and key of the user, as the export reads
them), gets a second turn that writes, changes and deletes in every store the way a turn does, is
taken back — and is read again: the same, but for the retraction's own records. Cut short after
its Postgres step and run again, the retraction ends in the same place."""
import asyncio
import json
import time
import uuid
from datetime import datetime, timezone

from memory import (ausstehender_auftrag, beziehung, erasure, kzg, lzg, notizen, outbox, pg, redis_vorher, ruecknahme,
                    session, timeline, ziele)
from pipeline.nodes.gv_node import gv_key
from tests.conftest import unit
from core.state import AktiviertesZiel
from core.wire import Episode, TurnJob, Verdichtung
from tests.commit_jobs import commit, turn_job

BERLIN = "Europe/Berlin"
EIGENE = ("zurueckgenommene_turns",)
"""The retraction's own record (Postgres): which turns were taken back."""
EIGENE_SCHLUESSEL = ("zurueckgenommen:", "kzg:", "vorher:")
"""Its own keys, and the counter of the short-term memory's writes (it only moves forward; the
entries themselves are compared below)."""


def _turn_job(user: str, ch: str, t: str, text: str, emotion: str) -> TurnJob:
    now = datetime.now(timezone.utc).isoformat()
    return turn_job(user, ch, t, text, f"Antwort auf {text}", created_at=now,
                    nova_zustand={"emotion": emotion, "arousal": 0.5, "stand": now},
                    log=[{"seq": 0, "node": "responder", "art": "switch", "entscheidung": "responder.ergebnis",
                          "outcome": "antwort", "inputs": {}, "at": now}])


async def _commit(r, user: str, ch: str, t: str, text: str, emotion: str) -> None:
    job = _turn_job(user, ch, t, text, emotion)
    await session.commit_turn(r, commit(user, ch, t, reply=f"Antwort auf {text}", text=text, jobs=[job],
                                        keep_turns=500, ttl_s=3600,
                                        zustand=job.turn.nova_zustand))


async def _erster(pool, r, user: str, ch: str, t: str) -> dict[str, int]:
    """The first turn: it makes what the second one will change."""
    await _commit(r, user, ch, t, "Ich heisse Tom.", "freude")
    await pg.write_turn_job(pool, _turn_job(user, ch, t, "Ich heisse Tom.", "freude"))
    await beziehung.profil_wachsen(pool, user, ch, f"praegung:{t}", {"mensch_kern": "Tom segelt gern."},
                                   {"mensch_kern": 5})
    directive = await beziehung.add_directive(pool, user, ch, "Sprich mich mit Du an.", turn_id=t, schritt="d:0")
    note = await notizen.create(pool, user, "Einkauf", "Milch", turn_id=t, schritt="n:0")
    await notizen.create(pool, user, "Segeln", "Boot putzen", turn_id=t, schritt="n:1")
    entry = await timeline.add(pool, user, ch, "Zahnarzt", datetime(2026, 12, 7, 14), BERLIN, turn_id=t, schritt="t:0")
    goal = (await ziele.bilden(pool, ch, user, "Segeln lernen", "mittel", 0.5, unit(1), quelle_turn=t)).id
    nodes = (await lzg.episode_schreiben(pool, user, ch, Episode(quelle=t, zeitpunkt=datetime.now(timezone.utc), verdichtungen=[
        Verdichtung(inhalt="Tom segelt", embedding=unit(2).tolist())]))).ids
    await beziehung.anweisungen_aendern(pool, user, ch, neu=["Antworte kurz."], turn_id=t, schritt="c:0")
    await r.hset(gv_key(user, ch), mapping={"cluster": "paradox", "gv_detail": "Segeln"})
    await kzg.add_entry(r, user, ch, "Tom segelt", unit(3), quelle=t, entry_id=f"turn-{t}")
    return {"directive": directive, "note": note, "entry": entry, "goal": goal, "node": nodes[0]}


async def _zweiter(pool, r, user: str, ch: str, t: str, ids: dict[str, int]) -> None:
    """The second turn, writing as a turn writes: new rows and keys, updates, deletes, overwrites."""
    await _commit(r, user, ch, t, "Ich habe Angst vor Hunden.", "angst")
    await pg.write_turn_job(pool, _turn_job(user, ch, t, "Ich habe Angst vor Hunden.", "angst"))
    await beziehung.profil_wachsen(pool, user, ch, f"praegung:{t}", {"mensch_kern": "Tom hat Angst vor Hunden."},
                                   {"mensch_kern": 5})
    await beziehung.set_directive_active(pool, user, ch, ids["directive"], False, turn_id=t)
    await notizen.update(pool, user, ids["note"], turn=(ch, t), inhalt="Milch und Brot")
    found = await notizen.find_by_keyword(pool, user, "Segeln")
    await notizen.delete(pool, user, found[0].id, turn=(ch, t))
    await notizen.create(pool, user, "Hunde", "meiden", turn_id=t, schritt="n:0")
    await timeline.move(pool, user, ch, ids["entry"], datetime(2026, 12, 8, 9), BERLIN, turn_id=t)
    await timeline.add(pool, user, ch, "Tierarzt", datetime(2026, 12, 9, 9), BERLIN, turn_id=t, schritt="t:0")
    await ziele.verstaerken(pool, [AktiviertesZiel(id=ids["goal"], inhalt="", horizont="mittel", motivation=0.9,
                                                   aktivierungs_staerke=0.9)], turn=(user, ch, t))
    await ziele.wiederholung_verstaerken(pool, ids["goal"], t, 0.9)
    await ziele.bilden(pool, ch, user, "Hunde meiden", "kurz", 0.4, unit(4), quelle_turn=t)
    new = (await lzg.episode_schreiben(pool, user, ch, Episode(quelle=t, zeitpunkt=datetime.now(timezone.utc), verdichtungen=[
        Verdichtung(inhalt="Angst vor Hunden", embedding=unit(5).tolist())]))).ids
    await lzg.add_synapses(pool, [(new[0], ids["node"], 0.5)], "praegung")
    await lzg.touch(pool, [ids["node"]], turn=(user, ch, t))
    aktiv = await beziehung.instructions(pool, user, ch)
    await beziehung.anweisungen_aendern(pool, user, ch, neu=["Antworte ausfuehrlich."], aufheben=[aktiv[0].id],
                                        turn_id=t, schritt="c:0")
    await redis_vorher.festhalten(r, user, ch, t, gv_key(user, ch))
    await r.hset(gv_key(user, ch), mapping={"cluster": "angst", "gv_detail": "Hunde"})
    await kzg.add_entry(r, user, ch, "Angst vor Hunden", unit(6), quelle=t, entry_id=f"turn-{t}")
    marke = (await session.load_summary(r, user, ch)).marke
    await session.fold_summary(r, user, ch, nach_marke=marke, text="Tom segelt.", marke="m1", bis_turn_id=t, neu=1,
                               turn_id=t)
    await ausstehender_auftrag.schreiben(r, user, ch, ausstehender_auftrag.Stand(turn_id=t, ausgang="neu"), gelesen="")
    await r.zadd("impulse:faellig", {json.dumps({"id": "i1", "user_id": user, "character_id": ch, "gedanke": "Hunde?",
                                                "aus_turn": t}): time.time() + 3600})
    await r.sadd(f"impulse:offen:{user}:{ch}", "i1")
    await r.set(f"aufgriff:geplant:{user}:{ch}:{t}", "1")
    await r.set(f"bg:done:{user}:{ch}:{t}", "1")
    await r.rpush(f"delegationen:{user}:{ch}", json.dumps({"aufgabe": "Hunde", "turn_id": t, "versuche": 0}))
    await r.zadd("errors:nodes", {f"{time.time():.6f}:responder:{user}:{ch}:{t}": time.time()})
    await outbox.enqueue(r, {"kind": "hintergrund", "turn_id": t, "state": {"stimulus": {
        "user_id": user, "character_id": ch, "turn_id": t}}})


async def _bild(pool, r, user: str) -> dict:
    """Everything stored of the user, as the export reads it (vectors left out, compared apart)."""
    tables = {t: sorted(await erasure.export_table(pool, user, t), key=lambda x: json.dumps(x, sort_keys=True))
              for t in erasure.EXPORT_TABLES if t not in EIGENE}
    keys = {k: v for k, v in (await erasure.export_keys(r, user)).items() if not k.startswith(EIGENE_SCHLUESSEL)}
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT a.inhalt, b.inhalt FROM lzg_synapsen s JOIN lzg_knoten a ON a.id = s.von_id"
                                 " JOIN lzg_knoten b ON b.id = s.nach_id WHERE a.user_id = %s ORDER BY 1, 2", (user,))
        synapsen = await cur.fetchall()
    entries = await r.hgetall(f"kzg:{user}:nova:entries")
    return {"pg": tables, "redis": keys, "synapsen": synapsen, "kzg": sorted(entries)}


async def _zuruecknehmen(pool, r, user: str, ch: str, ids: list[str], *, abbrechen: bool = False) -> None:
    await ruecknahme.zaun(r, user, ch, ids, warten_s=2)
    await ruecknahme.zuruecknehmen(pool, user, ch, ids)
    if abbrechen:
        return
    await ruecknahme.zuruecknehmen_redis(r, user, ch, ids)


async def _scenario(stores, abbrechen: bool):
    from redis.asyncio import Redis

    r = Redis.from_url(stores.redis_url)
    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    try:
        await outbox.ensure_group(r)
        user, ch = f"tom{uuid.uuid4().hex[:6]}", "nova"
        t1, t2 = uuid.uuid4().hex, uuid.uuid4().hex
        ids = await _erster(pool, r, user, ch, t1)
        vorher = await _bild(pool, r, user)
        await _zweiter(pool, r, user, ch, t2, ids)
        mitten = await _bild(pool, r, user)
        changed = {f"{part}:{k}" for part in ("pg", "redis") for k in set(vorher[part]) | set(mitten[part])
                   if vorher[part].get(k) != mitten[part].get(k)}
        k = f"{user}:{ch}"
        assert {"pg:turns", "pg:pipeline_log", "pg:pair_profiles", "pg:nova_emotion", "pg:lzg_knoten", "pg:ziele",
                "pg:timeline", "pg:notizen", "pg:direktiven", "pg:charakter_anweisungen", "pg:turn_vorher",
                f"redis:session:{k}:turns", f"redis:session:{k}:summary", f"redis:nova:zustand:{k}",
                f"redis:gv:detail:{k}", f"redis:auftrag:ausstehend:{k}", f"redis:turnres:{k}:{t2}",
                f"redis:delegationen:{k}", f"redis:aufgriff:geplant:{k}:{t2}", f"redis:impulse:offen:{k}",
                f"redis:{outbox.OUTBOX_STREAM}", "redis:impulse:faellig"} <= changed, sorted(changed)
        await _zuruecknehmen(pool, r, user, ch, [t2], abbrechen=abbrechen)
        if abbrechen:  # cut short after Postgres: the whole retraction runs again
            await _zuruecknehmen(pool, r, user, ch, [t2])
        nachher = await _bild(pool, r, user)
        for part in ("pg", "redis"):
            diff = {k for k in set(vorher[part]) | set(nachher[part]) if vorher[part].get(k) != nachher[part].get(k)}
            assert not diff, {k: (vorher[part].get(k), nachher[part].get(k)) for k in diff}
        assert nachher == vorher
        # its background job does nothing now, a queued one is gone, and a third run changes nothing
        assert await ruecknahme.job_zurueckgenommen(r, {"kind": "turn", "turn": {"user_id": user, "character_id": ch,
                                                                                   "turn_id": t2}})
        assert not await ruecknahme.job_zurueckgenommen(r, {"kind": "turn", "turn": {
            "user_id": user, "character_id": ch, "turn_id": t1}})
        await _zuruecknehmen(pool, r, user, ch, [t2])
        assert await _bild(pool, r, user) == vorher
        # a turn job that slipped past the fence finds the retraction's record and writes nothing
        await pg.write_turn_job(pool, _turn_job(user, ch, t2, "Ich habe Angst vor Hunden.", "angst"))
        assert await _bild(pool, r, user) == vorher
    finally:
        await pool.close()
        await r.aclose()


def test_a_turn_taken_back_leaves_every_store_as_before_it(migrated):
    asyncio.run(_scenario(migrated, abbrechen=False))


def test_a_retraction_cut_short_and_run_again_ends_in_the_same_place(migrated):
    asyncio.run(_scenario(migrated, abbrechen=True))
