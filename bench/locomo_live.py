"""Recall where it is lived: LoCoMo conversations replayed through the real turn path, beside the
same conversations imported, one run.

A fresh system (Ray, Serve, the stores, the embedder with the real MiniLM model) answers on a
transcript engine (bench/standin.py `--transkript`): the responder answers each message of the
person (the conversation's `speaker_a`) with the other speaker's next line, every structured node
gets the smallest answer its schema allows, so `praegung` distils nothing and the exchange itself is
what long-term memory keeps (the named fallback `nur_episode`). A pair's exchanges go over HTTP one
after another (`POST /v1/pairs/{user}/{character}/turns`), the background chain writing each turn's
long-term memory through the one write (`lzg.episode_schreiben`). A session that opens with the
other speaker opens with the message `… {conversation}.{session}`; a last line of the person's gets
the engine's `Mhm.`. The same conversations are imported into pairs of their own
(`memory.importer`, the baseline). Then every question of categories 1–4 is asked of every arm's
pair through the read path (`lesepfad.erinnern`, the product's configuration), and the share of
its evidence turns among the memories returned is recall@5/@10; a live memory counts for the turns
it holds (its exchange's message or reply). Printed beside them: the replay's turns/s, and how many
stored replies are the transcript's line (the review may change a reply; the stand-in's tribunal
approves).

Two live arms replay the same exchanges, each conversation into a pair of its own per arm:
- `live`: as a client that knows the person does — each message sent with the person's name
  (`name`) and, by the operator, its session's date (`zeitpunkt`, one second per exchange), to a
  character named as the other speaker; the pair is asked the questions as they are;
- `live_rollen`: messages without name or date (every turn dated now, the sessions following within
  minutes), to Nova; the pair is asked the questions with the names put in roles (`in_rollen`).

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
from datetime import datetime, timedelta
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
    zeitpunkt: datetime | None = None
    """The session's date, one second later per exchange (LoCoMo dates a session, not its lines)."""


def austausche(data: dict, ci: int, max_sessions: int | None) -> list[Austausch]:
    """The conversation as the person's messages and the replies to them, session by session."""
    from memory.importer import parse_locomo_date

    conv = data["conversation"]
    a = conv["speaker_a"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))[:max_sessions]
    out: list[Austausch] = []
    for n in numbers:
        datum = parse_locomo_date(conv.get(f"session_{n}_date_time", ""))
        for i, t in enumerate(conv[f"session_{n}"]):
            when = datum + timedelta(seconds=i) if datum else None
            if t["speaker"] == a:
                out.append(Austausch(f"live{ci}-s{n}-{i}", t["text"], None, [t["dia_id"]], zeitpunkt=when))
            elif out and out[-1].antwort is None and out[-1].turn_id.startswith(f"live{ci}-s{n}-"):
                out[-1].antwort, out[-1].ids_antwort = t["text"], [t["dia_id"]]
            else:  # the session opens with the other speaker
                out.append(Austausch(f"live{ci}-s{n}-{i}", f"{OEFFNUNG} {ci}.{n}", t["text"], [], [t["dia_id"]],
                                     zeitpunkt=when))
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


@dataclass(frozen=True)
class Paar:
    """Where one arm replays one conversation, and what its client sends with each message."""
    user: str
    character: str
    name: str | None = None
    """The person's name; None: none sent (and no date either)."""


def paare(raw: list) -> dict[str, list[Paar]]:
    out: dict[str, list[Paar]] = {"live": [], "live_rollen": []}
    for ci, data in enumerate(raw):
        out["live"].append(Paar(f"live{ci}", f"figur{ci}", data["conversation"]["speaker_a"]))
        out["live_rollen"].append(Paar(f"rolle{ci}", "nova"))
    return out


async def _figuren(c: httpx.AsyncClient, key: str, raw: list, named: list[Paar]) -> None:
    """The other speaker of each conversation as the character of its named pair."""
    for data, p in zip(raw, named):
        r = await c.post("/v1/characters", json={"character_id": p.character, "name": data["conversation"]["speaker_b"]},
                         headers={"Authorization": f"Bearer {key}"})
        if r.status_code != 201:
            raise SystemExit(f"character {p.character}: {r.status_code} {r.text[:300]}")


