"""Characters on the real Postgres: create, read, change, remove; Nova from the migration; the
character's knowledge (a lorebook) found by its keys and by a question about it, through the
library plugin the enricher calls, for every pair of the character."""
import asyncio
import re
import uuid

import pytest

from memory import bibliothek, charaktere, pg
from memory.config import for_model
from tests.conftest import embed_with, with_pool


def _cid(prefix="ch") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_nova_is_created_by_the_migration(pool):
    async def go(p):
        nova = await charaktere.get(p, "nova")
        assert nova.name == "Nova" and nova.identitaet and nova.sprechweise
        row = await pg.load_pair(p, "someone", "nova")
        assert row["character_found"] and row["identitaet"] == nova.identitaet

    asyncio.run(with_pool(pool, go))


def test_create_read_update_delete(pool):
    async def go(p):
        cid = _cid()
        ch = await charaktere.create(p, cid, {"name": "Ole", "identitaet": "Fischer", "begruessung": "Moin."})
        assert ch.character_id == cid and ch.name == "Ole" and ch.sprechweise == "" and ch.karte_rest == {}
        with pytest.raises(charaktere.CharacterExists):
            await charaktere.create(p, cid, {"name": "Doppelt"})
        assert await charaktere.exists(p, cid)
        upd = await charaktere.update(p, cid, {"sprechweise": "knapp", "karte_rest": {"tags": ["see"]}})
        assert upd.sprechweise == "knapp" and upd.identitaet == "Fischer" and upd.karte_rest == {"tags": ["see"]}
        assert await charaktere.update(p, "nobody-" + cid, {"name": "x"}) is None
        with pytest.raises(ValueError, match="unknown character fields"):
            await charaktere.update(p, cid, {"alter": "3"})
        listed = {c.character_id: c for c in await charaktere.list_all(p)}
        assert listed[cid].name == "Ole" and listed[cid].hat_begruessung and "nova" in listed
        row = await pg.load_pair(p, "u", cid)
        assert row["character_name"] == "Ole" and row["sprechweise"] == "knapp"
        assert await charaktere.delete(p, cid)
        assert not await charaktere.delete(p, cid)
        assert await charaktere.get(p, cid) is None and not await charaktere.exists(p, cid)

    asyncio.run(with_pool(pool, go))


def test_knowledge_by_key_by_topic_and_for_every_pair(pool, minilm):
    embed = embed_with(minilm)
    cfg = for_model("all-minilm-l6-v2")  # the thresholds the enricher uses with MiniLM
    eintraege = [
        {"titel": "Fenja", "inhalt": "Fenja ist Miras Schwester; sie faehrt die Post-Faehre zur Hallig.",
         "schluessel": ["Fenja"]},
        {"titel": "Leuchtturm", "inhalt": "The lighthouse on the island was built in 1887 and its lamp burns every night.",
         "schluessel": ["Leuchtfeuer"]},
        {"titel": "Abgeschaltet", "inhalt": "Ein Eintrag, der aus ist.", "schluessel": ["Fenja"], "aktiv": False},
        {"titel": "Immer", "inhalt": "Auf der Hallig gibt es keine Autos.", "schluessel": [], "immer": True},
    ]
    vecs = embed([f"{e['titel']}: {e['inhalt']}" for e in eintraege])

    async def go(p):
        cid = _cid("mira")
        await charaktere.create(p, cid, {"name": "Mira"}, [{**e, "embedding": v} for e, v in zip(eintraege, vecs)])
        assert len(await charaktere.wissen(p, cid)) == 4
        # by its key in the message, any case; placed in insertion order (equal orders: as added)
        q = "was macht eigentlich fenja so?"
        hits = await charaktere.wissen_suchen(p, cid, embed([q])[0], q, cfg, top_k=5)
        assert [h.titel for h in hits][:2] == ["Fenja", "Immer"]
        assert {h.weg for h in hits if h.titel in ("Fenja", "Immer")} == {"schluessel", "immer"}
        assert "Abgeschaltet" not in [h.titel for h in hits]
        # a question about the lighthouse finds it by topic
        q = "When was the lighthouse on the island built?"
        hits = await charaktere.wissen_suchen(p, cid, embed([q])[0], q, cfg, top_k=5)
        by = {h.titel: h for h in hits}
        assert by["Leuchtturm"].weg == "thema" and by["Leuchtturm"].similarity >= cfg.library_threshold
        assert "Fenja" not in by
        # the enricher's pre-check sees it for any pair of the character, none of another
        assert (await bibliothek.bestand(p, "anyone", cid)).charakter == 3
        assert (await bibliothek.bestand(p, "anyone", "nova")).charakter == 0
        # removing the character removes its knowledge
        await charaktere.delete(p, cid)
        assert await charaktere.wissen(p, cid) == []

    asyncio.run(with_pool(pool, go))


