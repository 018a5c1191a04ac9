"""The pixie: a detached background agent that works, between conversations, on the tasks the
salience node delegated (`delegationen:{user}:{character}`, written by actors/background.py),
researches each once through the guarded web layer, and writes the character's library
(`autonomous_wissen`, seed 001 §3.2a, NODES.md): a `wissen` entry with a topic vector — what the
enricher's library plugin reads — and a `bericht`, the process record of the task (what was
asked, what the research found, which fallbacks were taken, what was written), which the reading
path leaves out. The prompt names the pair's real character (memory/charaktere.py).

One round at a time across the whole cluster, serialised by the Redis lock `pixie:running`
(seed 000). A round takes one task per pair, the pairs in turn: it begins after the pair the
round before served last (`pixie:reihum`), so a pair with many tasks, or one whose key sorts
first, never keeps the others waiting for more than one turn round the pairs. Every side effect once:
- a task is taken with LMOVE into `delegationen_in_arbeit:{user}:{character}` and removed from
  there only after its work; a round that dies leaves it there, and the next round puts it back
  at the front of its queue (`wiederaufnahme`), counting the attempt;
- each library entry carries the idempotency key of its delegation and type, so a task done again
  writes nothing twice; the `bericht` is written last, and a task whose `bericht` exists is done.

Named fallbacks, each logged by name: `keine_suchmaschine`, `recherche_leer`,
`recherche_gescheitert`, `seite_nicht_lesbar` (research); `aufgabe_zurueck` (no usable answer,
the task goes back with one attempt more), `aufgegeben` (after `MAX_VERSUCHE`: a `bericht` says
so, no `wissen`), `charakter_entfernt`, `delegation_unlesbar` (the task is dropped);
`gewicht_decay_ausgefallen` (the decay could not run; the round does its tasks).

The library's weights decay (`gewicht_decay`, seed 001 §3.2a): each round, before its tasks,
`memory/bibliothek.py::zerfall`. The seed names the weight, its cap and its reader — it "runs
up to `LZG_KNOTEN_GEWICHT_CAP` (10.0)", and the read path divides by that cap onto the pool's
0–1 — but no rate, floor or moment. Decided, with the reasons:
- **rate**: the LZG nodes' forgetting curve, `gewicht × (1 − lzg_decay_per_day)^days` (0.01 a
  day): the weight lives on the LZG node's scale, and "the library is long-term memory in file
  form, heard with the same ear" (§3.2a). `WISSEN_GEWICHT` 5.0 reads 0.50 in the pool when
  written, ~0.37 after 30 days, ~0.013 after a year.
- **moment**: the pixie's round, between conversations, under its lock (one writer). The exponent
  counts the time since the entry's last decay (`zerfall_stand`), so the result does not depend
  on how often rounds run, nor on a round that failed; a row is written at most once a day.
- **floor**: none — the seed names none and the LZG curve has none. The weight only ranks an entry
  in the reducer (ties of identical text, order in its group); finding it is the similarity's work.
- **what**: every pair's active entries, `wissen` and `bericht` (a `bericht` is never read; its
  weight follows the same rule). Reading an entry does not restart its curve: the read path is
  the enricher's library plugin, and nothing there writes.
"""
from __future__ import annotations

import asyncio
import bisect
import logging
import threading
import uuid
from typing import Any

import ray
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from actors.delegation import DELEGATIONS, Delegation
from core.settings import Settings
from memory import erasure

log = logging.getLogger("novaberg.pixie")
NAME = "pixie"
LOCK = "pixie:running"
LOCK_TTL_S = 600
PIXIE_NAME = "pixie"
REIHUM = "pixie:reihum"
"""The queue a round served last: the next round begins with the pair after it. It names a
pair, so it lasts `REIHUM_S` after the last round that took a task (then rounds begin at the
first key again)."""
REIHUM_S = 24 * 3600
IN_ARBEIT = "delegationen_in_arbeit"
"""Tasks a round has taken and not yet finished, one list per pair."""
MAX_VERSUCHE = 3
"""Attempts per task (a returned task, a round that died) before the pixie gives it up."""
RECHERCHE_TREFFER = 3
PIXIE_ERINNERUNGEN = 5  # memories the pixie reads for a task, through the memory read path
SEITE_ZEICHEN = 1500
WISSEN_GEWICHT = 5.0
BERICHT_GEWICHT = 1.0


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    titel: str
    wissen: str


