"""Indexing an uploaded file (seed 001 §3.1a): topic, summary and keywords are written once, when
the file arrives — the model reads the head of the text (one call through the LLM deployment, with
a deadline) — so that a turn that finds the file needs neither the file nor the model. The text is
cut into chunks, each embedded with the topic in front (the topic field goes into the embedded
text, as the seed's file consumers do), and stored with the file in one transaction.

The model's answer is an external source: each field is checked, and a field the answer does not
carry usably gets its named fallback, logged — `ueberschrift` or `dateiname` for the topic,
`anfang` for the summary, `haeufigkeit` for the keywords. The file records which source each
field came from (`erschliessung`). The same content is indexed once per pair: a second upload
finds the first and spends no model call."""
from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Awaitable, Callable

from pydantic import BaseModel, Field

from core.wire import ChatRequest, ChatResponse
from memory.clients import StoreOps
from pipeline.llm_json import engine_schema, first_json_object
from prompts import PromptLibrary
from serve.dateien import Dokument

log = logging.getLogger("novaberg.erschliessung")

CALLER = "erschliessung"
ABSCHNITT_ZEICHEN = 800
"""The longest chunk: MiniLM reads 256 word pieces, about 800 characters of German text."""
ERSCHLIESSUNG_ZEICHEN = 4000
"""The head of the text the model reads for topic, summary and keywords."""
THEMA_MAX = 80
ZUSAMMENFASSUNG_MAX = 300
STICHWORTE_MAX = 8
STICHWORT_MAX = 40
_WORT = re.compile(r"[^\W\d_][^\W_]*(?:-[^\W_]+)*")
_STOPPWOERTER = frozenset("""
aber alle allem allen aller alles also andere anderen auch auf aus bei beim bereits bin bis bist bitte
dabei dafuer daher damit dann darauf darin darum dass davon dazu dein deine dem den denen denn der deren des
dessen deshalb die dies diese diesem diesen dieser dieses doch dort durch eine einem einen einer eines einige
etwa etwas euch euer fuer gegen gewesen habe haben hatte hatten hier hinter ihnen ihre ihrem ihren ihrer immer
indem jede jedem jeden jeder jedes jetzt kann kein keine keinem keinen keiner koennen koennte machen man mehr
mein meine meinem meinen meiner mich mir mit muss musste nach nachdem neben nicht nichts noch nun nur oder ohne
schon sehr sein seine seinem seinen seiner seit selbst sich sie sind sodass solche soll sollte sondern sowie
ueber uebrigens und uns unser unsere unter viel viele vom von vor waehrend war waren warum was weil weiter
welche welchem welchen welcher wenn wer werde werden wie wieder will wir wird wirst wo wollen wurde wurden
zum zur zwar zwischen über für während können könnte müssen muss würde würden dass
about after also been before being between both could does doing down during each from further have having
here into just more most must only other over same should some such than that their them then there these
they this those through under until very what when where which while will with would your yours
""".split())


class ErschliessungAntwort(BaseModel):
    """What the model is asked for (the engine is held to this schema where it can)."""

    thema: str = Field(max_length=THEMA_MAX)
    zusammenfassung: str = Field(max_length=ZUSAMMENFASSUNG_MAX)
    stichworte: list[str] = Field(max_length=STICHWORTE_MAX)


class Erschliessung(BaseModel):
    thema: str
    zusammenfassung: str
    stichworte: list[str]
    herkunft: dict[str, str]
    """Where each field came from (`modell` or its named fallback) and the model's outcome."""


@dataclass
class Werkzeuge:
    """What indexing works with: the deployments' calls (the ingress binds its handles, a test
    binds in-process stand-ins) and the limits."""

    chat: Callable[[ChatRequest], Awaitable[ChatResponse]]
    model_name: Callable[[], Awaitable[str]]
    embed: Callable[[str], Awaitable[list[float]]]
    store: StoreOps
    """The store's typed clients (memory/clients.py)."""
    prompts: PromptLibrary
    deadline_s: float
    max_tokens: int
    embed_concurrency: int = 4
    """Chunks embedded at once."""


