"""Knowledge that changes (memory/LESEPFAD.md, "Knowledge that changes"): a long-term memory can be
marked superseded by a later one (`lzg.abloesen`): `gueltig_bis` on the old node, a synapse
`abgeloest_durch` from old to new. Praegung names the recalled memories a turn replaces or ends
(its answer's `abgeloest`, answered here by the scripted engine); the episode's write marks them
once per turn, in its own transaction; taking the turn back takes the marks back. The read ranks
the current memory first and hands a superseded one to the prompt as past; the memory view shows
the end and the successor, and forgetting the successor does not revive the old fact."""
import asyncio
import json
from datetime import datetime, timedelta, timezone

from core.settings import Settings
from core.state import (DraftRecord, Erinnerung, HintergrundRecord, MemoryRecord, PairRecord, PerzeptionRecord,
                        Resonanz, Stimulus, TurnState)
from memory import beziehung, erinnerungen, kzg, lzg, ruecknahme
from memory.config import MemoryConfig
from memory.lesepfad import erinnern
from core.wire import Episode
from memory.ops import PoolStore
from pipeline.nodes import praegung, reducer
from pipeline.runner import run_node
from pipeline.thinker.tools import format_faktencheck_treffer
from tests.conftest import at_cosine, new_pair, unit, with_pool
from tests.scripted_llm import ScriptedLLM, deps_for

DAMALS = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
SPAETER = datetime(2026, 9, 14, 18, 0, tzinfo=timezone.utc)
CFG = MemoryConfig(lesepfad_boden=-1)


class _Embedder:
    """Every text on one axis: the memories of one subject near-equal for every question."""

    async def embed(self, trace, text):
        return unit(1)


async def _mark(p, alt: int):
    async with p.connection() as conn:
        cur = await conn.execute("SELECT gueltig_bis, abgeloest_durch FROM lzg_knoten WHERE id=%s", (alt,))
        bis, durch = await cur.fetchone()
        cur = await conn.execute("SELECT nach_id FROM lzg_synapsen WHERE von_id=%s AND art='abgeloest_durch'", (alt,))
        return bis, durch, [r[0] for r in await cur.fetchall()]


def test_the_store_op_marks_once_and_a_rewind_takes_the_mark_back(pool):
    user, ch = new_pair("abl")

    async def go(p):
        alt, neu = await lzg.add_nodes(p, user, ch, [{"inhalt": "Bello lebt", "embedding": unit(1)},
                                                     {"inhalt": "Bello ist gestorben", "embedding": unit(2)}])
        store = PoolStore(p)
        first = await store.lzg.abloesen(user, ch, alt, neu, "t9", seit=DAMALS)
        again = await store.lzg.abloesen(user, ch, alt, neu, "t9", seit=datetime.now(timezone.utc))
        marked = await _mark(p, alt)
        fremd = await store.lzg.abloesen("someone-else", ch, alt, neu, "t9")
        await ruecknahme.zuruecknehmen(p, user, ch, ["t9"])
        return neu, first, again, marked, fremd, await _mark(p, alt)

    neu, first, again, marked, fremd, after = asyncio.run(with_pool(pool, go))
    assert first is True and again is False and fremd is False
    assert marked == (DAMALS, neu, [neu])
    assert after == (None, None, [])


def _state(user, ch, turn_id, text, when, gelesen: list[Erinnerung]) -> TurnState:
    return TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id=turn_id, user_prompt=text,
                                       received_at=when),
                     pair=PairRecord(character_name="Nova"), draft=DraftRecord(reply="Oh.", model="m"),
                     hintergrund=HintergrundRecord(kern=text),
                     memory=MemoryRecord(lzg_resonanz=Resonanz(erinnerungen=gelesen, ids=[e.id for e in gelesen])),
                     perzeption=PerzeptionRecord(emotion="trauer", arousal=0.5))


