"""Long-term memory's one write (`lzg.episode_schreiben`) as a live turn and an import use it: a
live exchange is kept verbatim and dated in the pair's time zone, linked to the previous exchange of
the same session, its distilled memories linked to it, once per turn; an import's session has the
same shape; and what Nova wrote in conversation is recalled through its surroundings like an
imported conversation is."""
import asyncio
import hashlib
from datetime import datetime, timedelta, timezone

from core.settings import Settings
from memory import lzg
from memory.config import MemoryConfig
from memory.importer import Turn, import_conversation
from memory.lesepfad import erinnern
from memory.ops import PoolStore
from pipeline.nodes import praegung
from pipeline.runner import run_node
from core.state import DraftRecord, HintergrundRecord, MemoryRecord, PairRecord, PerzeptionRecord, Stimulus, TurnState
from tests.conftest import new_pair, with_pool
from tests.scripted_llm import ScriptedLLM, deps_for

DIM = 384
SPAET = datetime(2026, 12, 3, 23, 30, tzinfo=timezone.utc)  # already the 4th in Berlin


def _vec(text: str) -> list[float]:
    """A vector of its own for every text (the dense channel tells nothing here: the keyword channel
    ranks)."""
    i = int(hashlib.sha1(text.encode()).hexdigest(), 16) % DIM
    return [1.0 if j == i else 0.0 for j in range(DIM)]


class _Embedder:
    def __init__(self):
        self.texts: list[str] = []

    async def embed(self, trace, text):
        self.texts.append(text)
        return _vec(text)


async def _turn(p, user, ch, turn_id, text, reply, when, merke=()):
    llm = ScriptedLLM({"praegung": [
        '{"erinnerungen": [%s], "profil_mensch": "", "beschaeftigt_mensch": ""}'
        % ", ".join('{"inhalt": "%s", "dimension": "erlebnis"}' % m for m in merke)]})
    embedder = _Embedder()
    deps = deps_for(llm, store=PoolStore(p), embedder=embedder, turn=(user, ch, turn_id),
                    settings=Settings(timezone="Europe/Berlin"))
    state = TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id=turn_id, user_prompt=text,
                                        received_at=when),
                      pair=PairRecord(character_name="Nova"), draft=DraftRecord(reply=reply, model="m"),
                      hintergrund=HintergrundRecord(kern=text), memory=MemoryRecord(),
                      perzeption=PerzeptionRecord(emotion="freude", arousal=0.6))
    await run_node(praegung.NODE, state, deps)
    return deps, embedder


async def _nodes(p, user, ch):
    async with p.connection() as conn:
        cur = await conn.execute("SELECT id, inhalt, dimension, beobachter, quelle FROM lzg_knoten"
                                 " WHERE user_id=%s AND character_id=%s ORDER BY id", (user, ch))
        nodes = await cur.fetchall()
        cur = await conn.execute("SELECT von_id, nach_id, art FROM lzg_synapsen WHERE von_id = ANY(%s)",
                                 ([n[0] for n in nodes],))
        return nodes, {(a, b, art) for a, b, art in await cur.fetchall()}


def test_a_live_exchange_is_kept_verbatim_dated_linked_and_once(pool):
    user, ch = new_pair("ep")

    async def go(p):
        d1, e1 = await _turn(p, user, ch, "t1", "Ich habe einen Hund.", "Wie heisst er denn?", SPAET,
                             merke=["Person B hat einen Hund"])
        await _turn(p, user, ch, "t2", "Er heisst Bello.", "Bello, wie schoen!", SPAET + timedelta(minutes=2))
        await _turn(p, user, ch, "t3", "Guten Morgen.", "Guten Morgen!", SPAET + timedelta(hours=9))
        again, _ = await _turn(p, user, ch, "t2", "Er heisst Bello.", "Bello, wie schoen!", SPAET)
        return d1, e1, again, await _nodes(p, user, ch)

    d1, e1, again, (nodes, edges) = asyncio.run(with_pool(pool, go))
    texts = [n[1] for n in nodes]
    # both sides verbatim, dated in the pair's time zone (23:30 UTC is the 4th in Berlin), the speaker named
    assert texts[:2] == ["[04 December 2026] Person B: Ich habe einen Hund.", "[04 December 2026] Nova: Wie heisst er denn?"]
    assert [(n[2], n[3], n[4]) for n in nodes[:3]] == [("gespraech", "mensch", "t1"), ("gespraech", "nova", "t1"),
                                                        ("erlebnis", "nova", "t1")]
    assert e1.texts[:2] == texts[:2]  # the vector is made from the node's text
    ids = {n[1]: n[0] for n in nodes}
    hund, frage, gemerkt = (ids[texts[0]], ids[texts[1]], ids["Person B hat einen Hund"])
    bello, schoen = ids["[04 December 2026] Person B: Er heisst Bello."], ids["[04 December 2026] Nova: Bello, wie schoen!"]
    morgen = ids["[04 December 2026] Person B: Guten Morgen."]
    nachbar = {(a, b) for a, b, art in edges if art == "nachbar"}
    # the exchange in order, the next exchange of the session after it; nine hours later a new session
    assert {(hund, frage), (frage, bello), (bello, schoen)} <= nachbar and (frage, hund) in nachbar
    assert not any(morgen in e for e in nachbar if schoen in e)
    # the distilled memory is linked to the exchange it came from
    assert {(gemerkt, hund, "herkunft"), (gemerkt, frage, "herkunft")} <= edges
    row = next(r for r in d1.trace.decisions(praegung.ENTSCHEIDUNG))
    assert row.outcome == "modell" and row.inputs["episode"] == [hund, frage]
    # a redelivered job writes nothing twice
    assert len([t for t in texts if "Bello, wie schoen" in t]) == 1
    assert ("praegung.ergebnis", "schon_erledigt") in {(r.entscheidung, r.outcome) for r in again.trace.decisions()}


