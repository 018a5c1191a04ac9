"""Retrieval latency of the memory stores at 10 000 LZG nodes per pair, next to one plain pgvector
nearest-neighbour query on the same data, as ratios measured in one run.

The LZG nodes carry real conversation text (the LoCoMo turns beside the checkout, repeated until
the pair holds `--nodes`, linked as `nachbar` in sessions of 20 as the importer links them; Zipf-
distributed words where the data is missing), so the memory read path's keyword channel reads
postings as long as a real pair's; the questions are LoCoMo's. Vectors are random: the exact scan
costs the same whatever they hold. Then the write path's cost per turn on top of that graph:
`lzg.episode_schreiben` for an exchange (both sides and one distilled memory), turn after turn.

    python -m bench.memory_latency [--nodes 10000] [--queries 200]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

DIM = 384


def texts_and_questions(n: int, n_q: int, rng) -> tuple[list[str], list[str]]:
    from bench.locomo_recall import DEFAULT_DATA
    from memory.importer import load_conversation, node_text

    if DEFAULT_DATA.exists():
        raw = json.loads(DEFAULT_DATA.read_text())
        turns = [node_text(t) for ci in range(len(raw)) for t in load_conversation(raw, ci)[1]]
        questions = [qa["question"] for c in raw for qa in c["qa"]]
    else:  # no data beside the checkout: Zipf-distributed words
        vocab = [f"wort{i}" for i in range(5000)]
        ranks = lambda k: [vocab[min(int(x), 4999)] for x in rng.zipf(1.3, k)]  # noqa: E731
        turns = [" ".join(ranks(20)) for _ in range(3000)]
        questions = [" ".join(ranks(8)) for _ in range(500)]
    return [turns[i % len(turns)] for i in range(n)], [questions[i % len(questions)] for i in range(n_q)]


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


async def run(nodes: int, queries: int) -> dict:
    import numpy as np
    from redis.asyncio import Redis

    from memory import aufzeichnungen, bibliothek, kzg, lesepfad, lzg, pg
    from memory.config import MemoryConfig
    from memory.embedded import EmbeddedStores
    from memory.kzg import KZGIndex
    from memory.migrate import apply_migrations

    rng = np.random.default_rng(1)

    def vecs(n):
        v = rng.normal(size=(n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    home = Path(tempfile.mkdtemp(prefix="nblat-", dir="/tmp"))
    stores = EmbeddedStores(home=home).start()
    apply_migrations(stores.database_url, DIM)
    pool = pg.open_pool(stores.database_url, 1, 2)
    await pool.open(wait=True)
    r = Redis.from_url(stores.redis_url)
    # every floor off: random vectors lie below any, and each read is to do its whole work
    cfg = MemoryConfig(library_threshold=0.0, files_dense_floor=0.0, kzg_threshold=0.0, lesepfad_boden=-1.0)
    user, ch = "bench", "nova"
    texts, questions = texts_and_questions(nodes, queries, rng)
    try:
        ids: list[int] = []
        data = vecs(nodes)
        for i in range(0, nodes, 1000):
            ids += await lzg.add_nodes(pool, user, ch, [{"inhalt": texts[i + j], "embedding": v}
                                                       for j, v in enumerate(data[i:i + 1000])])
        await lzg.add_synapses(pool, [(ids[i], ids[i + 1], 0.6) for i in range(nodes - 1) if (i + 1) % 20],
                               art="nachbar")
        edges = [(ids[i], ids[int(j)], 0.5) for i in range(nodes) for j in rng.integers(0, nodes, 1) if ids[i] != ids[int(j)]]
        await lzg.add_synapses(pool, edges)
        # a second pair of the same size: the scans must filter, not just read one pair
        other = vecs(nodes)
        for i in range(0, nodes, 1000):
            await lzg.add_nodes(pool, "other", ch, [{"inhalt": texts[i + j], "embedding": v}
                                                    for j, v in enumerate(other[i:i + 1000])])
        for i, v in enumerate(vecs(500)):
            await kzg.add_entry(r, user, ch, f"kurz {i}", v)
        for i, v in enumerate(vecs(1000)):
            await bibliothek.add(pool, user, ch, "wissen", f"W{i}", "Wissen", v)
            await aufzeichnungen.add(pool, user, ch, f"/f/{i}", f"F{i}", "notiz datei", "inhalt", v)
        async with pool.connection() as conn:  # the steady state autovacuum keeps: statistics, visibility map
            await conn.execute("VACUUM ANALYZE")
        qs = list(zip(vecs(queries), questions))
        index = KZGIndex(user, ch)
        await index.refresh(r)

        async def plain(q, _text):
            async with pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT id FROM lzg_knoten WHERE user_id=%s AND character_id=%s ORDER BY embedding <=> %s LIMIT 10",
                    (user, ch, q))
                await cur.fetchall()

        ops = {
            "plain_pgvector_knn": plain,
            "memory_read_path": lambda q, text: lesepfad.erinnern(pool, user, ch, text, q, cfg),
            "kzg_knn": lambda q, _t: index.search(r, q, threshold=0.0, top_k=10),
            "bibliothek": lambda q, _t: bibliothek.suchen(pool, user, ch, q, cfg),
            "file_index": lambda q, _t: aufzeichnungen.suchen(pool, user, ch, "notiz", q, cfg),
        }
        times: dict[str, list[float]] = {k: [] for k in ops}
        for q, text in qs[:5]:  # warm-up
            for fn in ops.values():
                await fn(q, text)
        for q, text in qs:  # interleaved, so noise hits every arm alike
            for name, fn in ops.items():
                t = time.perf_counter()
                await fn(q, text)
                times[name].append((time.perf_counter() - t) * 1000)
        schreiben = await _schreiben(pool, user, ch, vecs, min(queries, 100))
    finally:
        await pool.close()
        await r.aclose()
        stores.stop()
    base50, base95 = pct(times["plain_pgvector_knn"], 50), pct(times["plain_pgvector_knn"], 95)
    return {"lzg_nodes_per_pair": nodes, "queries": queries,
            "write_path_per_turn_ms": {"p50": round(pct(schreiben, 50), 3), "p95": round(pct(schreiben, 95), 3),
                                       "turns": len(schreiben)},
            "read_path_p95_ratio_to_plain_knn": round(pct(times["memory_read_path"], 95) / base95, 3),
            "arms": {k: {"p50_ms": round(pct(v, 50), 3), "p95_ms": round(pct(v, 95), 3),
                         "p50_ratio_to_plain_knn": round(pct(v, 50) / base50, 3),
                         "p95_ratio_to_plain_knn": round(pct(v, 95) / base95, 3)} for k, v in times.items()}}


async def _schreiben(pool, user: str, ch: str, vecs, n: int) -> list[float]:
    """A turn's long-term write on top of the pair's graph (`lzg.episode_schreiben`: both sides of
    the exchange, one distilled memory, linked to the session's previous exchange), n turns in a row."""
    from datetime import datetime, timedelta, timezone

    from core.wire import Aeusserung, Episode, Verdichtung
    from memory import lzg

    t0, out = datetime.now(timezone.utc), []
    for i, (a, b, c) in enumerate(zip(vecs(n), vecs(n), vecs(n))):
        ep = Episode(quelle=f"bench-{i}", zeitpunkt=t0 + timedelta(seconds=30 * i), anschluss_s=6 * 3600,
                     aeusserungen=[Aeusserung(sprecher="Person B", beobachter="mensch", text=f"Nachricht {i} ueber den Garten",
                                              embedding=a.tolist()),
                                   Aeusserung(sprecher="Nova", beobachter="nova", text=f"Antwort {i} ueber Blumen",
                                              embedding=b.tolist())],
                     verdichtungen=[Verdichtung(inhalt=f"Person B gaertnert ({i})", embedding=c.tolist())])
        t = time.perf_counter()
        await lzg.episode_schreiben(pool, user, ch, ep)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    print(json.dumps(asyncio.run(run(args.nodes, args.queries)), indent=2))


if __name__ == "__main__":
    main()