async def _turn(p, r, user, ch, turn_id, text, when, merke, abgeloest=(), gelesen=(), profil=""):
    llm = ScriptedLLM({"praegung": [json.dumps({
        "erinnerungen": [{"inhalt": m, "dimension": "erlebnis"} for m in merke], "profil_mensch": profil,
        "beschaeftigt_mensch": "", "abgeloest": list(abgeloest)})]})
    deps = deps_for(llm, store=PoolStore(p), redis=r, embedder=_Embedder(), turn=(user, ch, turn_id),
                    settings=Settings(timezone="Europe/Berlin"))
    await run_node(praegung.NODE, _state(user, ch, turn_id, text, when, list(gelesen)), deps)
    return deps, llm


async def _gemerkt(p, user, ch, turn_id) -> int:
    async with p.connection() as conn:
        cur = await conn.execute("SELECT id FROM lzg_knoten WHERE user_id=%s AND character_id=%s AND quelle=%s"
                                 " AND dimension <> 'gespraech'", (user, ch, turn_id))
        return (await cur.fetchone())[0]


async def _vorher_zeilen(p, user, ch, turn_id) -> int:
    async with p.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM turn_vorher WHERE user_id=%s AND character_id=%s AND turn_id=%s",
                                 (user, ch, turn_id))
        return (await cur.fetchone())[0]


async def _alt_und_kzg(p, r, user, ch):
    """Turn t1 remembers Bello alive (its node and its short-term entry); its read for t2."""
    await _turn(p, r, user, ch, "t1", "Bello spielt gern im Garten.", DAMALS, ["Bello, der Hund von Person B, lebt"])
    alt = await _gemerkt(p, user, ch, "t1")
    await kzg.add_entry(r, user, ch, "Bello spielt im Garten", unit(1), quelle="t1", entry_id="turn-t1")
    gelesen = await erinnern(p, user, ch, "Bello", unit(1), CFG)
    return alt, [e for e in gelesen.erinnerungen if e.id == alt]


def test_praegung_marks_what_the_turn_replaces_once_and_a_rewind_takes_it_back(pool, stores):
    from redis.asyncio import Redis

    user, ch = new_pair("abl-p")

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        alt, gelesen = await _alt_und_kzg(p, r, user, ch)
        await beziehung.set_profile(p, user, ch, mensch_kern="Person B hat einen Hund, Bello.\nPerson B mag Tee.")
        d2, llm2 = await _turn(p, r, user, ch, "t2", "Bello ist gestorben.", SPAETER, ["Bellos Tod: er ist gestorben"],
                               abgeloest=["E1"], gelesen=gelesen, profil="Person B trauert um Bello, den Hund.")
        profil = (await beziehung.profile(p, user, ch)).mensch_kern
        neu = await _gemerkt(p, user, ch, "t2")
        marked, bilder = await _mark(p, alt), await _vorher_zeilen(p, user, ch, "t2")
        # a retried job: nothing asked, nothing marked twice; a delivery racing past the check neither
        again, llm = await _turn(p, r, user, ch, "t2", "Bello ist gestorben.", SPAETER, ["x"], abgeloest=["E1"],
                                 gelesen=gelesen)
        ep = Episode(quelle="t2", zeitpunkt=SPAETER, abloesungen=[alt])
        race = await lzg.episode_schreiben(p, user, ch, ep)
        nach_retry = (await _mark(p, alt), await _vorher_zeilen(p, user, ch, "t2"), llm.calls)
        kurz = {e["id"]: e for e in await kzg.eintraege(r, user, ch)}["turn-t1"]
        await ruecknahme.zuruecknehmen(p, user, ch, ["t2"])
        await ruecknahme.zuruecknehmen_redis(r, user, ch, ["t2"])
        zurueck = (await _mark(p, alt), {e["id"]: e for e in await kzg.eintraege(r, user, ch)}["turn-t1"],
                   (await beziehung.profile(p, user, ch)).mensch_kern)
        await r.aclose()
        return alt, neu, d2, llm2, marked, bilder, nach_retry, race, kurz, zurueck, profil

    alt, neu, d2, llm2, marked, bilder, nach_retry, race, kurz, zurueck, profil = asyncio.run(with_pool(pool, go))
    # the profile follows: the sentence that repeats the ended memory leaves, the turn's own stays
    assert profil == "Person B mag Tee.\nPerson B trauert um Bello, den Hund."
    assert zurueck[2] == "Person B hat einen Hund, Bello.\nPerson B mag Tee."
    gezeigt = "\n".join(m["content"] for m in llm2.calls[0]["messages"])
    assert "[ERINNERUNGEN]\nE1: Bello, der Hund von Person B, lebt\n" in gezeigt
    assert marked == (SPAETER, neu, [neu])
    row = next(r for r in d2.trace.decisions(praegung.ENTSCHEIDUNG))
    assert row.inputs["abgeloest"] == [alt]
    assert nach_retry == (marked, bilder, []) and race.neu is False and race.abgeloest == []
    assert (kurz["abgeloest_durch"], kurz["nachfolger"], kurz["abgeloest_seit"]) == \
        ("t2", "Bellos Tod: er ist gestorben", SPAETER.timestamp())
    assert zurueck[0] == (None, None, []) and "abgeloest_durch" not in zurueck[1]