# ---------------------------------------------------------------- chunks
def _stuecke(absatz: str, ziel: int) -> list[str]:
    """A paragraph as pieces of at most `ziel` characters: its sentences, a too long one cut at a space."""
    out: list[str] = []
    for satz in re.split(r"(?<=[.!?])\s+", absatz):
        while len(satz) > ziel:
            cut = satz.rfind(" ", 0, ziel)
            cut = cut if cut > ziel // 2 else ziel
            out.append(satz[:cut].strip())
            satz = satz[cut:].strip()
        if satz:
            out.append(satz)
    return out


def abschnitte(text: str, ziel: int = ABSCHNITT_ZEICHEN) -> list[str]:
    """The text in chunks of at most `ziel` characters: whole paragraphs where they fit, a long
    paragraph by its sentences."""
    out: list[str] = []
    cur = ""
    for absatz in re.split(r"\n\s*\n", text):
        absatz = absatz.strip()
        if not absatz:
            continue
        for i, stueck in enumerate([absatz] if len(absatz) <= ziel else _stuecke(absatz, ziel)):
            sep = "\n\n" if i == 0 else " "
            if cur and len(cur) + len(sep) + len(stueck) > ziel:
                out.append(cur)
                cur = stueck
            else:
                cur = f"{cur}{sep}{stueck}" if cur else stueck
    if cur:
        out.append(cur)
    return out


# ---------------------------------------------------------------- fallbacks
def stichworte_haeufigkeit(text: str, n: int = STICHWORTE_MAX) -> list[str]:
    """The fallback keywords: the most frequent words of four letters or more that are not stop
    words, as first written; among equally frequent ones capitalised words (German nouns and
    names) first, then the longer (the more specific), then by first occurrence."""
    zaehler: Counter[str] = Counter()
    erste: dict[str, tuple[int, str]] = {}
    for i, m in enumerate(_WORT.finditer(text)):
        w = m.group(0)
        k = w.lower()
        if len(k) < 4 or k in _STOPPWOERTER or len(w) > STICHWORT_MAX:
            continue
        zaehler[k] += 1
        erste.setdefault(k, (i, w))
    ranked = sorted(zaehler, key=lambda k: (-zaehler[k], not erste[k][1][0].isupper(), -len(k), erste[k][0]))
    return [erste[k][1] for k in ranked[:n]]


def _anfang(text: str) -> str:
    flat = " ".join(re.sub(r"^[ \t]*#{1,6}[ \t]+", "", text, flags=re.MULTILINE).split())
    if len(flat) <= ZUSAMMENFASSUNG_MAX:
        return flat
    cut = flat.rfind(" ", 0, ZUSAMMENFASSUNG_MAX - 1)
    return flat[: cut if cut > 0 else ZUSAMMENFASSUNG_MAX - 1].rstrip(" ,;:") + "…"


def _thema_rueckfall(dok: Dokument) -> tuple[str, str]:
    if dok.titel_hinweis and 0 < len(dok.titel_hinweis) <= THEMA_MAX:
        return dok.titel_hinweis, "ueberschrift"
    stem = re.sub(r"[_\-.]+", " ", PurePosixPath(dok.name).stem).strip() or dok.name
    return stem[:THEMA_MAX], "dateiname"


# ---------------------------------------------------------------- the model's answer
def _brauchbar_text(v: Any, lo: int, hi: int) -> str | None:
    if not isinstance(v, str):
        return None
    v = " ".join(v.split())
    return v if lo <= len(v) <= hi and re.search(r"[^\W\d_]", v) else None


def _brauchbar_stichworte(v: Any) -> list[str]:
    out: list[str] = []
    for s in v if isinstance(v, list) else []:
        s = _brauchbar_text(s, 2, STICHWORT_MAX)
        if s and s.lower() not in {x.lower() for x in out}:
            out.append(s)
    return out[:STICHWORTE_MAX]


