"""LZG: the read path's dense channel is exact (tested against brute force), spreading is
deterministic and reports its paths, pairs are isolated, weights decay."""
import asyncio
from datetime import datetime, timedelta, timezone

import numpy as np

from core.state import ErinnerungsRahmen
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
    cfg = MemoryConfig(lesepfad_k=20, lesepfad_boden=-1)  # random vectors: the floor would empty every read

    async def go(p):
        user, ch = new_pair("exact")
        other, _ = new_pair("exact")
        ids = await lzg.add_nodes(p, user, ch, [{"inhalt": f"n{i}", "embedding": v} for i, v in enumerate(vecs)])
        await lzg.add_nodes(p, other, ch, [{"inhalt": "fremd", "embedding": queries[0]}])
        for q in queries:
            qn = q / np.linalg.norm(q)
            truth = [ids[i] for i in np.argsort(-(vecs @ qn))[:20]]
            got = await erinnern(p, user, ch, "und die", q, cfg)
            assert got.ids == truth  # recall 1.0 and the same order
            assert all(e.stichwort == 0.0 for e in got.erinnerungen)

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
        byid = {e.id: e for e in first.erinnerungen}
        assert set(byid) == {a, b, c}  # d below the minimum activation, far beyond the depth
        assert byid[a].tiefe == 0 and byid[a].eingefallen_ueber == "Anker"
        assert byid[b].pfad == [a, b] and abs(byid[b].aktivierung - 0.9 * 0.8 * 0.5) < 1e-4
        assert byid[c].pfad == [a, b, c] and "Spaziergang" in byid[c].eingefallen_ueber
        assert first.rahmen == ErinnerungsRahmen(anker_anzahl=1, sprung_tiefe=2, cluster="feuerwerk",
                                                 nova_sektor="freude")
        assert first.ids == [a, b, c]
        assert alone.ids == [a] and alone.rahmen.sprung_tiefe == 0

    asyncio.run(with_pool(pool, go))


class _Zaehler:
    """A connection that counts the statements sent through it."""

    def __init__(self, conn):
        self.conn, self.n = conn, 0

    async def execute(self, *a, **kw):
        self.n += 1
        return await self.conn.execute(*a, **kw)


def test_spreading_reads_its_surroundings_in_one_statement_at_any_depth(pool):
    """Three steps deep, over a cycle, past an inactive node: the same memories and paths as step
    by step, with one statement for the synapses and one for the nodes (the read path's
    statements do not grow with the depth); the whole read path sends three."""
    cfg = MemoryConfig(lzg_anchor_count=1, spreading_depth=3, spreading_decay=1.0,
                       spreading_min_activation=0.05, lesepfad_k=10)

    async def go(p):
        user, ch = new_pair("umgebung")
        a, b, c, d, aus, e = await lzg.add_nodes(p, user, ch, [
            {"inhalt": "Anker", "embedding": unit(0)}, {"inhalt": "b", "embedding": unit(5)},
            {"inhalt": "c", "embedding": unit(6)}, {"inhalt": "d", "embedding": unit(7)},
            {"inhalt": "abgeschaltet", "embedding": unit(8)}, {"inhalt": "e", "embedding": unit(9)}])
        # a → b → c → d, a cycle c → a, a stronger second way to c, an inactive node on the way to e
        await lzg.add_synapses(p, [(a, b, 0.9), (b, c, 0.5), (c, d, 0.8), (a, e, 0.2), (aus, e, 1.0),
                                   (a, aus, 1.0)])
        async with p.connection() as conn:
            await conn.execute("UPDATE lzg_knoten SET aktiv = false WHERE id = %s", (aus,))
            z = _Zaehler(conn)
            got = await lzg.ausbreiten(z, [(a, 1.0)], cfg, limit=10)
            statements = z.n
            z.n = 0
            await erinnern(_Pool(z), user, ch, "Anker", unit(0), cfg)
        return (a, b, c, d, aus, e), got, statements, z.n

    (a, b, c, d, aus, e), got, statements, read_path = asyncio.run(with_pool(pool, go))
    byid = {m.id: m for m in got.erinnerungen}
    assert aus not in byid  # an inactive node is not reached, nor passed through
    assert byid[b].pfad == [a, b] and byid[c].pfad == [a, b, c] and byid[d].pfad == [a, b, c, d]
    assert abs(byid[d].aktivierung - 0.9 * 0.5 * 0.8) < 1e-6 and byid[d].tiefe == 3
    assert byid[e].pfad == [a, e] and byid[a].tiefe == 0  # the cycle back to a keeps a's own path
    assert got.rahmen.sprung_tiefe == 3
    assert statements == 2 and read_path == 3


class _Pool:
    """A pool handing out one given connection."""

    def __init__(self, conn):
        self._conn = conn

    def connection(self):
        conn = self._conn

        class _Cm:
            async def __aenter__(self):
                return conn

            async def __aexit__(self, *exc):
                return False

        return _Cm()


def test_weight_decay():
    now = datetime(2026, 11, 30, tzinfo=timezone.utc)
    assert lzg.effective_weight(1.0, now, 0.01, now) == 1.0
    assert abs(lzg.effective_weight(2.0, now - timedelta(days=10), 0.01, now) - 2.0 * 0.99 ** 10) < 1e-9
