"""Retrieval quality on LoCoMo: the path Nova reads with, next to plain dense top-k and BM25, one run.

Imports each conversation into its own pair (real embedded Postgres + Redis, the real MiniLM
model), then for every question of categories 1–4 measures the share of its evidence turns among
the top 5 and top 10 of: the enricher's own long-term memory read (`pipeline.nodes.enricher.lzg_lesen`,
which is the memory read path `memory.lesepfad.erinnern` with the product's `MemoryConfig`), plain
nearest neighbours on the same embeddings, and BM25 (rank_bm25) over the same node texts. For the
read path also: mean memories returned and the share of questions with nothing; for every arm the
latency per question, p50/p95 (the read path through Postgres, the baselines in memory with numpy).

    python -m bench.locomo_recall [--data ../shared/data/locomo/locomo-dev.json] [--out report.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


async def run(data_path: Path, limit: int | None, overrides: dict | None = None) -> dict:
    import numpy as np
    from rank_bm25 import BM25Okapi
    from redis.asyncio import Redis

    from memory import pg
    from memory.config import for_model
    from memory.embedded import EmbeddedStores
    from memory.importer import import_conversation, load_conversation, node_text
    from core.settings import Settings
    from memory.migrate import apply_migrations
    from memory.ops import PoolStore
    from pipeline.nodes.enricher import lzg_lesen
    from serve.embedder import encode, load_model, model_dimension

    model = load_model(2)

    def embed(texts):
        return encode(model, texts)

    home = Path(tempfile.mkdtemp(prefix="nblocomo-", dir="/tmp"))
    stores = EmbeddedStores(home=home).start()
    apply_migrations(stores.database_url, model_dimension(model))
    pool = pg.open_pool(stores.database_url, 1, 4)
    await pool.open(wait=True)
    r = Redis.from_url(stores.redis_url)
    # the configuration the pair actors read with (a lever under measurement: --set name=value)
    cfg = for_model(Settings().embedding_model, **(overrides or {}))
    store = PoolStore(pool)
    returned: list[int] = []
    latency_ms: dict[str, list[float]] = {"read_path": [], "dense": [], "bm25": []}
    raw = json.loads(data_path.read_text())
    arms = {"read_path": [], "dense": [], "bm25": []}
    n_questions = 0
    t0 = time.perf_counter()
    try:
        for ci in range(len(raw) if limit is None else min(limit, len(raw))):
            data, turns = load_conversation(raw, ci)
            user = f"locomo{ci}"
            await import_conversation(pool, r, user, "nova", turns, data["conversation"]["speaker_a"], embed)
            texts = [node_text(t) for t in turns]
            ids = [t.source_id for t in turns]
            bm25 = BM25Okapi([tokens(x) for x in texts])
            mat = np.asarray(embed(texts), dtype=np.float32)
            asked = [qa for qa in data["qa"] if qa.get("category") in (1, 2, 3, 4) and qa.get("evidence")]
            # all questions embedded first: the model's threads then leave the cores to the stores
            vectors = embed([qa["question"] for qa in asked]) if asked else []
            for qa, qv in zip(asked, vectors):
                ev = set(qa["evidence"])
                q = qa["question"]
                t_q = time.perf_counter()
                read = await lzg_lesen(store, user, "nova", q, qv, cfg)
                t_d = time.perf_counter()
                dense = [ids[i] for i in np.argsort(-(mat @ np.asarray(qv)), kind="stable")[:10]]
                t_b = time.perf_counter()
                bm = [ids[i] for i in np.argsort(-bm25.get_scores(tokens(q)), kind="stable")[:10]]
                t_e = time.perf_counter()
                for arm, a, b in (("read_path", t_q, t_d), ("dense", t_d, t_b), ("bm25", t_b, t_e)):
                    latency_ms[arm].append((b - a) * 1000)
                got = [h["quelle"] for h in read["erinnerungen"]]
                returned.append(len(got))
                for arm, ranked in (("read_path", got), ("dense", dense), ("bm25", bm)):
                    arms[arm].append((len(ev & set(ranked[:5])) / len(ev), len(ev & set(ranked[:10])) / len(ev)))
                n_questions += 1
    finally:
        await pool.close()
        await r.aclose()
        stores.stop()
    report = {"questions": n_questions, "seconds": round(time.perf_counter() - t0, 1),
              "read_path_config": {k: v for k, v in cfg.model_dump().items() if k.startswith("lesepfad_")
                                   or k.startswith("spreading_") or k == "lzg_anchor_count"},
              "read_path_mean_returned": round(sum(returned) / len(returned), 2),
              "read_path_share_empty": round(sum(1 for n in returned if n == 0) / len(returned), 4)}
    return report | _arms(arms, latency_ms)


def _arms(arms: dict[str, list[tuple[float, float]]], latency_ms: dict[str, list[float]]) -> dict:
    """Recall at 5 and 10 and latency per question of each arm, and the read path's ratios."""
    import numpy as np

    out: dict = {}
    for arm, vals in arms.items():
        out[arm] = {"recall@5": round(sum(v[0] for v in vals) / len(vals), 4),
                    "recall@10": round(sum(v[1] for v in vals) / len(vals), 4),
                    "latency_ms_p50": round(float(np.percentile(latency_ms[arm], 50)), 3),
                    "latency_ms_p95": round(float(np.percentile(latency_ms[arm], 95)), 3)}
    for k in ("recall@5", "recall@10"):
        out[f"read_path_vs_dense_{k}"] = round(out["read_path"][k] / out["dense"][k], 3)
        out[f"read_path_vs_bm25_{k}"] = round(out["read_path"][k] / out["bm25"][k], 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--conversations", type=int, help="only the first N conversations")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a MemoryConfig value for this run (to measure a lever)")
    args = ap.parse_args()
    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name] = json.loads(value)
    report = asyncio.run(run(args.data, args.conversations, overrides))
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
