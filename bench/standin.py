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

With `--cache` it models a serving engine's cost instead of a fixed latency (`Kosten`, defaults
for an 8B model on one H100, sources in bench/RESULTS.md): each replica (the `X-Novaberg-Replica`
header the LLM deployment sends; none: one default replica) keeps an LRU prefix cache of prompt
blocks and a limit of sequences in its batch; a call waits for a place in the batch and for the
replica's prefill, pays the prefill of its uncached prompt tokens, then decodes its completion at
the batch's inter-token latency. The usage reports `prompt_tokens_details.cached_tokens` as vLLM
does, and `GET /v1/standin/stats` every call served (replica, caller, tokens, time to first token,
estimated GPU-seconds) in both modes:

    python -m bench.standin --port 8099 --cache [--cache-tokens 400000] &

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
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Any

from core.names import CALLER_HEADER, PAIR_HEADER, REPLICA_HEADER
from pipeline import vocab

SATZ = "Schoen, dass du da bist. Erzaehl mir mehr davon."
REDE = ("Das klingt nach einem langen Tag.", "Ich hoere dir gern zu.", "Was hat dich daran am meisten bewegt?",
        "Manchmal braucht so etwas einfach Zeit.", "Ich musste vorhin an unser letztes Gespraech denken.",
        "Erzaehl ruhig weiter, ich bin da.", "Das haette ich an deiner Stelle auch so gesehen.",
        "Und wie geht es dir jetzt damit?")
"""The sentences of a reply to the person at a real reply's length (`antwort_text`)."""
ANTWORT_ZEICHEN = sum(vocab.UMFANG_SPANNE["mittel"]) // 2
"""A real reply's length in characters: the middle of the `mittel` span's corridor (175–350), the
span a turn gets when nothing asks for another. With `--cache` the responder's replies are this
long, so a conversation's history grows as it does with a model, not by a short sentence a turn."""


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


def antwort_text(body: dict[str, Any], zeichen: int) -> str:
    """A reply to the person of about `zeichen` characters, whole sentences of `REDE` from a place
    the request decides (the same request, the same reply)."""
    start = int(hashlib.sha1(json.dumps(body.get("messages", []), sort_keys=True).encode()).hexdigest()[:8], 16)
    saetze: list[str] = []
    while sum(len(x) + 1 for x in saetze) < zeichen:
        saetze.append(REDE[(start + len(saetze)) % len(REDE)])
    return " ".join(saetze)


def answer(body: dict[str, Any], worte: str = "fest", zahlen: str = "null",
           antworten: dict[str, str] | None = None, antwort_zeichen: int = 0) -> str:
    """The stand-in's answer: the smallest a schema allows; the transcript's line; with
    `antwort_zeichen` the reply to the person at that length; else a short sentence."""
    text = "" if antworten is not None else wort(body) if worte == "neu" else "x"
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return json.dumps(instance(fmt["json_schema"]["schema"], text, hoch=zahlen == "hoch"))
    if antworten is not None and (zeile := transkript_antwort(body, antworten)) is not None:
        return zeile
    if antwort_zeichen and AKTUELL in str((body.get("messages") or [{}])[-1].get("content", "")):
        return antwort_text(body, antwort_zeichen)
    prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    if "ERGEBNIS:" in prompt:
        return "ERGEBNIS: OK"
    return SATZ if worte == "fest" else f"{SATZ[:-1]} und von {text}."


# ------------------------------------------------------------------------------- cost model
DEFAULT_REPLICA = "-"
CHARS_PER_TOKEN = 4
"""Tokens counted by characters where the packaged model's tokenizer is not at hand."""