def auswerten(text: str | None, outcome: str, dok: Dokument) -> Erschliessung:
    """The model's answer, field by field; what it does not carry usably gets its named fallback."""
    obj = first_json_object(text) if text else None
    if text and obj is None:
        outcome = "kein_json"
    obj = obj or {}
    herkunft = {"antwort": outcome}
    thema = _brauchbar_text(obj.get("thema"), 3, THEMA_MAX)
    if thema:
        herkunft["thema"] = "modell"
    else:
        thema, herkunft["thema"] = _thema_rueckfall(dok)
    zusammenfassung = _brauchbar_text(obj.get("zusammenfassung"), 20, ZUSAMMENFASSUNG_MAX)
    if zusammenfassung and len(zusammenfassung.split()) >= 3:
        herkunft["zusammenfassung"] = "modell"
    else:
        zusammenfassung, herkunft["zusammenfassung"] = _anfang(dok.text), "anfang"
    stichworte = _brauchbar_stichworte(obj.get("stichworte"))
    if stichworte:
        herkunft["stichworte"] = "modell"
    else:
        stichworte, herkunft["stichworte"] = stichworte_haeufigkeit(dok.text), "haeufigkeit"
    rueckfaelle = {k: v for k, v in herkunft.items() if k != "antwort" and v != "modell"}
    if rueckfaelle:
        log.warning("erschliessung: %s: the model's answer (%s) left fields without a usable value; fallbacks %s",
                    dok.name, outcome, ", ".join(f"{k}={v}" for k, v in rueckfaelle.items()))
    return Erschliessung(thema=thema, zusammenfassung=zusammenfassung, stichworte=stichworte, herkunft=herkunft)


async def _fragen(w: Werkzeuge, dok: Dokument, pair: str) -> tuple[str | None, str]:
    """One call through the LLM deployment: (the answer's text or None, outcome)."""
    try:
        model = await w.model_name()
        parts = w.prompts.render_parts(CALLER, ("identity", "rules", "task"), model, {
            "name": dok.name, "inhalt": dok.text[:ERSCHLIESSUNG_ZEICHEN], "max_zeichen": ZUSAMMENFASSUNG_MAX,
            "max_stichworte": STICHWORTE_MAX})
        request = ChatRequest(messages=[{"role": "system", "content": "\n\n".join(parts[:-1])},
                                        {"role": "user", "content": parts[-1]}],
                              temperature=0.2, max_tokens=w.max_tokens, think=False, caller=CALLER, pair=pair,
                              response_schema=engine_schema(ErschliessungAntwort))

        async def call():
            return await w.chat(request)

        resp = await asyncio.wait_for(call(), w.deadline_s)
    except Exception as e:  # the engine is down, refused or too slow: the fallbacks index the file
        log.warning("erschliessung: %s: fallback aufruf_gescheitert: %s: %s", dok.name, type(e).__name__, e)
        return None, "aufruf_gescheitert"
    text = resp.content
    return (text.strip(), "ok") if text.strip() else (None, "leer")


async def erschliessen(w: Werkzeuge, dok: Dokument, pair: str) -> Erschliessung:
    text, outcome = await _fragen(w, dok, pair)
    return auswerten(text, outcome, dok)


# ---------------------------------------------------------------- indexing
async def indizieren(w: Werkzeuge, dok: Dokument, user_id: str, character_id: str) -> dict[str, Any]:
    """Index the file for the pair: {"datei": the stored file, "neu": whether it was indexed now}."""
    alt = await w.store.dateien.finden(user_id, character_id, dok.inhalt_hash)
    if alt is not None:
        log.info("erschliessung: %s for %s:%s has the content of file %d (%s): not indexed again", dok.name,
                 user_id, character_id, alt.id, alt.name)
        return {"datei": alt, "neu": False}
    e = await erschliessen(w, dok, f"{user_id}:{character_id}")
    teile = abschnitte(dok.text)
    gate = asyncio.Semaphore(w.embed_concurrency)  # the embedder is the turns' too

    async def embed(t: str) -> list[float]:
        async with gate:
            return await w.embed(f"{e.thema}: {t}")

    vektoren = await asyncio.gather(*[embed(t) for t in teile])
    datei = {"name": dok.name, "art": dok.art, "inhalt_hash": dok.inhalt_hash, "bytes": dok.bytes,
             "zeichen": len(dok.text), "thema": e.thema, "zusammenfassung": e.zusammenfassung,
             "stichworte": e.stichworte, "erschliessung": e.herkunft}
    gespeichert, neu = await w.store.dateien.speichern(user_id, character_id, datei,
                                     [{"inhalt": t, "embedding": v} for t, v in zip(teile, vektoren)])
    log.info("erschliessung: %s for %s:%s %s: %d chunks, topic and %d keywords (%s)", dok.name, user_id,
             character_id, "indexed" if neu else "arrived twice at once, kept once", len(teile), len(e.stichworte),
             e.herkunft)
    return {"datei": gespeichert, "neu": neu}