def test_an_import_writes_the_same_shape_as_a_live_turn(pool):
    live, imp = new_pair("ep-live")[0], new_pair("ep-imp")[0]
    when = datetime(2026, 12, 4, 10, 0, tzinfo=timezone.utc)

    async def go(p):
        await _turn(p, live, "nova", "t1", "Ich war am Meer.", "Wie war es?", when)
        from redis.asyncio import Redis  # noqa: F401  (the importer fills the session and KZG as well)

        class _R:
            async def rpush(self, *a):
                return 0

        from memory import kzg

        async def no_kzg(*a, **k):
            return None

        saved, kzg.add_entry = kzg.add_entry, no_kzg
        try:
            await import_conversation(p, _R(), imp, "nova", [
                Turn("Person B", "Ich war am Meer.", "D1:1", when, 1), Turn("Nova", "Wie war es?", "D1:2", when, 1)],
                "Person B", lambda texts: [_vec(t) for t in texts])
        finally:
            kzg.add_entry = saved
        return await _nodes(p, live, "nova"), await _nodes(p, imp, "nova")

    (ln, le), (inodes, ie) = asyncio.run(with_pool(pool, go))
    gespraech = [n for n in ln if n[2] == "gespraech"]
    assert [(n[1], n[3]) for n in gespraech] == [(n[1], n[3]) for n in inodes]  # same text, same observer
    assert [n[4] for n in inodes] == ["D1:1", "D1:2"]  # each imported turn keeps its own id

    def shape(nodes, edges):
        pos = {n[0]: i for i, n in enumerate(nodes)}
        return {(pos[a], pos[b], art) for a, b, art in edges if a in pos and b in pos}

    assert shape(gespraech, le) == shape(inodes, ie) == {(0, 1, "nachbar"), (1, 0, "nachbar")}


def test_what_she_wrote_in_conversation_is_recalled_through_its_surroundings(pool):
    """The live exchanges carry the neighbour links the keyword channel reads (± 2 turns): a question
    whose words stand only around the answer, not in it, finds it."""
    user, ch = new_pair("ep-rec")

    async def go(p):
        t = SPAET
        await _turn(p, user, ch, "t1", "Mein Hund war heute beim Tierarzt.", "Oh, was hatte er?", t)
        await _turn(p, user, ch, "t2", "Nur eine Impfung.", "Dann ist ja alles gut.", t + timedelta(minutes=1))
        await _turn(p, user, ch, "t3", "Ich koche heute Suppe.", "Lecker!", t + timedelta(minutes=30))
        await _turn(p, user, ch, "t4", "Mit Karotten.", "Klingt gut.", t + timedelta(minutes=31))
        cfg = MemoryConfig(lesepfad_gewicht_dicht=0.0, lesepfad_boden=-1)  # the keyword channel alone
        return await erinnern(p, user, ch, "Was hat der Tierarzt beim Hund gemacht?", _vec("?"), cfg, k=3,
                              ausbreiten=False)

    found = asyncio.run(with_pool(pool, go))
    assert any("Nur eine Impfung." in m.inhalt for m in found.erinnerungen), [m.inhalt for m in found.erinnerungen]