@dataclass(frozen=True)
class Kosten:
    """A serving engine's cost: defaults for an 8B model in BF16 on one H100 80 GB (vLLM,
    prefix caching on); the sources are in bench/RESULTS.md ("Cache-aware routing")."""

    prefill_tps: float = 25_000.0
    """Prompt tokens one replica prefills per second (compute-bound: 2 FLOP per parameter and
    token against the H100's 989 dense BF16 TFLOPS at about 40 % utilisation)."""
    itl_ms: float = 4.6
    """Inter-token latency of a sequence decoding alone (NIM, Llama-3.1-8B, H100, concurrency 1)."""
    itl_slope_ms: float = 0.03
    """What each further sequence in the batch adds to it (4.6 ms alone, 7.6 ms at 100)."""
    decode_tps: float = 12_000.0
    """Completion tokens one replica decodes per second with a full batch (NIM at concurrency 100):
    a completion token's share of the GPU."""
    batch: int = 256
    """Sequences in one replica's batch at most (vLLM's `max_num_seqs`); beyond, calls queue."""
    cache_tokens: int = 400_000
    """Prefix cache per replica in tokens: 72 GB (90 % of 80) less 15 GB weights and some
    activations, at 128 KiB of KV per token (32 layers × 8 KV heads × 128 × 2 × 2 bytes)."""
    block: int = 16
    """Tokens per cache block (vLLM's block size): a prefix is cached whole blocks at a time."""

    def gpu_s(self, uncached: int, completion: int) -> float:
        """The GPU time a call costs: its prefill alone, its decode shared with a full batch."""
        return uncached / self.prefill_tps + completion / self.decode_tps


