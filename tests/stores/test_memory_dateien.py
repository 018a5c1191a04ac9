"""The file index written and found (issue #10, seed 001 §3.1a): the keyword channel matches any
content word of a question (an OR query under the German configuration, ranked by `ts_rank_cd`),
not all of them; indexing writes topic, summary and keywords once (the model, or the named
fallbacks), stores embedded chunks, and indexes the same content once; with MiniLM a natural
question finds the file through the dense channel, a named term through the keyword channel, and
the enricher searches the index of a pair that holds nothing but a file."""
import asyncio
import json

from core.bestand import DateienUmfang
from core.wire import ChatResponse
from memory import aufzeichnungen, dateien
from memory.config import MemoryConfig, for_model
from prompts import PromptLibrary
from serve import erschliessung
from serve.dateien import lesen
from serve.embedder import encode
from tests.conftest import at_cosine, new_pair, unit, with_pool
from tests.scripted_llm import PoolStore

NOTIZ = """# Bello's medication

Bello, our dachshund, gets half a tablet of carprofen every morning at seven against his arthritis, always
with a bit of liver sausage. The vet, Dr. Krueger, set the dose in January.

In the evening Bello also needs two eye drops in the left eye. When he limps, no long walks on the dike.
"""
MODELL = {"thema": "Bello's medication plan", "zusammenfassung": "Bello gets carprofen every morning for his "
          "arthritis and eye drops in the evening.", "stichworte": ["Bello", "carprofen", "arthritis", "Krueger"]}


def test_the_question_words_become_an_or_query():
    assert aufzeichnungen.oder_anfrage("Wann muss ich die Steuererklärung abgeben?") == \
        "wann | muss | ich | die | steuererklärung | abgeben"
    assert aufzeichnungen.oder_anfrage("Finanzamt & (Steuer) | !x:* <-> 'a'") == "finanzamt | steuer | x | a"
    assert aufzeichnungen.oder_anfrage("?! …") is None
    assert aufzeichnungen.oder_anfrage(" ".join(f"w{i}" for i in range(200))).count("|") == \
        aufzeichnungen.ANFRAGE_WOERTER - 1


def test_keyword_channel_matches_any_content_word_ranked(pool):
    cfg = MemoryConfig()

    async def go(p):
        user, ch = new_pair("kw")
        far = at_cosine(0.05, 2)  # below the dense floor: only the keyword channel can find these
        steuer = await aufzeichnungen.add(p, user, ch, "/s", "Steuer", "Steuererklärung, Finanzamt, Frist",
                                          "Die Steuererklärung geht bis Juli an das Finanzamt.", far)
        amt = await aufzeichnungen.add(p, user, ch, "/a", "Amt", "Finanzamt", "Adresse des Finanzamts.", at_cosine(0.05, 3))
        await aufzeichnungen.add(p, user, ch, "/g", "Garten", "Garten, Rosen", "Rosen schneiden im März.", at_cosine(0.05, 4))
        # a real sentence: most of its words are in no file's keywords; before, every word had to match
        out = await aufzeichnungen.suchen(p, user, ch, "Wann muss ich eigentlich die Steuererklärung beim Finanzamt "
                                                       "abgeben?", unit(0), cfg)
        assert [h.id for h in out.treffer] == [steuer, amt]  # two of its words rank over one
        assert {h.kanal for h in out.treffer} == {"stichwort"} and out.treffer[0].rang > out.treffer[1].rang
        assert "Steuererklärung" in out.treffer[0].auszug
        # inflected forms meet through the German stemmer; stop words alone find nothing and fail nothing
        out = await aufzeichnungen.suchen(p, user, ch, "Hast du die Fristen im Blick?", unit(0), cfg)
        assert [h.id for h in out.treffer] == [steuer]
        for text in ("Was ist das denn?", "", "!!! & | :*"):
            assert (await aufzeichnungen.suchen(p, user, ch, text, unit(0), cfg)).treffer == []
        assert await aufzeichnungen.bestand(p, user, ch) == 3

    asyncio.run(with_pool(pool, go))