class Recherche(BaseModel):
    """What one task's research found: `recherchiert` or a named fallback."""

    status: str
    anbieter: str | None = None
    treffer: list[dict] = Field(default_factory=list)
    seite: dict | None = None
    """The first hit's page text, when it could be read: {url, text, extraktor}."""
    fallbacks: list[str] = Field(default_factory=list)

    def fuer_prompt(self) -> str:
        if not self.treffer:
            return f"(keine Recherche: {self.status})"
        lines = [f"- {h.get('titel', '')}: {h.get('snippet', '')} ({h.get('url', '')})" for h in self.treffer]
        if self.seite:
            lines.append(f"\nAuszug aus {self.seite['url']}:\n{self.seite['text']}")
        return "\n".join(lines)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _queue_of(work_key: str) -> str:
    return DELEGATIONS + work_key[len(IN_ARBEIT):]


def _work_of(queue_key: str) -> str:
    return IN_ARBEIT + queue_key[len(DELEGATIONS):]


def _pair_of(queue_key: str) -> tuple[str, str]:
    user_id, character_id = queue_key[len(DELEGATIONS) + 1:].split(":", 1)
    return user_id, character_id


def reihum(keys: list[str], zuletzt: str | None) -> list[str]:
    """The pairs' queues in key order, beginning after `zuletzt` (the one served last) and
    wrapping round: every pair comes first in its turn, whatever its key."""
    keys = sorted(keys)
    i = bisect.bisect_right(keys, zuletzt) if zuletzt else 0
    return keys[i:] + keys[:i]


def _one_more_attempt(raw) -> str:
    try:
        task = Delegation.model_validate_json(raw)
    except ValidationError:
        return _text(raw)  # dropped by name when it is taken
    return task.model_copy(update={"versuche": task.versuche + 1}).model_dump_json()


async def recherchieren(web, aufgabe: str) -> Recherche:
    """One search for the task (the search provider's budget is shared with the turns'), and the
    first hit's page through the guarded fetch. Fetched text is data for the task prompt."""
    if web is None or not web.configured:
        log.warning("pixie: fallback keine_suchmaschine: no web provider configured; the task stays unresearched")
        return Recherche(status="keine_suchmaschine", fallbacks=["keine_suchmaschine"])
    try:
        found = await web.search(aufgabe)
    except Exception as e:
        log.warning("pixie: fallback recherche_gescheitert: %s", type(e).__name__)
        return Recherche(status="recherche_gescheitert", fallbacks=["recherche_gescheitert"])
    treffer = found.get("treffer", [])[:RECHERCHE_TREFFER]
    if not treffer:
        log.warning("pixie: fallback recherche_leer: the search found nothing")
        return Recherche(status="recherche_leer", anbieter=found.get("anbieter"), fallbacks=["recherche_leer"])
    out = Recherche(status="recherchiert", anbieter=found.get("anbieter"), treffer=treffer)
    seite = await web.fetch(treffer[0]["url"]) if treffer[0].get("url") else {"ok": False, "fehler": "ohne URL"}
    if seite.get("ok") and seite.get("text", "").strip():
        out.seite = {"url": seite["url"], "text": seite["text"][:SEITE_ZEICHEN], "extraktor": seite.get("extraktor")}
    else:
        log.warning("pixie: fallback seite_nicht_lesbar: %s (%s); the snippets stand alone",
                    treffer[0].get("url"), seite.get("fehler"))
        out.fallbacks.append("seite_nicht_lesbar")
    return out