def test_a_forgotten_or_taken_back_utterance_is_not_found_through_its_neighbours(pool):
    """The keyword surroundings of a node's neighbours carry its words: forgetting the node (or
    taking its turn back) brings them up to date, so no posting of the pair holds its words any more."""
    from memory import erinnerungen, ruecknahme

    user, ch = new_pair("ep-weg")

    async def posting(p, stamm):
        async with p.connection() as conn:
            cur = await conn.execute("SELECT count(DISTINCT knoten_id) FROM lzg_stichworte WHERE user_id=%s"
                                     " AND lexem LIKE %s", (user, f"{stamm}%"))
            return (await cur.fetchone())[0]

    async def go(p):
        await _turn(p, user, ch, "t1", "Ich war beim Zahnarzt.", "Tat es weh?", SPAET)
        await _turn(p, user, ch, "t2", "Ein bisschen.", "Du Arme.", SPAET + timedelta(minutes=1))
        await _turn(p, user, ch, "t3", "Mein Fahrrad ist kaputt.", "Oh nein.", SPAET + timedelta(minutes=2))
        vorher = await posting(p, "zahnarzt"), await posting(p, "fahrrad")
        nodes, _ = await _nodes(p, user, ch)
        zahnarzt = next(n[0] for n in nodes if "Zahnarzt" in n[1])
        assert await erinnerungen.vergessen(p, user, ch, f"knoten-{zahnarzt}")
        await ruecknahme.zuruecknehmen(p, user, ch, ["t3"])
        return vorher, (await posting(p, "zahnarzt"), await posting(p, "fahrrad"))

    vorher, danach = asyncio.run(with_pool(pool, go))
    # before: the node and its neighbours within two utterances hold its word (the first utterance
    # has two after it; the last exchange's has two before it and its reply after it)
    assert vorher == (3, 4)
    assert danach == (0, 0)


def test_forgetting_a_memory_forgets_where_it_came_from(pool):
    """A distilled memory forgotten takes the utterances it came from along (`herkunft`), so its
    content is not recalled through its source; the other exchanges stay."""
    from memory import erinnerungen

    user, ch = new_pair("ep-verg")

    async def go(p):
        await _turn(p, user, ch, "t1", "Ich habe Schulden.", "Das tut mir leid.", SPAET, merke=["Person B hat Schulden"])
        await _turn(p, user, ch, "t2", "Ich mag Tee.", "Ich auch!", SPAET + timedelta(minutes=1))
        items = await erinnerungen.auflisten(p, user, ch)
        gemerkt = next(i for i in items if i.inhalt == "Person B hat Schulden")
        assert await erinnerungen.vergessen(p, user, ch, gemerkt.id)
        assert not await erinnerungen.vergessen(p, user, ch, gemerkt.id)  # gone: nothing left to forget
        return items, [n[1] for n in (await _nodes(p, user, ch))[0]]

    items, left = asyncio.run(with_pool(pool, go))
    # the list names the utterances apart from what was distilled
    arten = {i.inhalt: i.art for i in items}
    assert arten["Person B hat Schulden"] == "erinnerung" and arten["[04 December 2026] Person B: Ich habe Schulden."] == "gespraech"
    assert not any("Schulden" in t or "leid" in t for t in left)
    assert "[04 December 2026] Person B: Ich mag Tee." in left


def test_the_memories_are_linked_only_to_resonating_nodes_of_the_pair(pool):
    """`ep.resonanz` names older nodes; only the pair's own live ones are linked and touched: an id of
    another pair, or of a node forgotten meanwhile, is passed over."""
    user, ch = new_pair("reso")
    fremd_user, fremd_ch = new_pair("reso-fremd")

    async def go(p):
        eigen, vergessen = await lzg.add_nodes(p, user, ch, [{"inhalt": "Bello", "embedding": _vec("Bello")},
                                                             {"inhalt": "Katze", "embedding": _vec("Katze")}])
        (fremd,) = await lzg.add_nodes(p, fremd_user, fremd_ch, [{"inhalt": "Hund", "embedding": _vec("Hund")}])
        async with p.connection() as conn:
            await lzg.vergessen(conn, user, ch, vergessen)
            await conn.execute("UPDATE lzg_knoten SET zuletzt = now() - interval '30 days' WHERE id = ANY(%s)",
                               ([eigen, vergessen, fremd],))
        from core.wire import Episode, Verdichtung

        out = await lzg.episode_schreiben(p, user, ch, Episode(
            quelle="t1", zeitpunkt=SPAET, resonanz=[fremd, vergessen, eigen], resonanz_gewicht=0.5,
            verdichtungen=[Verdichtung(inhalt="Bello ist krank", embedding=_vec("krank"))]))
        async with p.connection() as conn:
            cur = await conn.execute("SELECT von_id, nach_id FROM lzg_synapsen WHERE art='praegung'"
                                     " AND von_id = ANY(%s)", (out.verdichtungen,))
            links = await cur.fetchall()
            cur = await conn.execute("SELECT id FROM lzg_knoten WHERE id = ANY(%s) AND zuletzt > now() - interval '1 hour'",
                                     ([eigen, vergessen, fremd],))
            beruehrt = [r[0] for r in await cur.fetchall()]
        return out, links, beruehrt, eigen

    out, links, beruehrt, eigen = asyncio.run(with_pool(pool, go))
    (neu,) = out.verdichtungen
    assert out.resonanz == [eigen] and links == [(neu, eigen)] and beruehrt == [eigen]
