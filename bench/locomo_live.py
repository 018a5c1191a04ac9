"""Recall where it is lived: LoCoMo conversations replayed through the real turn path, beside the
same conversations imported, one run.

A fresh system (Ray, Serve, the stores, the embedder with the real MiniLM model) answers on a
transcript engine (bench/standin.py `--transkript`): the responder answers each message of the
person (the conversation's `speaker_a`) with the other speaker's next line, every structured node
gets the smallest answer its schema allows, so `praegung` distils nothing and the exchange itself is
what long-term memory keeps (the named fallback `nur_episode`). Each conversation is one pair; its
exchanges go over HTTP one after another (`POST /v1/pairs/{user}/nova/turns`), the background chain
writing each turn's long-term memory through the one write (`lzg.episode_schreiben`). A session
that opens with the other speaker opens with the message `… {conversation}.{session}`; a last line
of the person's gets the engine's `Mhm.`. The same conversations are imported into pairs of their own
(`memory.importer`). Then every question of categories 1–4 is asked of both through the read path
(`lesepfad.erinnern`, the product's configuration), and the share of its evidence turns among the
memories returned is recall@5/@10; a live memory counts for the turns it holds (its exchange's
message or reply). The live pair's memory names the two by their roles (`Person B`, Nova), the
imported one by the speakers' names: the live pair is asked the question with the names put in
roles (`in_rollen`). Printed beside them: the replay's turns/s, and how many stored replies are the
transcript's line (the review may change a reply; the stand-in's tribunal approves).

    python -m bench.locomo_live [--conversations 5] [--sessions N] [--standin-ms 0] [--out report.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import standin
from bench.harness import _free_port
from bench.locomo_recall import DEFAULT_DATA

OEFFNUNG = "…"
"""The person's message that opens a session whose first line is the other speaker's, numbered
(`… 2.7`: conversation 2, session 7) so the transcript answers it with that line."""


@dataclass
class Austausch:
    turn_id: str
    nachricht: str
    antwort: str | None
    ids_nachricht: list[str] = field(default_factory=list)
    ids_antwort: list[str] = field(default_factory=list)


def austausche(data: dict, ci: int, max_sessions: int | None) -> list[Austausch]:
    """The conversation as the person's messages and the replies to them, session by session."""
    conv = data["conversation"]
    a = conv["speaker_a"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))[:max_sessions]
    out: list[Austausch] = []
    for n in numbers:
        for i, t in enumerate(conv[f"session_{n}"]):
            if t["speaker"] == a:
                out.append(Austausch(f"live{ci}-s{n}-{i}", t["text"], None, [t["dia_id"]]))
            elif out and out[-1].antwort is None and out[-1].turn_id.startswith(f"live{ci}-s{n}-"):
                out[-1].antwort, out[-1].ids_antwort = t["text"], [t["dia_id"]]
            else:  # the session opens with the other speaker
                out.append(Austausch(f"live{ci}-s{n}-{i}", f"{OEFFNUNG} {ci}.{n}", t["text"], [], [t["dia_id"]]))
    return out


def in_rollen(frage: str, person: str, figur: str) -> str:
    """A LoCoMo question as the live pair's memory names the two: the person is `Person B` there
    and the other speaker is Nova (the node texts carry the roles, not the speakers' names; the
    imported pair's carry the names and is asked the question as it is)."""
    for name, rolle in ((person, "Person B"), (figur, "Nova")):
        frage = re.sub(rf"\b{re.escape(name)}\b", rolle, frage)
    return frage


def transkript(alle: list[list[Austausch]]) -> dict[str, str]:
    antworten: dict[str, str] = {}
    for ex in (x for conv in alle for x in conv):
        if ex.antwort is not None:
            antworten.setdefault(ex.nachricht.strip(), ex.antwort)
    return antworten


async def _replay_pair(c: httpx.AsyncClient, key: str, user: str, exchanges: list[Austausch]) -> tuple[int, int]:
    """One conversation's exchanges, one after another; returns (turns, replies as the transcript)."""
    h, wie = {"Authorization": f"Bearer {key}"}, 0
    for ex in exchanges:
        while True:
            r = await c.post(f"/v1/pairs/{user}/nova/turns", json={"text": ex.nachricht, "turn_id": ex.turn_id}, headers=h)
            if r.status_code == 200:
                break
            if r.status_code not in (429, 503):
                raise SystemExit(f"{user} {ex.turn_id}: {r.status_code} {r.text[:300]}")
            await asyncio.sleep(0.1)  # the pair's previous background still holds its place
        reply = r.json().get("reply", "")
        wie += int(ex.antwort is None or reply.strip() == ex.antwort.strip())
    return len(exchanges), wie


async def replay(rt, key: str, alle: list[list[Austausch]]) -> dict:
    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=rt.url, timeout=300) as c:
        done = await asyncio.gather(*(_replay_pair(c, key, f"live{ci}", ex) for ci, ex in enumerate(alle)))
    return {"turns": sum(d[0] for d in done), "seconds": round(time.perf_counter() - t0, 1),
            "replies_as_transcript": sum(d[1] for d in done)}