def test_a_correction_by_the_person_ends_the_wrong_memory(pool, stores):
    from redis.asyncio import Redis

    user, ch = new_pair("abl-k")

    async def go(p):
        r = Redis.from_url(stores.redis_url)
        await _turn(p, r, user, ch, "k1", "Ich bin Bernd.", DAMALS, ["Person B heisst Bernd"])
        falsch = await _gemerkt(p, user, ch, "k1")
        gelesen = (await erinnern(p, user, ch, "Bernd", unit(1), CFG)).erinnerungen
        gelesen = [e for e in gelesen if e.id == falsch]
        await _turn(p, r, user, ch, "k2", "Nein, ich heiße Bert, nicht Bernd.", DAMALS + timedelta(minutes=1),
                    ["Person B heisst Bert, nicht Bernd"], abgeloest=[" e1 ", "E7"], gelesen=gelesen)
        richtig = await _gemerkt(p, user, ch, "k2")
        gelesen = await erinnern(p, user, ch, "Wie heisse ich?", unit(1), CFG, ausbreiten=False)
        await r.aclose()
        return falsch, richtig, await _mark(p, falsch), gelesen

    falsch, richtig, mark, gelesen = asyncio.run(with_pool(pool, go))
    assert mark[1:] == (richtig, [richtig]) and mark[0] is not None
    ids = [e.id for e in gelesen.erinnerungen]
    assert ids.index(richtig) < ids.index(falsch)
    e = next(e for e in gelesen.erinnerungen if e.id == falsch)
    assert e.als_text().startswith("früher: Person B heisst Bernd, seit ") and e.als_text().endswith(
        ": Person B heisst Bert, nicht Bernd")


def test_the_read_ranks_the_current_memory_first_and_hands_the_old_one_on_as_past(pool):
    user, ch = new_pair("abl-r")

    async def go(p):
        # the old memory is the better match; the new one is not reached by the read on its own
        alt, neu = await lzg.add_nodes(p, user, ch, [
            {"inhalt": "Person B wohnt in Hamburg", "embedding": unit(0), "zeitpunkt": DAMALS},
            {"inhalt": "Person B ist nach Leipzig gezogen", "embedding": at_cosine(0.1), "zeitpunkt": SPAETER}])
        vorher = await erinnern(p, user, ch, "Wo wohnt Person B?", unit(0), CFG, k=1)
        await lzg.abloesen(p, user, ch, alt, neu, None, seit=SPAETER)
        return alt, neu, vorher, await erinnern(p, user, ch, "Wo wohnt Person B?", unit(0), CFG, k=2)

    alt, neu, vorher, nachher = asyncio.run(with_pool(pool, go))
    assert vorher.ids == [alt]
    assert nachher.ids == [neu, alt]
    old = nachher.erinnerungen[1]
    assert (old.gueltig_bis, old.nachfolger) == (SPAETER.isoformat(), "Person B ist nach Leipzig gezogen")
    past = "früher: Person B wohnt in Hamburg, seit 14 September 2026: Person B ist nach Leipzig gezogen"
    assert past in reducer.block([], nachher) and past in reducer.block_tribunal([], nachher)
    assert format_faktencheck_treffer(nachher.erinnerungen).splitlines()[1].endswith(past)
    assert "früher" not in reducer.block([], nachher).splitlines()[-2]