def _werkzeuge(p, minilm, antwort, calls: list) -> erschliessung.Werkzeuge:
    async def chat(request):
        calls.append(request)
        if isinstance(antwort, Exception):
            raise antwort
        return ChatResponse.model_validate({"choices": [{"message": {"content": antwort}}]})

    async def model_name():
        return "scripted"

    async def embed(text):
        return encode(minilm, [text])[0]

    return erschliessung.Werkzeuge(chat=chat, model_name=model_name, embed=embed, store=PoolStore(p),
                                   prompts=PromptLibrary(), deadline_s=5.0, max_tokens=200)


def test_indexing_once_and_both_channels(pool, minilm):
    cfg = for_model("all-minilm-l6-v2")  # the floor the enricher uses with MiniLM
    dok = lesen(NOTIZ.encode(), "text/markdown", "notes/bello.md", 200_000)

    async def go(p):
        user, ch = new_pair("idx")
        calls: list = []
        w = _werkzeuge(p, minilm, json.dumps(MODELL), calls)
        out = await erschliessung.indizieren(w, dok, user, ch)
        d = out["datei"]
        assert out["neu"] and d.name == "bello.md" and d.art == "markdown" and d.abschnitte == 1
        assert d.thema == MODELL["thema"] and d.stichworte == MODELL["stichworte"]
        assert d.erschliessung == {"antwort": "ok", "thema": "modell", "zusammenfassung": "modell",
                                      "stichworte": "modell"}
        assert calls[0].caller == "erschliessung" and "carprofen" in calls[0].messages[1]["content"]
        assert calls[0].response_schema["properties"]["stichworte"]["maxItems"] == erschliessung.STICHWORTE_MAX
        again = await erschliessung.indizieren(w, dok, user, ch)  # the same content: found, not indexed again
        assert not again["neu"] and again["datei"].id == d.id and len(calls) == 1
        assert [x.id for x in await dateien.liste(p, user, ch)] == [d.id]
        # what the pair and its user hold, for the upload quotas: the pair's files, the user's bytes
        assert await dateien.umfang(p, user, ch) == DateienUmfang(dateien_paar=1, bytes_user=dok.bytes)
        assert await dateien.umfang(p, user, ch + "-other") == DateienUmfang(dateien_paar=0, bytes_user=dok.bytes)

        async def ask(q):
            return (await aufzeichnungen.suchen(p, user, ch, q, encode(minilm, [q])[0], cfg)).treffer

        # a natural question that names none of its keywords: the dense channel, over the floor
        hits = await ask("What do we give the dog for his joint pain?")
        assert [(h.datei_id, h.kanal) for h in hits] == [(d.id, "dicht")]
        assert hits[0].cosinus >= cfg.files_dense_floor and hits[0].datei == "bello.md"
        # a named term in an unrelated sentence: the keyword channel, without a floor
        hits = await ask("Did Krueger send the invoice for the car repair?")
        assert [(h.datei_id, h.kanal) for h in hits] == [(d.id, "stichwort")]
        assert hits[0].cosinus < cfg.files_dense_floor
        # both, one hit per file, the excerpt around the words asked for
        hits = await ask("How much carprofen does Bello get in the morning?")
        assert [(h.datei_id, h.kanal) for h in hits] == [(d.id, "beide")]
        assert "carprofen" in hits[0].auszug and hits[0].zusammenfassung == MODELL["zusammenfassung"]
        assert await ask("What will the weather be like tomorrow?") == []
        # removing the file removes its chunks
        assert await dateien.loeschen(p, user, ch, d.id) and not await dateien.loeschen(p, user, ch, d.id)
        assert await aufzeichnungen.bestand(p, user, ch) == 0 and await dateien.liste(p, user, ch) == []

    asyncio.run(with_pool(pool, go))


def test_an_upload_embeds_its_chunks_a_few_at_a_time(pool):
    """A large file's chunks reach the embedder at most `embed_concurrency` at once."""
    dok = lesen(("Absatz ueber Bello und seine Tabletten. " * 40 + "\n\n").encode() * 30, "text/plain", "lang.txt",
                200_000)
    busy, most = 0, 0

    async def embed(text):
        nonlocal busy, most
        busy += 1
        most = max(most, busy)
        await asyncio.sleep(0.01)
        busy -= 1
        return unit(0)

    async def go(p):
        user, ch = new_pair("idx")
        w = _werkzeuge(p, None, json.dumps(MODELL), [])
        w.embed, w.embed_concurrency = embed, 3
        out = await erschliessung.indizieren(w, dok, user, ch)
        assert out["datei"].abschnitte > 3 and most == 3

    asyncio.run(with_pool(pool, go))


