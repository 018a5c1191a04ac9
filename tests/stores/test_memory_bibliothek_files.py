"""Library: only `wissen`, threshold as a boundary, top 3, weights onto 0–1. File index: the
keyword channel has no floor, the dense channel has one, cap and excerpt, and the log line."""
import asyncio
import logging

from memory import aufzeichnungen, bibliothek
from memory.config import MemoryConfig
from tests.conftest import at_cosine, new_pair, unit, with_pool


def test_library_reading_path(pool):
    cfg = MemoryConfig()

    async def go(p):
        user, ch = new_pair("lib")
        await bibliothek.add(p, user, ch, "bericht", "Bericht", "nah, aber ein Bericht", at_cosine(0.99), 5.0)
        ok = await bibliothek.add(p, user, ch, "wissen", "Drueber", "knapp ueber der Schwelle", at_cosine(0.5001, 2), 25.0)
        await bibliothek.add(p, user, ch, "wissen", "Drunter", "knapp unter der Schwelle", at_cosine(0.4999, 3), 5.0)
        hits = await bibliothek.suchen(p, user, ch, unit(0), cfg)
        assert [h.id for h in hits] == [ok]
        assert hits[0].gewicht == 1.0  # 25 / 10 capped at 1
        for i in range(5):
            await bibliothek.add(p, user, ch, "wissen", f"W{i}", "x", at_cosine(0.9 - i * 0.01, 4 + i), 3.0)
        hits = await bibliothek.suchen(p, user, ch, unit(0), cfg)
        assert len(hits) == 3 and [h.titel for h in hits] == ["W0", "W1", "W2"]
        assert hits[0].gewicht == 0.3
        assert (await bibliothek.bestand(p, user, ch)).model_dump() == {"lesbar": 7, "aktiv": 8, "charakter": 0}

    asyncio.run(with_pool(pool, go))


def test_file_index_two_channels(pool, caplog):
    cfg = MemoryConfig()

    async def go(p):
        user, ch = new_pair("files")
        kw = await aufzeichnungen.add(p, user, ch, "/a/steuer.txt", "Steuer", "Steuererklärung Finanzamt",
                                      "x" * 1000, at_cosine(0.05, 2))
        dense = await aufzeichnungen.add(p, user, ch, "/a/urlaub.txt", "Urlaub", "Reise", "Urlaub am Meer",
                                         at_cosine(0.3001, 3))
        await aufzeichnungen.add(p, user, ch, "/a/unter.txt", "Unter", "Garten", "Garten", at_cosine(0.2999, 4))
        with caplog.at_level(logging.INFO, logger="novaberg.memory.aufzeichnungen"):
            out = await aufzeichnungen.suchen(p, user, ch, "Finanzamt", unit(0), cfg)
        ids = [h.id for h in out.treffer]
        assert ids == [kw, dense]  # keyword hit with cosine 0.05 has no floor; dense needs 0.30
        assert out.treffer[0].kanal == "stichwort" and len(out.treffer[0].auszug) == 300
        assert out.bestand == 3 and abs(out.schwaechster_kosinus - 0.05) < 1e-4
        assert "2 Treffer, Bestand 3, schwaechster Kosinus 0.0500" in caplog.text
        for i in range(4):
            await aufzeichnungen.add(p, user, ch, f"/b/{i}", f"B{i}", "Finanzamt", "y", at_cosine(0.9, 5 + i))
        out = await aufzeichnungen.suchen(p, user, ch, "Finanzamt", unit(0), cfg)
        assert len(out.treffer) == cfg.files_cap == 3

    asyncio.run(with_pool(pool, go))