async def warten_bis_geschrieben(settings, alle: list[list[Austausch]], timeout_s: float = 900) -> dict:
    """Until every exchange's background has written its long-term memory: the nodes, and the
    exchanges left unwritten when it gave up."""
    from memory import lzg, pg

    pool = pg.open_pool(settings.database_url, 1, 2)
    await pool.open(wait=True)
    try:
        deadline = time.time() + timeout_s
        while True:
            counts = [await lzg.count_by_quelle(pool, f"live{ci}", "nova") for ci in range(len(alle))]
            missing = sum(1 for ci, conv in enumerate(alle) for ex in conv if ex.turn_id not in counts[ci])
            if missing == 0 or time.time() > deadline:
                return {"lzg_nodes": sum(sum(c.values()) for c in counts), "exchanges_unwritten": missing}
            await asyncio.sleep(2)
    finally:
        await pool.close()


async def fragen(settings, raw: list, alle: list[list[Austausch]]) -> dict:
    """Import each conversation into a pair of its own, then ask every question of both pairs."""
    from redis.asyncio import Redis

    from memory import pg
    from memory.config import for_model
    from memory.importer import import_conversation, load_conversation
    from memory.lesepfad import erinnern
    from serve.embedder import encode, load_model

    model = load_model(2)

    def embed(texts):
        return encode(model, texts)

    pool = pg.open_pool(settings.database_url, 1, 4)
    await pool.open(wait=True)
    r = Redis.from_url(settings.redis_url)
    cfg = for_model(settings.embedding_model)
    arms: dict[str, list[tuple[float, float]]] = {"live": [], "import": []}
    try:
        for ci, conv in enumerate(alle):
            data, turns = load_conversation(raw, ci)
            gespielt = {i for ex in conv for i in ex.ids_nachricht + ex.ids_antwort}
            turns = [t for t in turns if t.source_id in gespielt]  # the same sessions as the replay
            await import_conversation(pool, r, f"import{ci}", "nova", turns, data["conversation"]["speaker_a"], embed)
            dia = {(ex.turn_id, "mensch"): ex.ids_nachricht for ex in conv} | \
                  {(ex.turn_id, "nova"): ex.ids_antwort for ex in conv}
            asked = [qa for qa in data["qa"] if qa.get("category") in (1, 2, 3, 4) and qa.get("evidence")
                     and set(qa["evidence"]) <= gespielt]
            a, b = data["conversation"]["speaker_a"], data["conversation"]["speaker_b"]
            gefragt = {"import": [qa["question"] for qa in asked],
                       "live": [in_rollen(qa["question"], a, b) for qa in asked]}
            vektoren = {arm: embed(qs) if qs else [] for arm, qs in gefragt.items()}
            for n, qa in enumerate(asked):
                ev = set(qa["evidence"])
                for arm, user in (("live", f"live{ci}"), ("import", f"import{ci}")):
                    got = (await erinnern(pool, user, "nova", gefragt[arm][n], vektoren[arm][n], cfg))["erinnerungen"]
                    ranked = [set(dia.get((m["quelle"], m["beobachter"]), [])) if arm == "live" else {m["quelle"]}
                              for m in got]
                    at = [set().union(*ranked[:k]) if ranked[:k] else set() for k in (5, 10)]
                    arms[arm].append((len(ev & at[0]) / len(ev), len(ev & at[1]) / len(ev)))
    finally:
        await pool.close()
        await r.aclose()
    return {arm: {"questions": len(v), "recall@5": round(sum(x[0] for x in v) / len(v), 4),
                  "recall@10": round(sum(x[1] for x in v) / len(v), 4)} for arm, v in arms.items() if v}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--conversations", type=int)
    ap.add_argument("--sessions", type=int, help="only the first N sessions of each conversation")
    ap.add_argument("--standin-ms", type=float, default=0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    raw = json.loads(a.data.read_text())[:a.conversations]
    alle = [austausche(conv, ci, a.sessions) for ci, conv in enumerate(raw)]
    os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray reads it when first imported (cluster/runtime.py)
    from cluster import runtime
    from core.settings import load_settings

    home = Path(tempfile.mkdtemp(prefix="nblive-", dir="/tmp"))
    (home / "transkript.json").write_text(json.dumps({"antworten": transkript(alle)}, ensure_ascii=False))
    port = _free_port()
    engine = standin.start(port, a.standin_ms, transkript=str(home / "transkript.json"))
    rt = runtime.start(load_settings(home=home, http_port=_free_port(), llm_backend="openai", llm_model="standin",
                                     openai_base_url=f"http://127.0.0.1:{port}/v1"))
    try:
        t0 = time.perf_counter()
        gespielt = asyncio.run(replay(rt, runtime.create_key(None, operator=True), alle))
        gespielt |= asyncio.run(warten_bis_geschrieben(rt.settings, alle))
        gespielt["seconds_until_written"] = round(time.perf_counter() - t0, 1)
        recall = asyncio.run(fragen(rt.settings, raw, alle))
    finally:
        runtime.stop(rt)
        engine.terminate()
        shutil.rmtree(home, ignore_errors=True)
    report = {"replay": gespielt | {"turns_per_s": round(gespielt["turns"] / gespielt["seconds"], 2)}, **recall}
    if "live" in recall and "import" in recall:
        report["live_minus_import_recall@10"] = round(recall["live"]["recall@10"] - recall["import"]["recall@10"], 4)
    print(json.dumps(report, indent=2))
    if a.out:
        a.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
