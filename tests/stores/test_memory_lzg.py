"""LZG: the read path's dense channel is exact (tested against brute force), spreading is
deterministic and reports its paths, pairs are isolated, weights decay."""
import asyncio
from datetime import datetime, timedelta, timezone

import numpy as np

from memory import lzg
from memory.config import MemoryConfig
from memory.lesepfad import erinnern
from tests.conftest import DIM, at_cosine, new_pair, unit, with_pool


def test_dense_channel_is_exact_and_pairs_are_isolated(pool):
    """A question without a content word reads by the dense channel alone: the read path's order is
    the brute-force cosine order over the pair's nodes, and no other pair's node comes back."""
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(600, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    queries = rng.normal(size=(10, DIM)).astype(np.float32)
    cfg = MemoryConfig(lesepfad_k=20)

    async def go(p):
        user, ch = new_pair("exact")
        other, _ = new_pair("exact")
        ids = await lzg.add_nodes(p, user, ch, [{"inhalt": f"n{i}", "embedding": v} for i, v in enumerate(vecs)])
        await lzg.add_nodes(p, other, ch, [{"inhalt": "fremd", "embedding": queries[0]}])
        for q in queries:
            qn = q / np.linalg.norm(q)
            truth = [ids[i] for i in np.argsort(-(vecs @ qn))[:20]]
            got = await erinnern(p, user, ch, "und die", q, cfg)
            assert got["ids"] == truth  # recall 1.0 and the same order
            assert all(e["stichwort"] == 0.0 for e in got["erinnerungen"])

    asyncio.run(with_pool(pool, go))


def test_spreading_paths_depth_and_determinism(pool):
    cfg = MemoryConfig(lzg_anchor_count=1, spreading_depth=2, spreading_decay=0.5,
                       spreading_min_activation=0.05)

    async def go(p):
        user, ch = new_pair("spread")
        a, b, c, d, far = await lzg.add_nodes(p, user, ch, [
            {"inhalt": "Anker: Hund Bello", "embedding": at_cosine(0.9)},
            {"inhalt": "Spaziergang im Park", "embedding": unit(5)},
            {"inhalt": "Regen am Sonntag", "embedding": unit(6)},
            {"inhalt": "schwache Kante", "embedding": unit(7)},
            {"inhalt": "drei Spruenge weit", "embedding": unit(8)},
        ])
        await lzg.add_synapses(p, [(a, b, 0.8), (b, c, 0.6), (a, d, 0.05), (c, far, 1.0)])
        async with p.connection() as conn:
            first = await lzg.ausbreiten(conn, [(a, 0.9)], cfg, limit=10, cluster="feuerwerk", nova_sektor="freude")
            again = await lzg.ausbreiten(conn, [(a, 0.9)], cfg, limit=10, cluster="feuerwerk", nova_sektor="freude")
            alone = await lzg.ausbreiten(conn, [(a, 0.9)], cfg, limit=10, tiefe=0)
        assert first == again
        byid = {e["id"]: e for e in first["erinnerungen"]}
        assert set(byid) == {a, b, c}  # d below the minimum activation, far beyond the depth
        assert byid[a]["tiefe"] == 0 and byid[a]["eingefallen_ueber"] == "Anker"
        assert byid[b]["pfad"] == [a, b] and abs(byid[b]["aktivierung"] - 0.9 * 0.8 * 0.5) < 1e-4
        assert byid[c]["pfad"] == [a, b, c] and "Spaziergang" in byid[c]["eingefallen_ueber"]
        assert first["rahmen"] == {"anker_anzahl": 1, "sprung_tiefe": 2, "cluster": "feuerwerk",
                                   "nova_sektor": "freude"}
        assert first["ids"] == [a, b, c]
        assert alone["ids"] == [a] and alone["rahmen"]["sprung_tiefe"] == 0

    asyncio.run(with_pool(pool, go))


def test_weight_decay():
    now = datetime(2026, 11, 30, tzinfo=timezone.utc)
    assert lzg.effective_weight(1.0, now, 0.01, now) == 1.0
    assert abs(lzg.effective_weight(2.0, now - timedelta(days=10), 0.01, now) - 2.0 * 0.99 ** 10) < 1e-9