async def _replay_pair(c: httpx.AsyncClient, key: str, p: Paar, exchanges: list[Austausch]) -> tuple[int, int]:
    """One conversation's exchanges, one after another; returns (turns, replies as the transcript)."""
    h, wie = {"Authorization": f"Bearer {key}"}, 0
    for ex in exchanges:
        body = {"text": ex.nachricht, "turn_id": ex.turn_id}
        if p.name is not None:
            body |= {"name": p.name, **({"zeitpunkt": ex.zeitpunkt.isoformat()} if ex.zeitpunkt else {})}
        while True:
            r = await c.post(f"/v1/pairs/{p.user}/{p.character}/turns", json=body, headers=h)
            if r.status_code == 200:
                break
            if r.status_code not in (429, 503):
                raise SystemExit(f"{p.user} {ex.turn_id}: {r.status_code} {r.text[:300]}")
            await asyncio.sleep(0.1)  # the pair's previous background still holds its place
        reply = r.json().get("reply", "")
        wie += int(ex.antwort is None or reply.strip() == ex.antwort.strip())
    return len(exchanges), wie


async def replay(rt, key: str, raw: list, arme: dict[str, list[Paar]], alle: list[list[Austausch]]) -> dict:
    async with httpx.AsyncClient(base_url=rt.url, timeout=300) as c:
        await _figuren(c, key, raw, arme["live"])
        t0 = time.perf_counter()
        done = await asyncio.gather(*(_replay_pair(c, key, p, ex) for ps in arme.values() for p, ex in zip(ps, alle)))
    return {"turns": sum(d[0] for d in done), "seconds": round(time.perf_counter() - t0, 1),
            "replies_as_transcript": sum(d[1] for d in done)}


async def warten_bis_geschrieben(settings, arme: dict[str, list[Paar]], alle: list[list[Austausch]],
                                 timeout_s: float = 900) -> dict:
    """Until every exchange's background has written its long-term memory: the nodes, and the
    exchanges left unwritten when it gave up."""
    from memory import lzg, pg

    pool = pg.open_pool(settings.database_url, 1, 2)
    await pool.open(wait=True)
    try:
        deadline = time.time() + timeout_s
        while True:
            ps = [p for arm in arme.values() for p in arm]
            counts = [await lzg.count_by_quelle(pool, p.user, p.character) for p in ps]
            missing = sum(1 for i, p in enumerate(ps) for ex in alle[i % len(alle)] if ex.turn_id not in counts[i])
            if missing == 0 or time.time() > deadline:
                return {"lzg_nodes": sum(sum(c.values()) for c in counts), "exchanges_unwritten": missing}
            await asyncio.sleep(2)
    finally:
        await pool.close()


async def fragen(settings, raw: list, arme: dict[str, list[Paar]], alle: list[list[Austausch]]) -> dict:
    """Import each conversation into a pair of its own, then ask every question of each arm's pair."""
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
    arms: dict[str, list[tuple[float, float]]] = {arm: [] for arm in (*arme, "import")}
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
            gefragt = {"import": [qa["question"] for qa in asked], "live": [qa["question"] for qa in asked],
                       "live_rollen": [in_rollen(qa["question"], a, b) for qa in asked]}
            vektoren = {arm: embed(qs) if qs else [] for arm, qs in gefragt.items()}
            wer = {arm: (ps[ci].user, ps[ci].character) for arm, ps in arme.items()} | {"import": (f"import{ci}", "nova")}
            for n, qa in enumerate(asked):
                ev = set(qa["evidence"])
                for arm, (user, character) in wer.items():
                    got = (await erinnern(pool, user, character, gefragt[arm][n], vektoren[arm][n], cfg)).erinnerungen
                    ranked = [set(dia.get((m.quelle, m.beobachter), [])) if arm != "import" else {m.quelle}
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
    # LoCoMo's dates carry no zone: read as UTC, as the importer dates its nodes
    rt = runtime.start(load_settings(home=home, http_port=_free_port(), llm_backend="openai", llm_model="standin",
                                     openai_base_url=f"http://127.0.0.1:{port}/v1", timezone="UTC"))
    arme = paare(raw)
    try:
        t0 = time.perf_counter()
        gespielt = asyncio.run(replay(rt, runtime.create_key(None, operator=True), raw, arme, alle))
        gespielt |= asyncio.run(warten_bis_geschrieben(rt.settings, arme, alle))
        gespielt["seconds_until_written"] = round(time.perf_counter() - t0, 1)
        recall = asyncio.run(fragen(rt.settings, raw, arme, alle))
    finally:
        runtime.stop(rt)
        engine.terminate()
        shutil.rmtree(home, ignore_errors=True)
    report = {"replay": gespielt | {"turns_per_s": round(gespielt["turns"] / gespielt["seconds"], 2)}, **recall}
    for arm in arme:
        if arm in recall and "import" in recall:
            report[f"{arm}_minus_import_recall@10"] = round(recall[arm]["recall@10"] - recall["import"]["recall@10"], 4)
    print(json.dumps(report, indent=2))
    if a.out:
        a.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