def bericht_text(task: Delegation, recherche: Recherche | None, ergebnis: str) -> str:
    """The process record of one task (seed 001 §3.2a: reports document the process)."""
    lines = [f"Aufgabe: {task.aufgabe}", f"Herkunft: Turn {task.turn_id or '-'}, Versuch {task.versuche + 1}"]
    if recherche is None:
        lines.append("Recherche: nicht erneut versucht")
    else:
        lines.append(f"Recherche: {recherche.status}" + (f" ueber {recherche.anbieter}" if recherche.anbieter else "")
                     + f", {len(recherche.treffer)} Treffer")
        lines += [f"Quelle: {h.get('titel', '')} <{h.get('url', '')}>" for h in recherche.treffer]
        if recherche.seite:
            lines.append(f"Gelesen: {recherche.seite['url']} ({recherche.seite.get('extraktor')})")
        if recherche.fallbacks:
            lines.append("Rueckfaelle: " + ", ".join(recherche.fallbacks))
    lines.append(f"Ergebnis: {ergebnis}")
    return "\n".join(lines)[:2000]


async def _bericht(services, trace, user_id: str, character_id: str, task: Delegation, recherche, ergebnis: str,
                   vec) -> None:
    await services.store.bibliothek.add(user_id, character_id, "bericht", f"Bericht: {task.aufgabe}"[:200],
                              bericht_text(task, recherche, ergebnis), vec, BERICHT_GEWICHT,
                              schluessel=f"{task.schluessel()}:bericht")


async def _zurueckgenommen(r, user_id: str, character_id: str, task: Delegation, wann: str) -> bool:
    """The turn that delegated the task was taken back (memory/ruecknahme.py): the task writes
    nothing to the library (fallback `zurueckgenommen`)."""
    from memory.ruecknahme import gilt_als_zurueckgenommen

    if await gilt_als_zurueckgenommen(r, user_id, character_id, task.turn_id) is None:
        return False
    log.warning("pixie: fallback zurueckgenommen: task %s of %s:%s %s: its turn %s was taken back; nothing is "
                "written", task.schluessel(), user_id, character_id, wann, task.turn_id)
    return True


async def _arbeiten(services, trace, user_id: str, character_id: str, name: str, task: Delegation) -> str:
    """Research, ask, write: `geschrieben`, `zurueck` or `aufgegeben`."""
    from pipeline.llm_json import ask_json
    from pipeline.services import Deps

    vec = await services.embedder.embed(trace, task.aufgabe)
    memories = (await services.store.lesepfad.erinnern(user_id, character_id, task.aufgabe, vec,
                                          services.memory_cfg, k=PIXIE_ERINNERUNGEN)).erinnerungen
    recherche = await recherchieren(services.web, task.aufgabe)
    trace.decision(NAME, "pixie.recherche", recherche.status,
                   {"treffer": len(recherche.treffer), "seite": recherche.seite is not None})
    answer, outcome = await ask_json(Deps(services, trace), NAME, _Antwort, {
        "character_name": name, "aufgabe": task.aufgabe, "recherche": recherche.fuer_prompt(),
        "erinnerungen": "\n".join(f"- {m.inhalt}" for m in memories) or "(nichts)"})
    if answer is None or not answer.wissen.strip() or not answer.titel.strip():
        if task.versuche + 1 < MAX_VERSUCHE:
            log.warning("pixie: fallback aufgabe_zurueck: no usable answer (%s) for %s; attempt %d of %d, "
                        "task returned", outcome, task.schluessel(), task.versuche + 1, MAX_VERSUCHE)
            return "zurueck"
        log.warning("pixie: fallback aufgegeben: no usable answer (%s) for %s after %d attempts", outcome,
                    task.schluessel(), MAX_VERSUCHE)
        if await _zurueckgenommen(services.redis, user_id, character_id, task, "when it gave up"):
            return "zurueckgenommen"
        await _bericht(services, trace, user_id, character_id, task, recherche,
                       f"aufgegeben: keine verwertbare Antwort des Modells ({outcome}) nach {MAX_VERSUCHE} Versuchen",
                       vec)
        return "aufgegeben"
    titel = answer.titel.strip()[:200]
    topic = await services.embedder.embed(trace, titel)
    if await _zurueckgenommen(services.redis, user_id, character_id, task, "after its research"):
        return "zurueckgenommen"  # taken back while it ran: nothing is written (checked right before)
    await services.store.bibliothek.add(user_id, character_id, "wissen", titel, answer.wissen.strip()[:2000],
                              topic, WISSEN_GEWICHT, schluessel=f"{task.schluessel()}:wissen")
    # the bericht last: a task whose bericht exists is done
    await _bericht(services, trace, user_id, character_id, task, recherche, f"Wissen »{titel}« geschrieben", vec)
    log.info("pixie: wrote %s (wissen and bericht, %s) to the library of %s:%s", services.settings.said(titel),
             task.schluessel(), user_id, character_id)
    return "geschrieben"


