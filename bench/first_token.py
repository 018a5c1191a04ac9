"""The first token the person keeps, side by side with the first token a streaming client is shown.

A streamed turn sends the responder's text as `draft` events while it is written and, once the
turn is committed, the reply as stored in one `token` event (review — the Thinker, the tribunal
and corrector, the leak guard — may have changed the draft). Until the kept reply existed, the
stream showed the draft as the reply: its first draft event is therefore the baseline, the time
at which a person saw the first word before; the `token` event is the first word the person keeps
now. Both are measured in the same turns, over HTTP, from the request's start, on a fresh system
whose LLM calls a stand-in engine answers after a fixed latency (bench/standin.py: no model
compute, so what is left is the pipeline's own order of events):

    python -m bench.first_token                       # 1 pair, 10 measured turns, 200 ms a call
    python -m bench.first_token --pairs 4 --turns 10 --standin-ms 200

Prints p50 and p95 of each, and the OpenAI stream's first content for the same turns' kind.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from datetime import datetime, timezone

import httpx

from bench import standin
from bench.harness import _free_port

TEXTE = ("Hallo, wie geht es dir heute?", "Ich war gestern am Meer, es war windig.", "Was machst du gern am Abend?",
         "Mein Hund heisst Bello und ist schon alt.", "Erzaehl mir etwas Schoenes.")


def pct(xs: list[float], p: int) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))], 1)


def native_turn(client: httpx.Client, key: str, user: str, character: str, text: str) -> dict[str, float | None]:
    """Milliseconds from the request to the first draft, the kept reply and the end of a turn."""
    t0 = time.perf_counter()
    got: dict[str, float | None] = {"draft_ms": None, "kept_ms": None, "final_ms": None}
    with client.stream("POST", f"/v1/pairs/{user}/{character}/turns", params={"stream": "true", "draft": "true"},
                       headers={"Authorization": f"Bearer {key}"},
                       json={"text": text, "turn_id": uuid.uuid4().hex}) as r:
        r.raise_for_status()
        event = None
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                ms = (time.perf_counter() - t0) * 1000
                if event == "draft" and got["draft_ms"] is None:
                    got["draft_ms"] = ms
                elif event == "token":
                    got["kept_ms"] = ms
                elif event == "final":
                    got["final_ms"] = ms
                elif event == "error":
                    raise RuntimeError(f"turn failed: {line[5:]}")
    return got


def openai_turn(client: httpx.Client, key: str, user: str, character: str, text: str) -> float | None:
    """Milliseconds to the first content an OpenAI-compatible stream sends (only reviewed text)."""
    t0 = time.perf_counter()
    body = {"model": character, "user": user, "stream": True, "messages": [{"role": "user", "content": text}]}
    with client.stream("POST", "/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                delta = (json.loads(line[5:]).get("choices") or [{}])[0].get("delta", {})
                if delta.get("content"):
                    return (time.perf_counter() - t0) * 1000
    return None


def measure(url: str, key: str, pairs: int, turns: int) -> dict:
    rows, openai_ms = [], []
    with httpx.Client(base_url=url, timeout=300) as client:
        for p in range(pairs):
            user = f"ft{p}-{uuid.uuid4().hex[:6]}"
            native_turn(client, key, user, "nova", "Hallo.")  # unmeasured: the pair's actor is made
            for i in range(turns):
                rows.append(native_turn(client, key, user, "nova", TEXTE[i % len(TEXTE)]))
                openai_ms.append(openai_turn(client, key, user, "nova", TEXTE[(i + 2) % len(TEXTE)]))
    col = {k: [r[k] for r in rows if r[k] is not None] for k in ("draft_ms", "kept_ms", "final_ms")}
    return {"turns": len(rows),
            "first_shown_draft_ms": {"p50": pct(col["draft_ms"], 50), "p95": pct(col["draft_ms"], 95)},
            "first_kept_ms": {"p50": pct(col["kept_ms"], 50), "p95": pct(col["kept_ms"], 95)},
            "final_ms": {"p50": pct(col["final_ms"], 50), "p95": pct(col["final_ms"], 95)},
            "kept_after_draft_ms_p50": round(statistics.median(
                [r["kept_ms"] - r["draft_ms"] for r in rows if r["kept_ms"] and r["draft_ms"]]), 1) if rows else None,
            "openai_first_content_ms": {"p50": pct([x for x in openai_ms if x], 50),
                                        "p95": pct([x for x in openai_ms if x], 95)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--turns", type=int, default=10, help="measured turns per pair (after one unmeasured)")
    ap.add_argument("--standin-ms", type=float, default=200.0, help="the stand-in engine's latency per call")
    ap.add_argument("--url", help="measure a running system instead (its LLM as configured there)")
    ap.add_argument("--key", help="an operator key of the running system")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    from bench.system import running
    from pipeline.node_config import capped

    proc, engine = None, {}
    if args.url is None:
        port = _free_port()
        proc = standin.start(port, args.standin_ms)
        engine = {"llm_backend": "openai", "openai_base_url": f"http://127.0.0.1:{port}/v1", "llm_model": "standin",
                  "node_max_tokens": capped(48)}
    try:
        with running(args.url, args.key, **engine) as (url, key):
            report = measure(url, key, args.pairs, args.turns)
    finally:
        if proc is not None:
            proc.terminate()
    report.update(pairs=args.pairs, standin_ms=None if args.url else args.standin_ms,
                  measured_at=datetime.now(timezone.utc).isoformat())
    print(json.dumps(report, indent=2))
    d, k, o = report["first_shown_draft_ms"], report["first_kept_ms"], report["openai_first_content_ms"]
    print(f"\n{report['turns']} streamed turns: first token shown (the draft; what the stream showed as the reply "
          f"before) p50 {d['p50']} ms, p95 {d['p95']} ms — first token kept (the stored reply) p50 {k['p50']} ms, "
          f"p95 {k['p95']} ms; end of the turn p50 {report['final_ms']['p50']} ms; OpenAI stream's first content "
          f"p50 {o['p50']} ms")


if __name__ == "__main__":
    main()