def test_lorebook_scans_the_newest_messages_within_its_budget(pool, minilm):
    """Through the store: a key two messages back activates its entry at the default depth, three
    back only with the book's larger depth; a selective entry's logic; a regex key; the book's
    token budget leaves out the entries of lowest insertion order first."""
    embed = embed_with(minilm)
    cfg = for_model("all-minilm-l6-v2")
    eintraege = [
        {"titel": "Drachen", "inhalt": "Drachen schlafen im Nordgebirge.", "schluessel": ["dragon"], "reihenfolge": 90},
        {"titel": "Gasthaus", "inhalt": "Das Gasthaus zum Anker.", "schluessel": ["inn", "tavern"],
         "sekundaer": ["Rusty Flagon"], "selektiv": True, "logik": "not_any", "reihenfolge": 50},
        {"titel": "Orks", "inhalt": "Orks meiden das Licht.", "schluessel": [r"/\borc(s|ish)?\b/i"], "reihenfolge": 10},
        {"titel": "Gross", "inhalt": "x" * 400, "schluessel": ["sturm"], "reihenfolge": 5},
    ]
    vecs = embed([f"{e['titel']}: {e['inhalt']}" for e in eintraege])

    async def titles(p, cid, nachrichten):
        hits = await charaktere.wissen_suchen(p, cid, embed([nachrichten[0]])[0], nachrichten, cfg)
        return [h.titel for h in hits if h.weg != "thema"]

    async def go(p):
        cid = _cid("sera")
        await charaktere.create(p, cid, {"name": "Seraphine"}, [{**e, "embedding": v} for e, v in zip(eintraege, vecs)])
        newest_first = ["Und was essen wir?", "Are there Dragons up there?"]
        assert await titles(p, cid, newest_first) == ["Drachen"]  # "dragon" inside "Dragons", one message back
        assert await titles(p, cid, ["Und was essen wir?", "Hm.", "Are there Dragons up there?"]) == []
        assert await titles(p, cid, ["Let's get dinner at an inn."]) == ["Gasthaus"]  # NOT_ANY holds
        assert await titles(p, cid, ["At the Rusty Flagon inn."]) == []  # NOT_ANY: a secondary key is there
        assert await titles(p, cid, ["ORCS at the gate!"]) == ["Orks"]
        assert await titles(p, cid, ["Some force out of the orchard."]) == []  # the pattern's word bounds
        both = ["Ein Sturm zieht auf, und ORCS kommen."]
        assert await titles(p, cid, both) == ["Gross", "Orks"]  # placed lowest insertion order first
        # the book's own settings: depth 3 reaches the dragon; a budget of 20 tokens keeps the higher order
        await charaktere.update(p, cid, {"karte_rest": {"character_book": {"scan_depth": 3, "token_budget": 20}}})
        assert await titles(p, cid, ["Und was essen wir?", "Hm.", "Are there Dragons up there?"]) == ["Drachen"]
        assert await titles(p, cid, both) == ["Orks"]
        # an entry of higher order that does not fit leaves out every one after it
        await charaktere.update(p, cid, {"karte_rest": {"character_book": {"token_budget": 5}}})
        assert await titles(p, cid, both) == []

    asyncio.run(with_pool(pool, go))