async def _bearbeiten(services, queue_key: str, raw) -> str:
    """One taken task, from the pair's work list to its end; returns its outcome."""
    from pipeline.trace import TurnTrace

    r, work = services.redis, _work_of(queue_key)
    user_id, character_id = _pair_of(queue_key)
    try:
        task = Delegation.model_validate_json(raw)
    except ValidationError as e:
        log.warning("pixie: fallback delegation_unlesbar: an entry of %d bytes dropped (%s)", len(raw),
                    [err.get("type") for err in e.errors()[:1]])
        await r.lrem(work, 1, raw)
        return "verworfen"
    trace = TurnTrace(user_id, character_id, f"pixie-{uuid.uuid4().hex[:8]}")
    try:
        outcome = await _ausgang(services, trace, user_id, character_id, task)
    except Exception as e:
        if not erasure.ist_geloescht(e):
            raise
        outcome = "geloescht"  # the user was erased while it ran: the task goes, nothing more is written
    trace.decision(NAME, "pixie.aufgabe", outcome, {"aufgabe": task.aufgabe[:120], "versuche": task.versuche})
    async with r.pipeline(transaction=True) as p:
        if outcome == "zurueck":
            p.rpush(queue_key, task.model_copy(update={"versuche": task.versuche + 1}).model_dump_json())
        p.lrem(work, 1, raw)
        await p.execute()
    return outcome


async def _ausgang(services, trace, user_id: str, character_id: str, task: Delegation) -> str:
    """What becomes of a taken task: done now, or dropped, done already or given up. A task of an
    erased user (`geloescht:{user}`) is dropped; a write of one erased meanwhile is refused by the
    store (`NutzerGeloescht`)."""
    r = services.redis
    if await erasure.markiert(r, user_id):
        erasure.abgewiesen(user_id, f"the library entries of task {task.schluessel()}")  # logged: the task goes
        return "geloescht"
    charakter = await services.store.charaktere.get(character_id)
    if charakter is None:
        log.warning("pixie: fallback charakter_entfernt: character %r no longer exists; task %s dropped",
                    character_id, task.schluessel())
        outcome = "verworfen"
    elif await _zurueckgenommen(r, user_id, character_id, task, "before it starts"):
        outcome = "zurueckgenommen"
    elif await services.store.bibliothek.vorhanden(user_id, character_id, f"{task.schluessel()}:bericht"):
        log.info("pixie: task %s of %s:%s is done already (its bericht exists); not done twice",
                 task.schluessel(), user_id, character_id)
        outcome = "bereits_erledigt"
    elif task.versuche >= MAX_VERSUCHE:
        log.warning("pixie: fallback aufgegeben: task %s failed %d times", task.schluessel(), task.versuche)
        await _bericht(services, trace, user_id, character_id, task, None,
                       f"aufgegeben nach {task.versuche} abgebrochenen Versuchen", None)
        outcome = "aufgegeben"
    else:
        outcome = await _arbeiten(services, trace, user_id, character_id, charakter.name, task)
    return outcome


async def wiederaufnehmen(r) -> int:
    """Put the tasks a round took and never finished back at the front of their queues, one
    attempt more. Runs under the lock: no other round holds a task now."""
    n = 0
    for work in sorted([_text(k) async for k in r.scan_iter(f"{IN_ARBEIT}:*")]):
        raws = await r.lrange(work, 0, -1)
        if not raws:
            continue
        async with r.pipeline(transaction=True) as p:
            p.lpush(_queue_of(work), *[_one_more_attempt(x) for x in reversed(raws)])
            p.delete(work)
            await p.execute()
        log.warning("pixie: fallback wiederaufnahme: %d task(s) of %s were taken by a round that did not finish; "
                    "back at the front of the queue", len(raws), _queue_of(work))
        n += len(raws)
    return n


