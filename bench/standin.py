"""A stand-in engine for measuring the pipeline without model compute: an OpenAI-compatible server
that answers every chat completion after a fixed latency and spends no CPU on it. A structured
call (`response_format` with a JSON schema) gets the smallest answer its schema allows; any other
call a short sentence (the Thinker's protocol line where the prompt asks for one). With `--worte
neu` every free text of an answer carries a word drawn from the request (`x` and six hex digits of
its hash), as a model words each turn anew: profiles, notes and memories then grow turn by turn as
they do with a real engine, and what a node's prompt shows of them changes; with `fest` (the
default) every free text is `x`, and the background writes a profile sentence once. With
`--transkript FILE` (a transcript engine, bench/locomo_live.py) the responder answers each message
of a conversation with the line the file gives for it (`{"antworten": {message: reply}}`) and every
free text of a structured answer is empty, the smallest a schema allows. Point the
`openai` backend at it:

    python -m bench.standin --port 8099 --latency-ms 200 [--worte neu] &
    NOVABERG_LLM_BACKEND=openai NOVABERG_OPENAI_BASE_URL=http://127.0.0.1:8099/v1 ./run.sh

Only for benchmarks: never a product engine.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from typing import Any

SATZ = "Schoen, dass du da bist. Erzaehl mir mehr davon."


WORTE = ("fest", "neu")
"""How the stand-in words its free text: always `x`, or anew for every request (`wort`)."""


def wort(body: dict[str, Any]) -> str:
    """The request's own word: the same request gets the same word (a retried call answers alike),
    another request another."""
    digest = hashlib.sha1(json.dumps(body.get("messages", []), sort_keys=True).encode()).hexdigest()
    return "x" + digest[:6]


ZAHLEN = ("null", "hoch")
"""How the stand-in answers a number: the smallest allowed (0), or the largest its schema allows
(`hoch`, 1 where it names none): every turn then matters enough for the short-term memory."""


def instance(schema: dict[str, Any], text: str = "x", hoch: bool = False) -> Any:
    """The smallest value a JSON schema allows (local $defs resolved); every free string is `text`;
    with `hoch` every number the largest allowed."""
    defs = schema.get("$defs", {})

    def make(s):
        if "$ref" in s:
            return make(defs[s["$ref"].split("/")[-1]])
        if "anyOf" in s:
            return make(next((x for x in s["anyOf"] if x.get("type") == "null"), s["anyOf"][0]))
        if "enum" in s:
            return s["enum"][0]
        t = s.get("type")
        if t == "object":
            return {k: make(v) for k, v in s.get("properties", {}).items()}
        if t == "array":
            return []
        if t == "string":
            return (text or "x" * s.get("minLength", 0)) if "pattern" not in s else "2026-01-01"
        if t in ("number", "integer"):
            return s.get("maximum", 1) if hoch else 0
        if t == "boolean":
            return False
        return None

    return make(schema)


AKTUELL = "[AKTUELLER PROMPT]\nDies ist die aktuelle Nachricht von Person B. Der Verlauf davor war Hintergrund.\n"
"""The responder's block that carries the message it answers (prompts/default/responder.task.txt)."""


def transkript_antwort(body: dict[str, Any], antworten: dict[str, str]) -> str | None:
    """The transcript's reply to the message the responder's prompt answers; None for another call."""
    prompt = str(body.get("messages", [{}])[-1].get("content", ""))
    if AKTUELL not in prompt:
        return None
    nachricht = prompt.split(AKTUELL, 1)[1].split("\n\n[", 1)[0].strip()
    return antworten.get(nachricht, "Mhm.")


def answer(body: dict[str, Any], worte: str = "fest", zahlen: str = "null",
           antworten: dict[str, str] | None = None) -> str:
    text = "" if antworten is not None else wort(body) if worte == "neu" else "x"
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return json.dumps(instance(fmt["json_schema"]["schema"], text, hoch=zahlen == "hoch"))
    if antworten is not None and (zeile := transkript_antwort(body, antworten)) is not None:
        return zeile
    prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    if "ERGEBNIS:" in prompt:
        return "ERGEBNIS: OK"
    return SATZ if worte == "fest" else f"{SATZ[:-1]} und von {text}."


def app(latency_s: float, worte: str = "fest", zahlen: str = "null", transkript: str | None = None):
    from aiohttp import web

    antworten = json.loads(open(transkript, encoding="utf-8").read())["antworten"] if transkript else None

    async def completions(request):
        body = await request.json()
        await asyncio.sleep(latency_s)
        text, n = answer(body, worte, zahlen, antworten), 0
        n = len(text.split())
        usage = {"prompt_tokens": sum(len(str(m.get("content", ""))) // 4 for m in body.get("messages", [])),
                 "completion_tokens": n}
        usage["total_tokens"] = usage["prompt_tokens"] + n
        cid, model = f"chatcmpl-{uuid.uuid4().hex[:24]}", body.get("model", "standin")
        if not body.get("stream"):
            return web.json_response({"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                   "finish_reason": "stop"}], "usage": usage})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for delta, finish, u in (({"content": text}, None, None), ({}, "stop", usage)):
            c = {"id": cid, "object": "chat.completion.chunk", "model": model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **({"usage": u} if u else {})}
            await resp.write(f"data: {json.dumps(c)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "standin", "object": "model"}]})

    a = web.Application(client_max_size=64 * 1024 * 1024)
    a.add_routes([web.post("/v1/chat/completions", completions), web.get("/v1/models", models)])
    return a


def start(port: int, latency_ms: float, worte: str = "fest", zahlen: str = "null",
          transkript: str | None = None) -> subprocess.Popen:
    """The stand-in in its own process (it must not share the measured process's CPU); returns
    when it answers."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.standin", "--port", str(port), "--latency-ms", str(latency_ms),
                             "--worte", worte, "--zahlen", zahlen, *(["--transkript", transkript] if transkript else [])],
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"the stand-in engine exited with {proc.returncode}")
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the stand-in engine did not answer within 30 s")


def main() -> None:
    from aiohttp import web

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8099)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--worte", choices=WORTE, default="fest",
                    help="free text always `x` (fest) or worded anew for every request (neu)")
    ap.add_argument("--zahlen", choices=ZAHLEN, default="null",
                    help="numbers the smallest allowed (null) or the largest (hoch)")
    ap.add_argument("--transkript", help="a transcript engine: the responder answers each message with this file's reply")
    args = ap.parse_args()
    web.run_app(app(args.latency_ms / 1000, args.worte, args.zahlen, args.transkript), host="127.0.0.1", port=args.port,
                print=None, access_log=None)


if __name__ == "__main__":
    main()
