"""How often a structured node gets an answer it can use: the share of `{node}.antwort` decisions
with outcome `ok` over a fixed conversation, with the engine held to each node's JSON schema
(structured outputs on) and without (the answer only parsed and validated afterwards).

    python -m bench.structured                 # both modes, side by side, on the embedded model
    python -m bench.structured --mode on       # one mode (a fresh system under a scratch home)

Each mode runs in its own process with its own system, so the two cannot share state; the
conversation, the model and every other setting are the same. The Thinker's runs are counted
beside them (`thinker.ergebnis`: a run that ends in `max_iterationen` never read a protocol line).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import uuid

import httpx
from pipeline.node_config import capped

GESPRAECH = [
    "Hallo! Ich bin Mara und wohne in Leipzig.",
    "Heute war ein anstrengender Tag im Buero, mein Chef war ziemlich gereizt.",
    "Ich habe einen Hund, er heisst Bello und ist ein Beagle.",
    "Bello hat gestern meinen Schuh zerkaut, ich musste so lachen.",
    "Notiere bitte: Hundefutter kaufen und Tierarzt anrufen.",
    "Am Freitag um 15 Uhr habe ich einen Zahnarzttermin.",
    "Ich bin ein bisschen nervoes wegen des Termins.",
    "Was machst du eigentlich gern?",
    "Mein Ziel ist es, im Sommer einen Halbmarathon zu laufen.",
    "Ich trainiere dreimal die Woche, aber heute hatte ich keine Lust.",
    "Weisst du noch, wie mein Hund heisst?",
    "Welchen Termin habe ich diese Woche?",
    "Meine Schwester Lena kommt am Wochenende zu Besuch.",
    "Wir wollen zusammen kochen, vielleicht Lasagne.",
    "Ich mag keine Pilze, das solltest du dir merken.",
    "Manchmal fuehle ich mich in der Stadt etwas einsam.",
    "Danke, dass du mir zuhoerst.",
    "Was denkst du ueber Regen im November?",
    "Erinnere mich bitte daran, dass ich Lena vom Bahnhof abhole.",
    "Gute Nacht, bis morgen!",
]


async def converse(url: str, key: str, drain_s: float) -> dict:
    """The conversation on one fresh pair, then the decisions of its turns, background included."""
    user = f"struct-{uuid.uuid4().hex[:6]}"
    h = {"Authorization": f"Bearer {key}"}
    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=900) as c:
        for text in GESPRAECH:
            r = await c.post(f"/v1/pairs/{user}/nova/turns", json={"text": text}, headers=h)
            r.raise_for_status()
        turns_s = time.perf_counter() - t0
        deadline = time.monotonic() + drain_s  # the background chain runs after each reply
        while time.monotonic() < deadline:
            ob = (await c.get("/v1/operator/status", headers=h)).json()["outbox"]
            if not ob.get("pending") and not ob.get("undelivered"):
                break
            await asyncio.sleep(2)
        # the operators' per-pair view: every decision of the pair's turns, background included
        data = (await c.get(f"/v1/operator/pairs/{user}/nova/turns", params={"limit": 100}, headers=h)).json()
    rows = [d for t in data["turns"] for d in t["decisions"]]
    return {"turns": len(GESPRAECH), "turns_s": round(turns_s, 1), "decisions": rows}


def tally(decisions: list[dict]) -> dict:
    per_node: dict[str, dict[str, int]] = {}
    lost = []  # every unusable answer with its start and end: what to look at next
    for d in decisions:
        name, outcome = d.get("entscheidung"), d.get("outcome")
        if not name or not (name.endswith(".antwort") or name == "thinker.ergebnis"):
            continue
        per_node.setdefault(name, {}).setdefault(outcome, 0)
        per_node[name][outcome] += 1
        if name.endswith(".antwort") and outcome not in ("ok", "geschlossen"):
            inputs = d.get("inputs") or {}
            lost.append({"entscheidung": name, "outcome": outcome, "zeichen": inputs.get("zeichen"),
                         "anfang": inputs.get("anfang"), "ende": inputs.get("ende")})
    structured = {k: v for k, v in per_node.items() if k.endswith(".antwort")}
    calls = sum(sum(v.values()) for v in structured.values())
    # valid: the answer validated — whole (`ok`) or closed where the budget cut it (`geschlossen`)
    ok = sum(v.get("ok", 0) + v.get("geschlossen", 0) for v in structured.values())
    closed = sum(v.get("geschlossen", 0) for v in structured.values())
    thinker = per_node.get("thinker.ergebnis", {})
    reasoned = sum(n for o, n in thinker.items() if o != "uebersprungen")
    return {"structured_calls": calls, "valid": ok, "valid_share": round(ok / calls, 4) if calls else None,
            "of_them_closed": closed,
            "per_node": dict(sorted(per_node.items())), "verloren": lost,
            # a Thinker run that ends in `max_iterationen` never produced a protocol line it could act on
            "thinker_protocol_share": round(1 - thinker.get("max_iterationen", 0) / reasoned, 4) if reasoned else None}


def one_mode(mode: str, max_tokens: int | None, drain_s: float) -> dict:
    from bench.system import running

    budgets = capped(max_tokens) if max_tokens else {}
    with running(None, None, http_port=8767, node_max_tokens=budgets, thinker_max_iterations=2,
                 llm_structured_outputs=(mode == "on")) as (url, key):
        out = asyncio.run(converse(url, key, drain_s))
    return {"mode": mode, "max_tokens": max_tokens or "per node", "turns_s": out["turns_s"], **tally(out["decisions"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("on", "off", "both"), default="both")
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="cap every node's budget (default: the product's budgets per node)")
    ap.add_argument("--drain-s", type=float, default=600)
    args = ap.parse_args()
    if args.mode != "both":
        print(json.dumps(one_mode(args.mode, args.max_tokens, args.drain_s)))
        return
    reports = {}
    for mode in ("off", "on"):  # one process each: a fresh Ray, fresh stores
        cap = ["--max-tokens", str(args.max_tokens)] if args.max_tokens else []
        out = subprocess.run([sys.executable, "-m", "bench.structured", "--mode", mode, *cap, "--drain-s", str(args.drain_s)],
                             capture_output=True, text=True, check=True)
        reports[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(reports, indent=2))
    off, on = reports["off"], reports["on"]
    print(f"valid structured answers: off {off['valid']}/{off['structured_calls']} = {off['valid_share']}"
          f"   on {on['valid']}/{on['structured_calls']} = {on['valid_share']}")
    print(f"thinker runs that reached a protocol result: off {off['thinker_protocol_share']}   "
          f"on {on['thinker_protocol_share']}")


if __name__ == "__main__":
    main()