def test_unusable_answers_get_named_fallbacks(pool, minilm, caplog):
    dok = lesen(NOTIZ.encode(), "text/markdown", "bello.md", 200_000)

    async def go(p):
        out = {}
        for antwort in (RuntimeError("engine down"), '{"thema": "x", "zusammenfassung": "x", "stichworte": []}',
                        "Gern! Hier ist die Datei."):
            user, ch = new_pair("fb")
            out[str(antwort)[:6]] = (await erschliessung.indizieren(_werkzeuge(p, minilm, antwort, []), dok, user, ch))["datei"]
        return out

    out = asyncio.run(with_pool(pool, go))
    assert [d.erschliessung["antwort"] for d in out.values()] == ["aufruf_gescheitert", "ok", "kein_json"]
    for d in out.values():
        assert {k: v for k, v in d.erschliessung.items() if k != "antwort"} == {
            "thema": "ueberschrift", "zusammenfassung": "anfang", "stichworte": "haeufigkeit"}
        assert d.thema == "Bello's medication" and d.zusammenfassung.startswith("Bello's medication Bello, our")
        assert d.stichworte[0] == "Bello" and "carprofen" in d.stichworte
    assert "fallback aufruf_gescheitert" in caplog.text and "stichworte=haeufigkeit" in caplog.text


def test_chunks_stay_within_their_size():
    text = "\n\n".join(["Kurzer Absatz."] * 3 + ["Ein langer Satz ohne Ende " * 80 + ".", "Schluss."])
    teile = erschliessung.abschnitte(text, 200)
    assert all(len(t) <= 200 for t in teile) and teile[0] == "Kurzer Absatz.\n\nKurzer Absatz.\n\nKurzer Absatz."
    assert " ".join(" ".join(teile).split()) == " ".join(text.split())  # nothing lost, nothing doubled


def test_the_enricher_searches_a_pair_that_holds_only_a_file(stores, pool, minilm):
    """Before, the pre-check knew KZG, LZG, the library and the character's knowledge only: a pair
    whose one source was an uploaded file never searched it."""
    from redis.asyncio import Redis

    from core.settings import Settings
    from memory import pg
    from pipeline.nodes import enricher
    from pipeline.runner import run_node
    from pipeline.services import Deps, Services
    from core.state import Stimulus, TurnState
    from pipeline.trace import TurnTrace
    from tests.scripted_llm import ScriptedLLM

    class _Embedder:
        async def embed(self, trace, text):
            return encode(minilm, [text])[0]

    async def go():
        r = Redis.from_url(stores.redis_url)
        p = pg.open_pool(pool, 1, 2)
        await p.open(wait=True)
        try:
            user, ch = new_pair("enr")
            dok = lesen(NOTIZ.encode(), "text/markdown", "bello.md", 200_000)
            await erschliessung.indizieren(_werkzeuge(p, minilm, json.dumps(MODELL), []), dok, user, ch)
            services = Services(settings=Settings(), llm=ScriptedLLM(), embedder=_Embedder(), store=PoolStore(p),
                                redis=r, prompts=PromptLibrary())
            state = TurnState(stimulus=Stimulus(user_id=user, character_id=ch, turn_id="t",
                                                user_prompt="Which medicine does Bello take in the morning?"))
            trace = TurnTrace(user, ch, "t")
            trace.chain = "character"
            out = await run_node(enricher.NODE, state, Deps(services, trace))
            return out["memory"], trace
        finally:
            await p.close()
            await r.aclose()

    memory, trace = asyncio.run(go())
    # searched, with the raw utterance (a new pair)
    assert [r.outcome for r in trace.decisions("enricher.rewrite")] == ["verlauf_leer"]
    assert [(h.datei, h.kanal) for h in memory.aufzeichnungen] == [("bello.md", "beide")]
    assert "arthritis" in memory.aufzeichnungen[0].auszug