async def gewicht_decay(services) -> dict[str, Any]:
    """Decay the library's weights (see the module's head); a store that fails is the named
    fallback `gewicht_decay_ausgefallen`, and the next round decays by the whole time since."""
    try:
        out = await services.store.bibliothek.zerfall(services.memory_cfg)
    except Exception as e:
        log.warning("pixie: fallback gewicht_decay_ausgefallen: %s; the library's weights decay by the whole "
                    "time at the next round", type(e).__name__)
        return {"status": "gewicht_decay_ausgefallen"}
    log.info("pixie: gewicht_decay: %d library weight(s) decayed at %.3f a day (smallest now %s)",
             out.verfallen, services.memory_cfg.lzg_decay_per_day, out.kleinstes)
    return {"status": "verfallen", **out.model_dump()}


async def pixie_round(services, max_tasks: int = 3) -> dict[str, Any]:
    """One round: under the lock, take back what a dead round left, decay the library's weights,
    then take up to `max_tasks` delegated tasks (one per pair per round, the pairs in turn after
    the one served last: `reihum`) and do them. An error inside a task ends the round (logged by
    the actor); its task stays taken and is done again by the next round."""
    r = services.redis
    token = uuid.uuid4().hex
    if not await r.set(LOCK, token, nx=True, ex=LOCK_TTL_S):
        log.info("pixie: another round holds %s; this one does not start", LOCK)
        return {"status": "gesperrt", "geschrieben": 0}
    out: dict[str, Any] = {"status": "gelaufen", "geschrieben": 0, "ausgaenge": []}
    try:
        out["wiederaufgenommen"] = await wiederaufnehmen(r)
        out["gewicht_decay"] = await gewicht_decay(services)
        keys = reihum([_text(k) async for k in r.scan_iter(f"{DELEGATIONS}:*")], _text(await r.get(REIHUM)))
        for key in keys:
            if len(out["ausgaenge"]) >= max_tasks:
                break
            raw = await r.lmove(key, _work_of(key), "LEFT", "RIGHT")
            if raw is None:
                continue
            await r.set(REIHUM, key, ex=REIHUM_S)
            outcome = await _bearbeiten(services, key, raw)
            out["ausgaenge"].append(outcome)
            out["geschrieben"] += int(outcome == "geschrieben")
            if _text(await r.get(LOCK)) == token:
                await r.expire(LOCK, LOCK_TTL_S)  # the round is alive: keep its lock
    finally:
        if _text(await r.get(LOCK)) == token:
            await r.delete(LOCK)
    return out


class Pixie:
    """The detached actor: runs a round every `interval_s` on its own thread and loop."""

    def __init__(self, settings: Settings, interval_s: float):
        self.settings = settings
        self.interval_s = interval_s
        self.rounds: list[dict] = []
        threading.Thread(target=lambda: asyncio.run(self._loop()), name="pixie", daemon=True).start()

    async def _loop(self) -> None:
        from pipeline.services import Services

        services = Services.connect(self.settings)
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.rounds.append(await pixie_round(services))
            except Exception:
                log.exception("pixie: round failed; its task stays taken and is done again next round (in %.0fs)",
                              self.interval_s)

    def stats(self) -> dict:
        return {"rounds": len(self.rounds), "last": self.rounds[-1] if self.rounds else None}


PixieRemote = ray.remote(num_cpus=0, max_restarts=-1)(Pixie)


def start_pixie(settings: Settings):
    return PixieRemote.options(name=PIXIE_NAME, namespace=settings.namespace, get_if_exists=True,
                               lifetime="detached").remote(settings, settings.pixie_interval_s)


def stop_pixie(settings: Settings) -> None:
    try:
        ray.kill(ray.get_actor(PIXIE_NAME, namespace=settings.namespace), no_restart=True)
    except ValueError:
        pass
