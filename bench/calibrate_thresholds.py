"""Measure similarity thresholds for the embedding model, the way seed 001 did: coverage on real
prompts, both sides of the boundary.

On LoCoMo, each question of categories 1–4 is asked against its own conversation (the relevant
side) and against another conversation (the irrelevant side: nothing there can answer it). For
each threshold t the table gives the share of questions with at least one memory at or above t on
each side, and how often the best memory above t is an evidence turn.

    python -m bench.calibrate_thresholds [--data ../shared/data/locomo/locomo-dev.json]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.locomo_recall import DEFAULT_DATA


def main() -> None:
    import numpy as np

    from memory.importer import load_conversation, node_text
    from serve.embedder import encode, load_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    model = load_model(2)

    def embed(texts):
        return np.asarray(encode(model, texts), dtype=np.float32)

    raw = json.loads(args.data.read_text())
    convs = []
    for ci in range(len(raw)):
        data, turns = load_conversation(raw, ci)
        qas = [qa for qa in data["qa"] if qa.get("category") in (1, 2, 3, 4) and qa.get("evidence")]
        convs.append({"ids": [t.source_id for t in turns], "mat": embed([node_text(t) for t in turns]),
                      "qv": embed([qa["question"] for qa in qas]), "ev": [set(qa["evidence"]) for qa in qas]})
    rel_best, irr_best, rel_hit = [], [], []
    for ci, c in enumerate(convs):
        other = convs[(ci + 1) % len(convs)]
        sims = c["qv"] @ c["mat"].T
        for qi in range(len(c["ev"])):
            j = int(np.argmax(sims[qi]))
            rel_best.append(float(sims[qi, j]))
            rel_hit.append(c["ids"][j] in c["ev"][qi])
        irr_best += list((c["qv"] @ other["mat"].T).max(axis=1).astype(float))
    rel_best, irr_best, rel_hit = np.array(rel_best), np.array(irr_best), np.array(rel_hit)
    rows = []
    for t in np.arange(0.20, 0.80, 0.05):
        over = rel_best >= t
        rows.append({"threshold": round(float(t), 2), "relevant_coverage": round(float(over.mean()), 3),
                     "irrelevant_pass": round(float((irr_best >= t).mean()), 3),
                     "best_is_evidence_given_pass": round(float(rel_hit[over].mean()) if over.any() else 0.0, 3)})
    print(json.dumps({"questions": int(len(rel_best)), "table": rows}, indent=2))


if __name__ == "__main__":
    main()