def test_slow_regex_keys_cost_one_budget_a_turn_off_the_event_loop(pool, minilm, monkeypatch, caplog):
    """199 catastrophic regex keys and one plain one: the turn searches regexes for its budget and
    skips the rest (the plain key still activates its entry), in a thread: while the keys are
    matched, the store's event loop answers another pair's read."""
    import logging
    import threading

    from memory import wissen_schluessel as ws

    vec = embed_with(minilm)(["Drachen"])[0]
    cfg = for_model("all-minilm-l6-v2")
    eintraege = [{"titel": f"R{i}", "inhalt": f"r{i}", "schluessel": [f"/(a+)+$x{{0,{i}}}/"], "embedding": vec}
                 for i in range(199)]
    eintraege.append({"titel": "Drachen", "inhalt": "Drachen schlafen.", "schluessel": ["dragon"], "embedding": vec})
    drinnen, frei, gewartet = threading.Event(), threading.Event(), []
    trifft = ws.trifft

    def angehalten(key, text, **kw):  # the first key waits until the other pair was answered
        if not drinnen.is_set():
            drinnen.set()
            gewartet.append(frei.wait(timeout=5))
        return trifft(key, text, **kw)

    async def go(p):
        cid = _cid("slow")
        await charaktere.create(p, cid, {"name": "Langsam"}, eintraege)
        monkeypatch.setattr(ws, "trifft", angehalten)
        text = "a" * 5000 + "b, a dragon"
        turn = asyncio.create_task(charaktere.wissen_suchen(p, cid, vec, [text], cfg))
        while not drinnen.is_set():
            await asyncio.sleep(0.01)
        other = await charaktere.get(p, "nova")  # another pair's work, while the keys are matched
        frei.set()
        hits = await turn
        assert other.name == "Nova" and gewartet == [True]
        assert [h.titel for h in hits if h.weg == "schluessel"] == ["Drachen"]

    with caplog.at_level(logging.WARNING, logger="novaberg.memory"):
        asyncio.run(with_pool(pool, go))
    spent = [r.getMessage() for r in caplog.records if "lorebook.regex_budget" in r.getMessage()]
    assert len(spent) == 1
    searched, skipped = (int(x) for x in re.search(r"after (\d+) regex keys; (\d+) more", spent[0]).groups())
    assert searched <= ws.REGEX_BUDGET_S / ws.REGEX_TIMEOUT_S + 1 and searched + skipped == 199


def test_a_character_with_deeply_nested_kept_fields_stays_readable(pool, caplog):
    """Stored before imports were bounded: kept card fields nested 300 deep. Reading the character
    gives them back as far as an answer can carry them, the deeper part as its JSON text."""
    import json
    import logging

    from serve.schemas import Character

    tief: dict = {}
    x = tief
    for _ in range(299):
        x["a"] = {}
        x = x["a"]

    async def go(p):
        cid = _cid("tief")
        await charaktere.create(p, cid, {"name": "Tief", "karte_rest": {"extensions": tief}})
        with caplog.at_level(logging.WARNING, logger="novaberg.memory"):
            ch = await charaktere.get(p, cid)
        body = Character(**ch.model_dump()).model_dump(mode="json")  # what the API answers (a 500 before)
        y, n = body["karte_rest"]["extensions"], 2
        while isinstance(y, dict):
            y, n = y["a"], n + 1
        assert n == charaktere.KARTE_REST_MAX_TIEFE and isinstance(json.loads(y)["a"], dict)
        assert "charakter.karte_rest_zu_tief" in caplog.text

    asyncio.run(with_pool(pool, go))
