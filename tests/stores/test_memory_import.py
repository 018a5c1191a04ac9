"""Import round trip on LoCoMo data: every turn lands in LZG with its source id, neighbours are
linked, the session and KZG are filled, and the read path finds an evidence turn."""
import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from memory import kzg, session
from memory.config import for_model
from memory.importer import ImportFormatError, import_conversation, load_conversation, node_text
from memory.lesepfad import erinnern
from tests.conftest import embed_with, new_pair, with_pool

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo-dev.json"


def _small_conversation():
    return {"conversation": {
        "speaker_a": "Anna", "speaker_b": "Nova",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Anna", "dia_id": "D1:1", "text": "I adopted a puppy named Bello last week."},
            {"speaker": "Nova", "dia_id": "D1:2", "text": "How lovely! What breed is Bello?"},
            {"speaker": "Anna", "dia_id": "D1:3", "text": "He is a beagle and loves the park."}],
        "session_2_date_time": "10:00 am on 20 June, 2023",
        "session_2": [
            {"speaker": "Anna", "dia_id": "D2:1", "text": "I started learning the violin in a music school."},
            {"speaker": "Nova", "dia_id": "D2:2", "text": "Violin is a beautiful instrument."}]},
        "qa": []}


def test_round_trip(stores, migrated, minilm):
    data, turns = load_conversation(_small_conversation())
    assert node_text(turns[0]) == "[08 May 2023] Anna: I adopted a puppy named Bello last week."
    user, ch = new_pair("import")

    async def go(p):
        from redis.asyncio import Redis

        r = Redis.from_url(stores.redis_url)
        try:
            stats = await import_conversation(p, r, user, ch, turns, "Anna", embed_with(minilm))
            assert stats == {"turns": 5, "lzg_nodes": 5, "synapses": 3, "kzg_entries": 5}
            everything = (await erinnern(p, user, ch, "x", embed_with(minilm)(["x"])[0],
                                         for_model("all-minilm-l6-v2"), k=50, boden=False)).erinnerungen
            assert sorted(h.quelle for h in everything) == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
            beobachter = {h.quelle: h.beobachter for h in everything}
            assert beobachter["D1:1"] == "mensch" and beobachter["D1:2"] == "nova"
            sess = await session.load_turns(r, user, ch, 10)
            assert [t["quelle"] for t in sess] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
            assert [t["rolle"] for t in sess][:2] == ["user", "assistant"]
            assert await kzg.count(r, user, ch) == 5
            q = "What musical instrument is Anna learning?"
            hits = await erinnern(p, user, ch, q, embed_with(minilm)([q])[0], for_model("all-minilm-l6-v2"), k=2)
            assert hits.erinnerungen[0].quelle == "D2:1" and len(hits.ids) == 2
        finally:
            await r.aclose()

    asyncio.run(with_pool(migrated.database_url, go))


def test_bad_files_are_refused_clearly():
    with pytest.raises(ImportFormatError, match="not a LoCoMo conversation"):
        load_conversation({"foo": 1})
    with pytest.raises(ImportFormatError, match="index 3"):
        load_conversation([_small_conversation()], 3)
    bad = _small_conversation()
    bad["conversation"]["session_1"][0].pop("dia_id")
    with pytest.raises(ImportFormatError, match="session_1"):
        load_conversation(bad)


@pytest.mark.e2e
def test_cli_import_and_search(stores, migrated, tmp_path):
    """The two commands against the embedded stores of the test session, on a real LoCoMo conversation."""
    import os

    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo data not beside the checkout ({LOCOMO})")
    env = {**os.environ, "NOVABERG_HOME": str(stores.home), "DATABASE_URL": stores.database_url,
           "REDIS_URL": stores.redis_url}
    user, ch = new_pair("cli")
    cli = [sys.executable, "-m", "cluster.cli", "memory"]
    out = subprocess.run(cli + ["import", "--user", user, "--character", ch, str(LOCOMO)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "imported 419 turns" in out.stdout
    res = subprocess.run(cli + ["search", "--user", user, "--character", ch, "-k", "5",
                                "When did Caroline go to the LGBTQ support group?"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    ids = res.stdout.split()
    assert len(ids) == 5 and all(i.startswith("D") for i in ids)
    assert "D1:3" in ids  # the evidence turn of this question
    bad = subprocess.run(cli + ["import", "--user", user, "--character", ch, str(tmp_path / "missing.json")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "import failed" in bad.stderr