class PrefixCache:
    """One replica's prefix cache: full blocks of prompt tokens keyed by the hash of the whole
    prefix up to their end (a block is reused only behind the same prefix), least recently used
    out first; a prompt's head is touched last, so its tail goes before its head."""

    def __init__(self, capacity_tokens: int, block: int = 16):
        self.block = block
        self.capacity = max(1, capacity_tokens // block)
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def hashes(self, tokens: list) -> list[int]:
        out, h = [], 0
        for i in range(0, len(tokens) - len(tokens) % self.block, self.block):
            h = hash((h, tuple(tokens[i:i + self.block])))
            out.append(h)
        return out

    def serve(self, tokens: list) -> int:
        """The call's cached tokens (its longest cached prefix in whole blocks, never the whole
        prompt: the last token is always computed), then its blocks cached."""
        hashes = self.hashes(tokens)
        hit = 0
        while hit < len(hashes) and hashes[hit] in self.blocks:
            hit += 1
        cached = min(hit * self.block, max(0, (len(tokens) - 1) // self.block * self.block))
        for h in reversed(hashes):
            self.blocks[h] = None
            self.blocks.move_to_end(h)
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)
        return cached


class Replica:
    """A replica of the modelled engine: its cache, its batch places, its one prefill at a time."""

    def __init__(self, kosten: Kosten):
        self.cache = PrefixCache(kosten.cache_tokens, kosten.block)
        self.places = asyncio.Semaphore(kosten.batch)
        self.prefill = asyncio.Lock()
        self.decoding = 0


class Motor:
    """The modelled engine: one `Replica` per replica name; `sleep` passes the modelled time."""

    def __init__(self, kosten: Kosten, count=None, sleep=asyncio.sleep, clock=time.perf_counter):
        self.kosten = kosten
        self.count = count or zeichen_tokens
        self.sleep = sleep
        self.clock = clock
        self.replicas: dict[str, Replica] = {}

    def replica(self, name: str | None) -> Replica:
        name = name or DEFAULT_REPLICA
        if name not in self.replicas:
            self.replicas[name] = Replica(self.kosten)
        return self.replicas[name]

    async def serve(self, name: str | None, prompt: str, completion: str, first=None) -> dict[str, Any]:
        """One call on replica `name`: queue, prefill of the uncached prompt, `first()` (the first
        token), decode. Returns its tokens and times (ms)."""
        k, rep = self.kosten, self.replica(name)
        tokens, n_out = self.count(prompt), max(1, len(self.count(completion)))
        t0 = self.clock()
        async with rep.places:
            async with rep.prefill:
                t_pre = self.clock()
                cached = rep.cache.serve(tokens)
                await self.sleep((len(tokens) - cached) / k.prefill_tps)
            ttft = self.clock() - t0
            if first is not None:
                await first()
            rep.decoding += 1
            try:
                await self.sleep(n_out * (k.itl_ms + k.itl_slope_ms * (rep.decoding - 1)) / 1000)
            finally:
                rep.decoding -= 1
        return {"prompt_tokens": len(tokens), "cached_tokens": cached, "completion_tokens": n_out,
                "queue_ms": round((t_pre - t0) * 1000, 3), "ttft_ms": round(ttft * 1000, 3),
                "ms": round((self.clock() - t0) * 1000, 3),
                "gpu_s": round(k.gpu_s(len(tokens) - cached, n_out), 6)}


def zeichen_tokens(text: str) -> list[str]:
    """Tokens by characters (`CHARS_PER_TOKEN` a token): a prefix of the text is a prefix of these."""
    return [text[i:i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def model_tokens():
    """The packaged model's tokenizer (its GGUF vocabulary alone, loaded in under a second), or
    None where llama.cpp or the package is missing."""
    try:
        from llama_cpp import Llama

        from serve.llm_backends import smollm2_gguf

        vocab = Llama(model_path=str(smollm2_gguf()), vocab_only=True, verbose=False)
    except Exception as e:  # noqa: BLE001 - reported, then counted by characters
        print(f"stand-in: fallback zeichen_tokens: no tokenizer ({type(e).__name__}: {e}); "
              f"{CHARS_PER_TOKEN} characters a token", file=sys.stderr)
        return None
    return lambda text: vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True) if text else []


def prompt_of(body: dict[str, Any]) -> str:
    """The request's messages as the engine's template would lay them out, roughly."""
    return "".join(f"<|{m.get('role', '')}|>{m.get('content', '')}\n" for m in body.get("messages", []))


def caller_of(body: dict[str, Any], header: str | None = None) -> str:
    """The node that asks: the client's header, else the schema's name (`<node>_antwort`), the
    responder's task block, the Thinker's protocol line; `frei` for another free text."""
    if header:
        return header
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return str(fmt["json_schema"].get("name", "antwort")).removesuffix("_antwort")
    last = str((body.get("messages") or [{}])[-1].get("content", ""))
    if AKTUELL in last:
        return "responder"
    return "thinker" if "ERGEBNIS:" in prompt_of(body) else "frei"


class Buch:
    """What the stand-in served: every call, and per replica its calls and tokens."""

    def __init__(self):
        self.calls: list[dict[str, Any]] = []
        self.in_flight = 0

    def add(self, call: dict[str, Any]) -> None:
        self.calls.append(call)

    def stats(self, since: int = 0) -> dict[str, Any]:
        replicas: dict[str, dict[str, float]] = {}
        for c in self.calls:
            r = replicas.setdefault(c["replica"], {"calls": 0, "prompt_tokens": 0, "cached_tokens": 0,
                                                   "completion_tokens": 0, "gpu_s": 0.0})
            r["calls"] += 1
            for k in ("prompt_tokens", "cached_tokens", "completion_tokens", "gpu_s"):
                r[k] += c.get(k, 0)
        return {"count": len(self.calls), "in_flight": self.in_flight, "replicas": replicas,
                "calls": self.calls[since:]}


def app(latency_s: float, worte: str = "fest", zahlen: str = "null", transkript: str | None = None,
        kosten: Kosten | None = None, antwort_zeichen: int = 0):
    """The server: a fixed latency, or with `kosten` the modelled engine (`Motor`)."""
    from aiohttp import web

    antworten = json.loads(open(transkript, encoding="utf-8").read())["antworten"] if transkript else None
    motor = Motor(kosten, model_tokens()) if kosten is not None else None
    buch = Buch()

    async def completions(request):
        body = await request.json()
        text = answer(body, worte, zahlen, antworten, antwort_zeichen)
        cid, model = f"chatcmpl-{uuid.uuid4().hex[:24]}", body.get("model", "standin")
        call = {"replica": request.headers.get(REPLICA_HEADER) or DEFAULT_REPLICA, "t": time.time(),
                "caller": caller_of(body, request.headers.get(CALLER_HEADER)), "stream": bool(body.get("stream")),
                "pair": request.headers.get(PAIR_HEADER)}
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"}) if body.get("stream") else None

        async def first():
            if resp is not None:
                await resp.prepare(request)
                await resp.write(sse(cid, model, {"content": text}, None, None))

        buch.in_flight += 1
        try:
            out = (await motor.serve(call["replica"], prompt_of(body), text, first) if motor is not None
                   else await fest(latency_s, body, text, first))
        finally:
            buch.in_flight -= 1
        buch.add({**call, **out})
        usage = {"prompt_tokens": out["prompt_tokens"], "completion_tokens": out["completion_tokens"],
                 "total_tokens": out["prompt_tokens"] + out["completion_tokens"],
                 "prompt_tokens_details": {"cached_tokens": out["cached_tokens"]}}
        if resp is None:
            return web.json_response({"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                   "finish_reason": "stop"}], "usage": usage})
        await resp.write(sse(cid, model, {}, "stop", usage))
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "standin", "object": "model"}]})

    async def stats(request):
        return web.json_response(buch.stats(int(request.query.get("since", "0"))))

    a = web.Application(client_max_size=64 * 1024 * 1024)
    a.add_routes([web.post("/v1/chat/completions", completions), web.get("/v1/models", models),
                  web.get("/v1/standin/stats", stats)])
    return a


async def fest(latency_s: float, body: dict[str, Any], text: str, first) -> dict[str, Any]:
    """The fixed-latency answer: its tokens by characters (prompt) and words (completion)."""
    await asyncio.sleep(latency_s)
    await first()
    return {"prompt_tokens": sum(len(str(m.get("content", ""))) // 4 for m in body.get("messages", [])),
            "cached_tokens": 0, "completion_tokens": len(text.split()), "queue_ms": 0.0,
            "ttft_ms": latency_s * 1000, "ms": latency_s * 1000, "gpu_s": None}


def sse(cid: str, model: str, delta: dict[str, str], finish: str | None, usage: dict | None) -> bytes:
    """One server-sent chunk of a streamed completion."""
    c = {"id": cid, "object": "chat.completion.chunk", "model": model,
         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **({"usage": usage} if usage else {})}
    return f"data: {json.dumps(c)}\n\n".encode()


def stats(base_url: str, since: int = 0) -> dict[str, Any]:
    """The stand-in's record (`GET /v1/standin/stats`): calls from the `since`-th on, and per replica."""
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/standin/stats?since={since}", timeout=30) as r:
        return json.loads(r.read())


def kosten_args(kosten: Kosten) -> list[str]:
    """The command line that gives a stand-in these costs."""
    return ["--cache", *(a for f in fields(Kosten) for a in (f"--{f.name.replace('_', '-')}", str(getattr(kosten, f.name))))]


def start(port: int, latency_ms: float, worte: str = "fest", zahlen: str = "null",
          transkript: str | None = None, kosten: Kosten | None = None,
          antwort_zeichen: int | None = None) -> subprocess.Popen:
    """The stand-in in its own process (it must not share the measured process's CPU); returns
    when it answers. With `kosten` the modelled engine instead of the fixed latency."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.standin", "--port", str(port), "--latency-ms", str(latency_ms),
                             "--worte", worte, "--zahlen", zahlen, *(["--transkript", transkript] if transkript else []),
                             *(kosten_args(kosten) if kosten is not None else []),
                             *(["--antwort-zeichen", str(antwort_zeichen)] if antwort_zeichen is not None else [])],
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
    ap.add_argument("--cache", action="store_true",
                    help="model a serving engine's cost (prefix cache, prefill, decode, batch per replica) "
                         "instead of the fixed latency")
    ap.add_argument("--antwort-zeichen", type=int, default=None,
                    help="the responder's reply to the person this many characters long (0: a short sentence; "
                         f"default with --cache {ANTWORT_ZEICHEN}, the middle of the `mittel` corridor, else 0)")
    for f in fields(Kosten):
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default,
                        help=f"with --cache (default {f.default})")
    args = ap.parse_args()
    kosten = Kosten(**{f.name: getattr(args, f.name) for f in fields(Kosten)}) if args.cache else None
    zeichen = args.antwort_zeichen if args.antwort_zeichen is not None else ANTWORT_ZEICHEN if args.cache else 0
    web.run_app(app(args.latency_ms / 1000, args.worte, args.zahlen, args.transkript, kosten, zeichen),
                host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