def test_without_a_mark_recency_decides_between_near_equal_memories_of_one_subject(pool):
    user, ch = new_pair("abl-z")

    async def go(p):
        # the older one written last: its id would not put it first, only its date does
        neu, alt = await lzg.add_nodes(p, user, ch, [
            {"inhalt": "Person B arbeitet bei Siemens", "embedding": at_cosine(0.99), "zeitpunkt": SPAETER},
            {"inhalt": "Person B arbeitet bei Bosch", "embedding": unit(0), "zeitpunkt": DAMALS}])
        await lzg.add_nodes(p, user, ch, [{"inhalt": f"Anderes {i}", "embedding": unit(i)} for i in range(5, 25)])
        streng, fern = (MemoryConfig(lesepfad_boden=-1, lesepfad_gleichauf=0),
                        MemoryConfig(lesepfad_boden=-1, lesepfad_thema_kosinus=1))
        return neu, alt, [await erinnern(p, user, ch, "Wo arbeitet Person B?", unit(0), c, ausbreiten=False)
                          for c in (CFG, streng, fern)]

    neu, alt, (gelesen, streng, fern) = asyncio.run(with_pool(pool, go))
    assert gelesen.ids[:2] == [neu, alt]
    # not near-equal enough, or not the same subject: the read's own order stands
    assert streng.ids[:2] == [alt, neu] and fern.ids[:2] == [alt, neu]


def test_recency_applies_to_a_question_about_the_present_not_to_one_about_a_past_event(pool):
    user, ch = new_pair("abl-l")

    async def go(p):
        # the older memory the better match, the newer one of the same subject near-equal behind it
        alt, neu = await lzg.add_nodes(p, user, ch, [
            {"inhalt": "Person B wohnt in Hamburg", "embedding": unit(0), "zeitpunkt": DAMALS},
            {"inhalt": "Person B wohnt in Leipzig", "embedding": at_cosine(0.97), "zeitpunkt": SPAETER}])
        await lzg.add_nodes(p, user, ch, [{"inhalt": f"Anderes {i}", "embedding": unit(i)} for i in range(5, 25)])
        fragen = ("Wo wohnt Person B?", "Where does Person B live now?", "Wo hat Person B damals gewohnt?",
                  "Wann hast du Person B kennengelernt?", "When did Person B move?",
                  "Where was Person B living in 2025?")
        return alt, neu, [await erinnern(p, user, ch, f, unit(0), CFG, ausbreiten=False) for f in fragen]

    alt, neu, (jetzt_de, jetzt_en, damals, perfekt, when_did, datum) = asyncio.run(with_pool(pool, go))
    # the present state: the newer memory of the subject answers
    assert jetzt_de.ids[:2] == [neu, alt] and jetzt_en.ids[:2] == [neu, alt]
    # a past event: the read's relevance order stands
    for gelesen in (damals, perfekt, when_did, datum):
        assert gelesen.ids[:2] == [alt, neu]


