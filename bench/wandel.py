"""Knowledge that changes: does Nova's read put the current fact above the outdated one?

The development set (bench/data/wandel.json, German and English) holds update scenarios — moves,
jobs, pets, health, relationships, plans, preferences, corrections: each an older fact the person
tells, a later update months after it, ordinary conversation around both, and a question whose
answer is the current fact, in two forms: as the query rewrite puts it (`suchfrage`, a full
question naming its subject — the search text a turn reads with) and as the person asks it
(`frage`, what a turn reads with when the rewrite exits). Each scenario is imported into a pair of
its own through the product's import path (`memory.importer.import_conversation`, the one write
of long-term memory), its question embedded with the product's MiniLM and asked through the
enricher's own read (`pipeline.nodes.enricher.lzg_lesen`: the store's `lesepfad.erinnern` with
the product's `MemoryConfig`, its floor included) twice:

- **without marks**: as imported, nothing says the older memory was superseded; what the read does
  with time alone (recency between near-equal memories of one subject, for a question that asks
  about the present state: `memory.lesart`; each row says how its question read) decides;
- **with marks**: the older node then marked superseded by the newer one through the store's own
  operation (`lzg.abloesen`, via the store client), dated at the update's date — the set's ground
  truth, i.e. what praegung marks when it recognises the update correctly.

For each arm: the share of scenarios whose current fact ranks above the outdated one among the
read's memories (an outdated fact not recalled counts as below; a current fact not recalled as a
miss), how often the current fact is not recalled, and what reaches the prompt — the read's
memories are what the enricher hands to the [GEDAECHTNIS] block: the share of reads that carry the
outdated fact, that carry it unmarked (read as current), and that put it first; and the share
of reads that recall nothing (the floor's `cold_start`). The main figures read the rewrite's form;
`as_asked` the person's own words. Beside them LoCoMo
recall on the development half (`bench.locomo_recall.run`, the read path with its floor) against
the baseline of bench/RESULTS.md (it must not drop by more than 0.01).

`--live` replays scenarios through the live turn path instead (Ray, Serve, the stores; the
transcript stand-in engine answers each message with Nova's line of the set and praegung with
nothing, so the exchanges themselves are what long-term memory keeps), each message sent with the
person's name and, by the operator, its session's date; then the same two arms on the live pairs.

    python -m bench.wandel [--scenarios N] [--no-locomo] [--out report.json]
    python -m bench.wandel --live [--scenarios 8]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "wandel.json"
KATEGORIEN = ("umzug", "beruf", "haustier", "gesundheit", "beziehung", "plan", "vorliebe", "korrektur")
"""moves, jobs, pets, health, relationships, plans, preferences, corrections"""
SPRACHEN = ("de", "en")
CHARAKTER = "nova"
LOCOMO_BASELINE_RECALL10 = 0.778
"""LoCoMo dev recall@10 of the read path with its floor (bench/RESULTS.md, "Retrieval quality on
LoCoMo", commit 1d73148)."""
LOCOMO_TOLERANZ = 0.01
ARME = ("ohne_marken", "mit_marken")
"""The two arms: without supersession marks (recency alone), with them (the set's ground truth)."""


def laden(path: Path = DATA) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["szenarien"]


def datum(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc)


def fundstelle(sz: dict, text: str) -> tuple[int, int]:
    """(session index, turn index) of the one turn that holds `text`."""
    hits = [(s, t) for s, sitzung in enumerate(sz["sitzungen"]) for t, turn in enumerate(sitzung["turns"])
            if text in turn]
    if len(hits) != 1:
        raise ValueError(f"{sz['id']}: {text!r} is in {len(hits)} turns, expected 1")
    return hits[0]


def dia_id(session: int, turn: int) -> str:
    return f"D{session + 1}:{turn + 1}"


def als_locomo(sz: dict, figur: str = "Nova", hintergrund: list[dict] = ()) -> dict:
    """The scenario as a LoCoMo conversation (the importer's format): the person is `speaker_a`,
    the sessions dated as LoCoMo dates them; each turn's dia_id `D<session>:<turn>`. The sessions
    of `hintergrund` follow as sessions 101… (dia_ids `H<n>:<turn>`), said by the same two."""
    conv: dict = {"speaker_a": sz["person"], "speaker_b": figur}
    eigene = [(s + 1, "D", sitzung) for s, sitzung in enumerate(sz["sitzungen"])]
    for n, kennung, sitzung in eigene + [(101 + h, "H", sitzung) for h, sitzung in enumerate(hintergrund)]:
        conv[f"session_{n}_date_time"] = datum(sitzung["datum"]).strftime("%I:%M %p on %d %B, %Y")
        conv[f"session_{n}"] = [{"speaker": sz["person"] if t % 2 == 0 else figur,
                                 "dia_id": f"{kennung}{n if kennung == 'D' else n - 100}:{t + 1}", "text": text}
                                for t, text in enumerate(sitzung["turns"])]
    return {"conversation": conv, "qa": []}


def hintergrund(sz: dict, szenarien: list[dict]) -> list[dict]:
    """The ordinary conversation of the other scenarios of the same language, as more of this
    person's history: their sessions without their facts (the fact's exchange, the person's turn
    and Nova's reply, is left out), so a pair holds more than one subject's few memories."""
    out = []
    for other in szenarien:
        if other["id"] == sz["id"] or other["sprache"] != sz["sprache"]:
            continue
        stellen = {fundstelle(other, other["alt"]), fundstelle(other, other["neu"])}
        for s, sitzung in enumerate(other["sitzungen"]):
            turns = [t for i, t in enumerate(sitzung["turns"]) if (s, i - i % 2) not in stellen]
            if turns:
                out.append({"datum": sitzung["datum"], "turns": turns})
    return out


def fakten(sz: dict) -> dict:
    """The dia_ids of the older and the current fact, and the date of the update."""
    (sa, ta), (sn, tn) = fundstelle(sz, sz["alt"]), fundstelle(sz, sz["neu"])
    return {"alt": dia_id(sa, ta), "neu": dia_id(sn, tn), "seit": datum(sz["sitzungen"][sn]["datum"])}


def bewerten(erinnerungen: list, alt_id: int, neu_id: int) -> dict:
    """Where the current and the outdated fact stand among one read's memories."""
    ids = [e.id for e in erinnerungen]
    rang_alt = ids.index(alt_id) if alt_id in ids else None
    rang_neu = ids.index(neu_id) if neu_id in ids else None
    alt = erinnerungen[rang_alt] if rang_alt is not None else None
    return {"rang_neu": rang_neu, "rang_alt": rang_alt,
            "oben": rang_neu is not None and (rang_alt is None or rang_neu < rang_alt),
            "neu_fehlt": rang_neu is None, "alt_im_prompt": alt is not None,
            "alt_unmarkiert": alt is not None and not getattr(alt, "gueltig_bis", None),
            "alt_zuerst": rang_alt == 0,
            "aktivierung": [None if r is None else erinnerungen[r].aktivierung for r in (rang_neu, rang_alt)]}


def zusammenfassen(zeilen: list[dict]) -> dict:
    """Per arm: the shares over all scenarios, and per language and category the share ranked above."""
    out: dict = {}
    for arm in ARME:
        rows = [z[arm] for z in zeilen]
        n = len(rows)
        out[arm] = {"scenarios": n,
                    "current_above_outdated": round(sum(r["oben"] for r in rows) / n, 4),
                    "current_above_outdated_where_either_recalled": round(
                        sum(r["oben"] for r in rows) / max(1, sum(not r["neu_fehlt"] or r["alt_im_prompt"] for r in rows)), 4),
                    "current_not_recalled": round(sum(r["neu_fehlt"] for r in rows) / n, 4),
                    "nothing_recalled": round(sum(bool(r.get("kaltstart")) for r in rows) / n, 4),
                    "outdated_in_prompt": round(sum(r["alt_im_prompt"] for r in rows) / n, 4),
                    "outdated_unmarked_in_prompt": round(sum(r["alt_unmarkiert"] for r in rows) / n, 4),
                    "outdated_first": round(sum(r["alt_zuerst"] for r in rows) / n, 4),
                    "question_read_as_past": round(sum(r.get("lesart") == "vergangenheit" for r in rows) / n, 4)}
        for key, values in (("by_language", SPRACHEN), ("by_category", KATEGORIEN)):
            feld = "sprache" if key == "by_language" else "kategorie"
            out[arm][key] = {v: round(sum(z[arm]["oben"] for z in zeilen if z[feld] == v)
                                      / max(1, sum(1 for z in zeilen if z[feld] == v)), 4) for v in values}
        out[arm]["failing"] = [z["id"] for z in zeilen if not z[arm]["oben"]]
    return out


FORMEN = {"suchfrage": "umgeschrieben", "frage": "roh"}
"""The question's two forms, each read: as the query rewrite puts it (the search text a turn reads
with), and as the person asks it (what a turn reads with when the rewrite exits)."""


async def _lesen(store, user: str, character: str, sz: dict, vektoren: dict, cfg, ids: dict) -> dict:
    from memory.lesart import lesart
    from pipeline.nodes.enricher import lzg_lesen

    out = {}
    for feld, form in FORMEN.items():
        read = await lzg_lesen(store, user, character, sz[feld], vektoren[feld], cfg)
        out[form] = bewerten(read.erinnerungen, ids["alt"], ids["neu"]) | {
            "kaltstart": read.rahmen.kaltstart, "gelesen": [e.inhalt[:100] for e in read.erinnerungen[:3]],
            "lesart": lesart(sz[feld]).name}
    return out


async def _paar_lesen(store, user: str, character: str, sz: dict, ids: dict, vektoren: dict, cfg,
                      turn_id: str) -> dict:
    """Both arms on one pair whose older and current fact are the nodes `ids["alt"]`, `ids["neu"]`:
    the read as it is, then the older node marked superseded by the current one, and the read
    again; each for both forms of the question."""
    ohne = await _lesen(store, user, character, sz, vektoren, cfg, ids)
    markiert = await store.lzg.abloesen(user, character, ids["alt"], ids["neu"], turn_id, seit=ids["seit"])
    mit = await _lesen(store, user, character, sz, vektoren, cfg, ids)
    return {form: {"id": sz["id"], "sprache": sz["sprache"], "kategorie": sz["kategorie"], "markiert": markiert,
                   "ohne_marken": ohne[form], "mit_marken": mit[form]} for form in FORMEN.values()}


def vektoren(embed, sz: dict) -> dict:
    return dict(zip(FORMEN, embed([sz[f] for f in FORMEN])))


async def _importiert(pool, r, store, embed, sz: dict, cfg, extra: list[dict]) -> dict:
    """One scenario imported into its own pair (with the sessions `extra` as more history), both
    arms read."""
    from memory.importer import import_conversation, load_conversation

    _, turns = load_conversation(als_locomo(sz, hintergrund=extra))
    user = f"wandel-{sz['id']}"
    await import_conversation(pool, r, user, CHARAKTER, turns, sz["person"], embed)
    f = fakten(sz)
    ids = {"alt": (await store.lzg.knoten_der_quelle(user, CHARAKTER, f["alt"]))[0],
           "neu": (await store.lzg.knoten_der_quelle(user, CHARAKTER, f["neu"]))[0], "seit": f["seit"]}
    return await _paar_lesen(store, user, CHARAKTER, sz, ids, vektoren(embed, sz), cfg, f"import-{f['neu']}")


async def run_import(szenarien: list[dict], overrides: dict | None = None, mit_hintergrund: bool = False,
                     alle: list[dict] = ()) -> list[dict]:
    """Every scenario through the import path into embedded stores of its own run; with
    `mit_hintergrund` each pair also holds the ordinary conversation of the other scenarios of
    its language (`hintergrund`, from `alle`)."""
    from bench.locomo_recall import embedders
    from bench.stores import embedded_stores
    from core.settings import Settings
    from memory.config import for_model
    from memory.ops import PoolStore

    embed, _, dim = embedders("minilm")
    cfg = for_model(Settings().embedding_model, **(overrides or {}))
    async with embedded_stores("nbwandel-", dim) as (pool, r):
        return [await _importiert(pool, r, PoolStore(pool), embed, sz, cfg,
                                  hintergrund(sz, alle or szenarien) if mit_hintergrund else [])
                for sz in szenarien]


def locomo(overrides: dict | None = None) -> dict:
    """LoCoMo dev recall of the same checkout (and the same configuration) beside the baseline."""
    from bench.locomo_recall import DEFAULT_DATA, run

    lc = asyncio.run(run(DEFAULT_DATA, None, overrides))
    at10 = lc["read_path"]["recall@10"]
    return {"questions": lc["questions"], "recall@5": lc["read_path"]["recall@5"], "recall@10": at10,
            "baseline_recall@10": LOCOMO_BASELINE_RECALL10, "change": round(at10 - LOCOMO_BASELINE_RECALL10, 4),
            "within_tolerance": at10 >= LOCOMO_BASELINE_RECALL10 - LOCOMO_TOLERANZ, "seconds": lc["seconds"]}


# --------------------------------------------------------------------------------------- live turn path
async def _live_lesen(settings, szenarien: list[dict], paare: list, alle: list) -> list[dict]:
    """Both arms on every live pair: the older and the current fact are the nodes of the exchanges
    whose message holds them (the message is an exchange's first utterance)."""
    from memory import pg
    from memory.config import for_model
    from memory.ops import PoolStore
    from serve.embedder import encode, load_model

    model = load_model(2)
    pool = pg.open_pool(settings.database_url, 1, 4)
    await pool.open(wait=True)
    store, cfg, out = PoolStore(pool), for_model(settings.embedding_model), []
    try:
        for sz, p, exchanges in zip(szenarien, paare, alle):
            f = fakten(sz)
            turn = {d: ex.turn_id for ex in exchanges for d in ex.ids_nachricht}
            ids = {k: (await store.lzg.knoten_der_quelle(p.user, p.character, turn[f[k]]))[0] for k in ("alt", "neu")}
            out.append(await _paar_lesen(store, p.user, p.character, sz, ids | {"seit": f["seit"]},
                                         vektoren(lambda t: encode(model, t), sz), cfg, turn[f["neu"]]))
    finally:
        await pool.close()
    return out


def run_live(szenarien: list[dict], standin_ms: float) -> tuple[dict, list[dict]]:
    """The scenarios replayed through the live turn path (bench/locomo_live.py's replay), then read."""
    import os
    import shutil

    from bench import locomo_live, standin
    from bench.harness import _free_port

    raw = [als_locomo(sz) for sz in szenarien]
    alle = [locomo_live.austausche(conv, ci, None) for ci, conv in enumerate(raw)]
    os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray reads it when first imported (cluster/runtime.py)
    from cluster import runtime
    from core.settings import load_settings

    home = Path(tempfile.mkdtemp(prefix="nbwandel-live-", dir="/tmp"))
    (home / "transkript.json").write_text(json.dumps({"antworten": locomo_live.transkript(alle)}, ensure_ascii=False))
    port = _free_port()
    engine = standin.start(port, standin_ms, transkript=str(home / "transkript.json"))
    rt = runtime.start(load_settings(home=home, http_port=_free_port(), llm_backend="openai", llm_model="standin",
                                     openai_base_url=f"http://127.0.0.1:{port}/v1", timezone="UTC"))
    arme = {"live": [locomo_live.Paar(f"wandel-live{ci}", f"figur{ci}", sz["person"]) for ci, sz in enumerate(szenarien)]}
    try:
        t0 = time.perf_counter()
        gespielt = asyncio.run(locomo_live.replay(rt, runtime.create_key(None, operator=True), raw, arme, alle))
        gespielt |= asyncio.run(locomo_live.warten_bis_geschrieben(rt.settings, arme, alle))
        gespielt["seconds_until_written"] = round(time.perf_counter() - t0, 1)
        zeilen = asyncio.run(_live_lesen(rt.settings, szenarien, arme["live"], alle))
    finally:
        runtime.stop(rt)
        engine.terminate()
        shutil.rmtree(home, ignore_errors=True)
    return gespielt, zeilen


def auswahl(szenarien: list[dict], n: int | None) -> list[dict]:
    """n scenarios spread over the categories and both languages: rounds over the categories, the
    languages alternating (all of them without n)."""
    if n is None:
        return szenarien
    reihe: list[dict] = []
    for runde in range(len(szenarien)):
        for i, k in enumerate(KATEGORIEN):
            passend = [s for s in szenarien if s["kategorie"] == k and s["sprache"] == SPRACHEN[(runde + i) % 2]]
            reihe += passend[runde // 2:runde // 2 + 1]
    return reihe[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--scenarios", type=int, help="only N scenarios, spread over the categories and both languages")
    ap.add_argument("--live", action="store_true", help="replay through the live turn path (starts Ray)")
    ap.add_argument("--standin-ms", type=float, default=0, help="--live: the stand-in engine's latency")
    ap.add_argument("--no-locomo", action="store_true", help="skip LoCoMo dev recall beside the set")
    ap.add_argument("--hintergrund", action="store_true",
                    help="each pair also holds the other scenarios' ordinary conversation of its language")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a MemoryConfig value for the import path's reads (to measure a lever)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    overrides = {n: json.loads(v) for n, _, v in (item.partition("=") for item in a.set)}
    alle = laden(a.data)
    szenarien = auswahl(alle, a.scenarios if a.scenarios or not a.live else 8)
    t0 = time.perf_counter()
    report: dict = {"path": "live turn path" if a.live else "import path",
                    "marks": "with marks = the older node marked superseded by the newer one through the "
                             "store's lzg.abloesen from the set's ground truth: what praegung marks when it is right"}
    if a.live:
        report["replay"], zeilen = run_live(szenarien, a.standin_ms)
    else:
        zeilen = asyncio.run(run_import(szenarien, overrides, a.hintergrund, alle))
        report["config_overrides"] = overrides
        report["background"] = "the other scenarios' ordinary conversation of the language" if a.hintergrund else None
    report |= zusammenfassen([z["umgeschrieben"] for z in zeilen])
    report["as_asked"] = {arm: {k: v for k, v in werte.items() if not k.startswith("by_")}
                          for arm, werte in zusammenfassen([z["roh"] for z in zeilen]).items()}
    report["marks_applied"] = sum(bool(z["umgeschrieben"]["markiert"]) for z in zeilen)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["scenarios"] = zeilen
    ausgeben(report, a.out)
    if not a.live and not a.no_locomo:
        report["locomo_dev"] = locomo(overrides)
        ausgeben(report, a.out)


def ausgeben(report: dict, out: Path | None) -> None:
    """The figures printed (the scenarios' rows only to `out`)."""
    print(json.dumps({k: v for k, v in report.items() if k != "scenarios"}, indent=2, ensure_ascii=False), flush=True)
    if out:
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str))


if __name__ == "__main__":
    main()
