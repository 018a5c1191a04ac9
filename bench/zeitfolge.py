"""The read's order in time, setting by setting: recency without a mark against LoCoMo's top five.

Without a supersession mark the read orders by time alone (memory/lesepfad.zeitfolge): for a
question about the present state (`memory.lesart`), of two current memories of one subject
(cosine ≥ `lesepfad_thema_kosinus`) the newer moves right before the older, in pairs
(`lesepfad.paarweise`: each memory in one pair at most, the most alike first). This measures where
to draw "one subject": the update set's share of current-above-outdated (bench/data/wandel.json,
without marks, both forms of the question) beside LoCoMo dev recall@5 and @10, for each cosine in
one run, with recency off as the baseline.

Both are imported once through the one write path (as `bench.wandel` and `bench.locomo_recall`
import them) and each question read once through the enricher's `lzg_lesen` with the product's
`MemoryConfig`, recording the memories the read hands to its order in time and the cosines between
them (the read's own `_kosinus`); each setting then orders those with the product's own
`paarweise`, so a setting's figures are what the read path returns under it, without reading again.

    python -m bench.zeitfolge [--thema 0.3,0.45,0.7] [--out report.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

THEMEN = (0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.70, 0.80)
"""The cosines measured for "one subject" (`lesepfad_thema_kosinus`)."""


async def _lesen(store, user: str, frage: str, vektor, cfg, aufnahme: dict) -> dict:
    """The read's memories before its order in time and the cosines between them (recorded from
    `lesepfad.zeitfolge`): {"vor", "kosinus"}."""
    from pipeline.nodes.enricher import lzg_lesen

    aufnahme.clear()
    await lzg_lesen(store, user, "nova", frage, vektor, cfg)
    return {"vor": aufnahme.get("vor", []), "kosinus": aufnahme.get("kosinus", {})}


async def _wandel(pool, r, store, embed, cfg, aufnahme: dict) -> list[dict]:
    from bench import wandel
    from memory.importer import import_conversation, load_conversation

    rows = []
    for sz in wandel.laden():
        _, turns = load_conversation(wandel.als_locomo(sz))
        user = f"wandel-{sz['id']}"
        await import_conversation(pool, r, user, wandel.CHARAKTER, turns, sz["person"], embed)
        f = wandel.fakten(sz)
        alt, neu = [(await store.lzg.knoten_der_quelle(user, wandel.CHARAKTER, f[k]))[0] for k in ("alt", "neu")]
        vektoren = wandel.vektoren(embed, sz)
        for feld, form in wandel.FORMEN.items():
            rows.append({"form": form, "frage": sz[feld], "alt": alt, "neu": neu,
                         **await _lesen(store, user, sz[feld], vektoren[feld], cfg, aufnahme)})
    return rows


async def _locomo(pool, r, store, embed, embed_q, cfg, aufnahme: dict) -> list[dict]:
    from bench.locomo_recall import DEFAULT_DATA
    from memory.importer import import_conversation, load_conversation

    raw, rows = json.loads(DEFAULT_DATA.read_text()), []
    for ci in range(len(raw)):
        data, turns = load_conversation(raw, ci)
        await import_conversation(pool, r, f"locomo{ci}", "nova", turns, data["conversation"]["speaker_a"], embed)
        asked = [qa for qa in data["qa"] if qa.get("category") in (1, 2, 3, 4) and qa.get("evidence")]
        for qa, qv in zip(asked, embed_q([qa["question"] for qa in asked]) if asked else []):
            rows.append({"frage": qa["question"], "evidence": qa["evidence"],
                         **await _lesen(store, f"locomo{ci}", qa["question"], qv, cfg, aufnahme)})
    return rows


async def einlesen() -> tuple[list[dict], list[dict]]:
    """Both sets imported and read once: their rows, each with the cosines between its memories
    that could pass one another (`lesepfad._kosinus`, the read's own query)."""
    import memory.lesepfad as lesepfad
    from bench.locomo_recall import embedders
    from bench.stores import embedded_stores
    from core.settings import Settings
    from memory.config import for_model
    from memory.ops import PoolStore

    aufnahme: dict = {}
    zeitfolge = lesepfad.zeitfolge

    async def aufnehmen(conn, out, cfg, k, frage=None):
        aufnahme["vor"] = list(out.erinnerungen)
        aufnahme["kosinus"] = await lesepfad._kosinus(conn, aufnahme["vor"], cfg)
        return await zeitfolge(conn, out, cfg, k, frage=frage)

    lesepfad.zeitfolge = aufnehmen
    embed, embed_q, dim = embedders("minilm")
    cfg = for_model(Settings().embedding_model)
    try:
        async with embedded_stores("nbzeitfolge-", dim) as (pool, r):
            store = PoolStore(pool)
            return (await _wandel(pool, r, store, embed, cfg, aufnahme),
                    await _locomo(pool, r, store, embed, embed_q, cfg, aufnahme))
    finally:
        lesepfad.zeitfolge = zeitfolge


def gereiht(row: dict, cfg) -> list:
    """The row's memories in the order the read returns them under `cfg` (None: recency off)."""
    from memory.lesart import GEGENWART, lesart
    from memory.lesepfad import paarweise

    if cfg is None or lesart(row["frage"]).name != GEGENWART:
        return row["vor"]
    return paarweise(row["vor"], row["kosinus"], cfg)


def auswerten(wandel_rows: list[dict], locomo_rows: list[dict], cfg) -> dict:
    """One setting's figures: current above outdated (both forms), LoCoMo recall@5 and @10."""
    out: dict = {}
    for form in ("umgeschrieben", "roh"):
        rows = [w for w in wandel_rows if w["form"] == form]
        oben = 0
        for w in rows:
            ids = [e.id for e in gereiht(w, cfg)]
            oben += w["neu"] in ids and (w["alt"] not in ids or ids.index(w["neu"]) < ids.index(w["alt"]))
        out["current_above_outdated" if form == "umgeschrieben" else "as_asked"] = round(oben / len(rows), 4)
    r5 = r10 = 0.0
    for row in locomo_rows:
        quellen, ev = [e.quelle for e in gereiht(row, cfg)], set(row["evidence"])
        r5 += len(ev & set(quellen[:5])) / len(ev)
        r10 += len(ev & set(quellen[:10])) / len(ev)
    n = len(locomo_rows)
    return out | {"locomo_recall@5": round(r5 / n, 4), "locomo_recall@10": round(r10 / n, 4)}


def main() -> None:
    from core.settings import Settings
    from memory.config import for_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--thema", default=",".join(map(str, THEMEN)), help="the cosines to measure, comma-separated")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    t0 = time.perf_counter()
    wandel_rows, locomo_rows = asyncio.run(einlesen())
    cfg = for_model(Settings().embedding_model)
    settings = [("off (baseline)", None)] + [(f"{t:.2f}" + (" (set)" if t == cfg.lesepfad_thema_kosinus else ""),
                                              cfg.model_copy(update={"lesepfad_thema_kosinus": t}))
                                             for t in map(float, a.thema.split(","))]
    report = {"scenarios": len(wandel_rows) // 2, "locomo_questions": len(locomo_rows),
              "settings": {name: auswerten(wandel_rows, locomo_rows, c) for name, c in settings},
              "seconds": round(time.perf_counter() - t0, 1)}
    print("| lesepfad_thema_kosinus | without marks | as asked | LoCoMo recall@5 | @10 |\n|---|---|---|---|---|")
    for name, f in report["settings"].items():
        print(f"| {name} | {f['current_above_outdated']:.3f} | {f['as_asked']:.3f} | {f['locomo_recall@5']:.4f} "
              f"| {f['locomo_recall@10']:.4f} |")
    if a.out:
        a.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