def test_the_memory_view_shows_the_end_and_forgetting_the_successor_does_not_revive_the_old(pool):
    user, ch = new_pair("abl-v")

    async def go(p):
        alt, neu = await lzg.add_nodes(p, user, ch, [{"inhalt": "Person B raucht", "embedding": unit(1)},
                                                     {"inhalt": "Person B hat aufgehoert zu rauchen",
                                                      "embedding": unit(2)}])
        await lzg.abloesen(p, user, ch, alt, neu, None, seit=SPAETER)
        view = {i.id: i for i in await erinnerungen.auflisten(p, user, ch)}
        await erinnerungen.vergessen(p, user, ch, f"knoten-{neu}")
        danach = {i.id: i for i in await erinnerungen.auflisten(p, user, ch)}
        return alt, neu, view, danach, await erinnern(p, user, ch, "raucht Person B?", unit(1), CFG)

    alt, neu, view, danach, gelesen = asyncio.run(with_pool(pool, go))
    ende = view[f"knoten-{alt}"].abgeloest
    assert (ende.seit, ende.durch, ende.inhalt, ende.nachfolger_vergessen) == \
        (SPAETER.isoformat(), f"knoten-{neu}", "Person B hat aufgehoert zu rauchen", False)
    assert view[f"knoten-{neu}"].abgeloest is None
    ende = danach[f"knoten-{alt}"].abgeloest
    assert (ende.seit, ende.durch, ende.nachfolger_vergessen) == (SPAETER.isoformat(), None, True)
    old = next(e for e in gelesen.erinnerungen if e.id == alt)
    assert old.als_text() == "früher: Person B raucht (bis 14 September 2026)"


def test_a_superseded_short_term_entry_is_recalled_as_past(stores):
    from redis.asyncio import Redis

    user, ch = new_pair("abl-kzg")

    async def go():
        r = Redis.from_url(stores.redis_url)
        await kzg.add_entry(r, user, ch, "Bello spielt im Garten", unit(0), quelle="t1", entry_id="turn-t1")
        await kzg.add_entry(r, user, ch, "Bello ist gestorben", at_cosine(0.9), quelle="t2", entry_id="turn-t2")
        n = await kzg.abloesen(r, user, ch, ["turn-t1", "turn-weg"], "t2", "Bello ist gestorben", SPAETER.timestamp())
        again = await kzg.abloesen(r, user, ch, ["turn-t1"], "t3", "anders", 0.0)
        hits = await kzg.KZGIndex(user, ch).search(r, unit(0), threshold=0.5, top_k=5)
        view = erinnerungen.kurzzeit(await kzg.eintraege(r, user, ch))
        await r.aclose()
        return n, again, hits, view

    n, again, hits, view = asyncio.run(go())
    assert (n, again) == (1, 0)
    kept = reducer.reduce(reducer.entries(MemoryRecord(kzg=hits)))
    assert [e["inhalt"] for e in kept] == [
        "Bello ist gestorben", "früher: Bello spielt im Garten, seit 14 September 2026: Bello ist gestorben"]
    ende = {i.id: i.abgeloest for i in view}
    assert ende["kzg-turn-t2"] is None and ende["kzg-turn-t1"].inhalt == "Bello ist gestorben"


def test_forgetting_the_successor_leaves_no_word_of_it_in_the_short_term_entry_it_ended(stores):
    from redis.asyncio import Redis

    user, ch = new_pair("abl-kzg-vergessen")

    async def go():
        r = Redis.from_url(stores.redis_url)
        await kzg.add_entry(r, user, ch, "Bello spielt im Garten", unit(0), quelle="t1", entry_id="turn-t1")
        await kzg.abloesen(r, user, ch, ["turn-t1"], "t2", "Bello ist gestorben", SPAETER.timestamp())
        await erinnerungen.redis_nachvergessen(r, user, ch, ["Bello ist gestorben"], ["t2"], 2)
        hits = await kzg.KZGIndex(user, ch).search(r, unit(0), threshold=0.5, top_k=5)
        await r.aclose()
        return hits

    (hit,) = asyncio.run(go())
    assert hit.als_text() == "früher: Bello spielt im Garten (bis 14 September 2026)"  # ended, its successor gone
