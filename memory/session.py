"""Redis session of a pair and the idempotency record of its turns.

Keys: `session:{user}:{character}:turns` (list of turn records, oldest first),
`turnres:{user}:{character}:{turn_id}` (the stored result of a finished turn) and
`push:{user}:{character}` (a stream of the messages Nova produced without being asked: what the
events route delivers). A turn is committed by one Lua script, so the two session entries, the
stored result, the pushed message and the outbox jobs appear together or not at all: a repeated
`turn_id` can never append or push twice.
"""
from __future__ import annotations

import hashlib
import logging
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from core.bestand import StoredTurn
from core.wire import HumanCommit, PairSuperseded, TurnCommit, TurnResult, job_json, session_entry, zustand_json
from memory import redis_vorher, schluessel_index
from memory.outbox import OUTBOX_STREAM

log = logging.getLogger("novaberg.session")


def session_key(user_id: str, character_id: str) -> str:
    return f"session:{user_id}:{character_id}:turns"


def summary_key(user_id: str, character_id: str) -> str:
    return f"session:{user_id}:{character_id}:summary"


def result_key(user_id: str, character_id: str, turn_id: str) -> str:
    return f"turnres:{user_id}:{character_id}:{turn_id}"


def mensch_key(user_id: str, character_id: str, turn_id: str) -> str:
    """The marker of a human's turn committed on its own (Nova's chain failed; it holds the time):
    the commit of the turn's repeat finds it and adds only Nova's reply."""
    return f"turn:mensch:{user_id}:{character_id}:{turn_id}"


def push_key(user_id: str, character_id: str) -> str:
    return f"push:{user_id}:{character_id}"


def zustand_key(user_id: str, character_id: str) -> str:
    return f"nova:zustand:{user_id}:{character_id}"


PERSON_B = "Person B"
"""The speaker label of the human's entries in the history (the prompts name the human Person B)."""


GEDANKE = " (eigener Gedanke)"


def sprecher(name: str, eigener_gedanke: bool) -> str:
    """The speaker label of a turn's utterance in the history: Person B's message, or her own
    thought, marked by its speaker (seed 001 §3.1)."""
    return f"{name}{GEDANKE}" if eigener_gedanke else PERSON_B


def figur_im_verlauf(turns) -> str | None:
    """The character's name as her replies in the history carry it (None without a reply)."""
    return next((t.sprecher for t in reversed(turns) if t.rolle == "assistant" and not t.sprecher.endswith(GEDANKE)),
                None)


FENSTER_BLOCK = 8
"""Entries a history window's start moves by at once (four turns of both speakers). A window that
moved by one entry a turn would change the start of every prompt that shows it, and the engine
could reuse nothing after it (llama.cpp's and vLLM's prefix cache); cut in blocks, the prompt grows
at its end for four turns. The session list is trimmed in blocks as well, so a position in the
list and a position in the conversation agree on the block."""


def fenster_start(gesamt: int, n: int, block: int = FENSTER_BLOCK, hoechstens: bool = False) -> int:
    """Where a window of the newest `n` of `gesamt` entries starts: at a block's start. A short
    window (the judging nodes' few turns) shows at least `n`: between `n` and `n + block - 1`
    entries. A window with `hoechstens` shows at most `n`: between `n - block + 1` and `n` — the
    session window of the responder, whose SESSION_MAX_TURNS is a ceiling (seed 004 §4.1: trimming
    the history is the strongest remedy against echo); it needs `n >= block`."""
    start = max(0, gesamt - n)
    return start + (-start) % block if hoechstens else start - start % block


def fenster(turns: list, n: int, block: int = FENSTER_BLOCK) -> list:
    """The newest `n` entries of a window read with `load_window` (or the whole session), and up
    to `block - 1` before them: the start moves only from block to block."""
    return turns[fenster_start(len(turns), n, block):]


_ZAUN = """
if ARGV[{Z}] ~= '' and redis.call('HGET', KEYS[{K}], ARGV[{Z}]) ~= ARGV[{Z} + 1] then return -1 end
"""
"""The fence (actors/registry.py): when the committing process names its registry entry, the
commit happens only while the entry is still its own (-1: another process serves the pair)."""

_COMMIT = redis_vorher.LUA_FESTHALTEN + _ZAUN.replace("{Z}", "9").replace("{K}", "8") + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
turn_merken(KEYS[9], KEYS[10], ARGV[11], ARGV[13], tonumber(ARGV[12]))
redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
if ARGV[3] == '' or redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[4])
else
  redis.call('RPUSH', KEYS[2], ARGV[3], ARGV[4])
end
local weg = redis.call('LLEN', KEYS[2]) - tonumber(ARGV[5])
if weg >= {BLOCK} then redis.call('LTRIM', KEYS[2], weg - weg % {BLOCK}, -1) end
if ARGV[6] ~= '' then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', tonumber(ARGV[7]), '*', 'nachricht', ARGV[6])
end
if ARGV[8] ~= '' then
  vorher_festhalten(KEYS[5], KEYS[7], {FRIST})
  redis.call('SET', KEYS[5], ARGV[8])
end
for i = 14, #ARGV do
  redis.call('XADD', KEYS[3], '*', 'job', ARGV[i])
end
return 1
""".replace("{BLOCK}", str(FENSTER_BLOCK)).replace("{FRIST}", str(redis_vorher.FRIST_S))
"""Commit a turn once: its result, the history (trimmed to `keep_turns` in blocks: between
`keep_turns` and `keep_turns + FENSTER_BLOCK - 1` entries stay), the push stream, Nova's state
after the turn, the jobs. The human's entry is left out when his turn was committed on its own
before (`mensch_key`: an earlier attempt of this turn failed in Nova's chain). The pair and the turn
enter the key index (memory/schluessel_index.py) in the same script."""

_MENSCH = schluessel_index.LUA_MERKEN + _ZAUN.replace("{Z}", "5").replace("{K}", "5") + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'EX', tonumber(ARGV[2])) then return 2 end
turn_merken(KEYS[6], KEYS[7], ARGV[7], ARGV[9], tonumber(ARGV[8]))
redis.call('RPUSH', KEYS[3], ARGV[3])
local weg = redis.call('LLEN', KEYS[3]) - tonumber(ARGV[4])
if weg >= {BLOCK} then redis.call('LTRIM', KEYS[3], weg - weg % {BLOCK}, -1) end
for i = 10, #ARGV do
  redis.call('XADD', KEYS[4], '*', 'job', ARGV[i])
end
return 1
""".replace("{BLOCK}", str(FENSTER_BLOCK))
"""Commit the human's turn on its own, once: his session entry and its jobs, unless the whole
turn is committed already or his part was before."""

_FENSTER = """
local n = redis.call('LLEN', KEYS[1])
local s = math.max(0, n - tonumber(ARGV[1]))
if ARGV[2] == '1' then s = s + (-s) % {BLOCK} else s = s - s % {BLOCK} end
return redis.call('LRANGE', KEYS[1], s, -1)
""".replace("{BLOCK}", str(FENSTER_BLOCK))


async def load_window(r: Redis, user_id: str, character_id: str, n: int,
                      hoechstens: bool = False) -> list[dict[str, Any]]:
    """The window of the newest `n` entries that `fenster_start` cuts, in one atomic read."""
    raw = await r.eval(_FENSTER, 1, session_key(user_id, character_id), n, "1" if hoechstens else "0")
    return [json.loads(x) for x in raw]


async def load_turns(r: Redis, user_id: str, character_id: str, last: int) -> list[dict[str, Any]]:
    raw = await r.lrange(session_key(user_id, character_id), -last, -1)
    return [json.loads(x) for x in raw]


async def count_turns(r: Redis, user_id: str, character_id: str) -> int:
    return await r.llen(session_key(user_id, character_id))


@dataclass(frozen=True)
class SessionZusammenfassung:
    """The session summary (seed 001 §3.1: `session:{user}:{character}:summary`) and its cursor,
    one hash, written together: `marke` is the SHA-1 of the last session entry folded in (as
    stored), `bis_turn_id` that entry's turn, `gefaltet` how many entries the text has taken in."""

    text: str = ""
    marke: str = ""
    bis_turn_id: str = ""
    gefaltet: int = 0


@dataclass(frozen=True)
class Ausstehend:
    """Session entries that left the window and are not in the summary yet, oldest first.
    `stand`: `anfang` (no cursor yet), `gefunden` (they follow the cursor's entry) or `luecke`
    (the cursor's entry was trimmed off the list: what lay between is gone unsummarised)."""

    stand: str
    eintraege: list[tuple[str, dict[str, Any]]]
    """(marke, entry) pairs, at most the limit asked for."""
    rueckstand: int
    """All such entries, of which `eintraege` are the oldest."""


_AUSSTEHEND = """
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local outside = math.max(0, #items - tonumber(ARGV[1]))
outside = outside + (-outside) % {BLOCK}
local from, stand = 1, 'anfang'
if ARGV[2] ~= '' then
  stand = 'luecke'
  for i = #items, 1, -1 do
    if redis.sha1hex(items[i]) == ARGV[2] then from = i + 1; stand = 'gefunden'; break end
  end
end
local out = {stand, math.max(0, outside - from + 1)}
for i = from, math.min(outside, from + tonumber(ARGV[3]) - 1) do out[#out + 1] = items[i] end
return out
""".replace("{BLOCK}", str(FENSTER_BLOCK))

_FALTEN = redis_vorher.LUA_FESTHALTEN + """
local cur = redis.call('HGET', KEYS[1], 'marke') or ''
if cur ~= ARGV[1] then return 0 end
vorher_festhalten(KEYS[1], KEYS[2], {FRIST})
redis.call('HSET', KEYS[1], 'text', ARGV[2], 'marke', ARGV[3], 'bis_turn_id', ARGV[4])
redis.call('HINCRBY', KEYS[1], 'gefaltet', tonumber(ARGV[5]))
return 1
""".replace("{FRIST}", str(redis_vorher.FRIST_S))


def eintrag_marke(raw: bytes | str) -> str:
    """The mark of a stored session entry: the SHA-1 of its stored form (Redis' `sha1hex`)."""
    return hashlib.sha1(raw.encode() if isinstance(raw, str) else raw).hexdigest()


async def load_summary(r: Redis, user_id: str, character_id: str) -> SessionZusammenfassung:
    raw = await r.hgetall(summary_key(user_id, character_id))
    f = {k.decode(): v.decode() for k, v in raw.items()}
    return SessionZusammenfassung(text=f.get("text", ""), marke=f.get("marke", ""),
                                  bis_turn_id=f.get("bis_turn_id", ""), gefaltet=int(f.get("gefaltet", 0)))


async def set_summary(r: Redis, user_id: str, character_id: str, summary: str) -> None:
    """Replace the summary's text (its cursor stays)."""
    await r.hset(summary_key(user_id, character_id), "text", summary)


async def get_summary(r: Redis, user_id: str, character_id: str) -> str | None:
    raw = await r.hget(summary_key(user_id, character_id), "text")
    return None if raw is None else raw.decode()


def ohne_saetze(text: str, weg) -> tuple[str, int]:
    """The text without its sentences for which `weg(sentence)` holds, and how many went."""
    zeilen, n = [], 0
    for zeile in text.split("\n"):
        alle = [x for x in re.split(r"(?<=[.!?])\s+", zeile) if x.strip()]
        bleiben = [x for x in alle if not weg(x)]
        n += len(alle) - len(bleiben)
        if bleiben:
            zeilen.append(" ".join(bleiben))
    return "\n".join(zeilen), n


VERGESSEN_PLATZHALTER = "…"
"""What a session entry holds when every sentence of it was forgotten (the entry stays, marked
`vergessen`, so the conversation keeps its turns)."""


async def verlauf_vergessen(r: Redis, user_id: str, character_id: str, weg, versuche: int = 5) -> int:
    """Drop from the session's entries the sentences for which `weg(sentence)` holds: the history
    the nodes read, and what a summary fold folds, no longer holds a forgotten item's words. An
    entry with nothing left holds `VERGESSEN_PLATZHALTER`; a changed entry is marked `vergessen`.
    Returns the sentences dropped (0 after `versuche` writes that met a commit)."""
    from redis.exceptions import WatchError

    key = session_key(user_id, character_id)
    for _ in range(versuche):
        async with r.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(key)
                neu, n = [], 0
                for i, raw in enumerate(await pipe.lrange(key, 0, -1)):
                    e = json.loads(raw)
                    text, k = ohne_saetze(e.get("inhalt") or "", weg)
                    if k:
                        n += k
                        neu.append((i, json.dumps({**e, "inhalt": text or VERGESSEN_PLATZHALTER, "vergessen": True})))
                if neu:
                    pipe.multi()
                    for i, v in neu:
                        pipe.lset(key, i, v)
                    await pipe.execute()
                    log.info("vergessen.verlauf: %d sentences of %s:%s's session history repeated a forgotten item",
                             n, user_id, character_id)
                return n
            except WatchError:
                continue
    log.warning("vergessen.verlauf_unveraendert: %s:%s's session history changed under every one of %d tries; "
                "it keeps the forgotten item's words", user_id, character_id, versuche)
    return 0


async def zusammenfassung_vergessen(r: Redis, user_id: str, character_id: str, weg, versuche: int = 5) -> int:
    """Drop the summary's sentences for which `weg(sentence)` holds (its cursor stays), and the same
    from the summary's before-images, so no rewind brings them back. A summary all of whose sentences
    go is left empty (fallback `vergessen.zusammenfassung_verworfen`). Returns the sentences dropped."""
    from redis.exceptions import WatchError

    key, n, neu = summary_key(user_id, character_id), 0, ""
    for _ in range(versuche):
        async with r.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(key)
                alt = ((await pipe.hget(key, "text")) or b"").decode()
                neu, n = ohne_saetze(alt, weg)
                if n:
                    pipe.multi()
                    pipe.hset(key, "text", neu)
                    await pipe.execute()
                break
            except WatchError:
                n = 0
                continue
    if n and not neu:
        log.warning("vergessen.zusammenfassung_verworfen: every sentence of %s:%s's session summary repeated a "
                    "forgotten item; the summary is empty until the next fold", user_id, character_id)
    elif n:
        log.info("vergessen.zusammenfassung_gekuerzt: %d sentences of %s:%s's session summary repeated a "
                 "forgotten item", n, user_id, character_id)
    await _bilder_ohne(r, user_id, character_id, key, weg)
    return n


async def _bilder_ohne(r: Redis, user_id: str, character_id: str, key: str, weg) -> None:
    """The summary's before-images (`vorher:{user}:{character}:{turn}`) without those sentences."""
    async for bild_key in r.scan_iter(match=f"{redis_vorher.vorher_key(user_id, character_id, '*')}", count=500):
        raw = await r.hget(bild_key, key)
        if raw is None:
            continue
        bild = json.loads(raw)
        wert = bild.get("wert")
        if bild.get("typ") != "hash" or not isinstance(wert, list):
            continue
        felder = dict(zip(wert[::2], wert[1::2]))
        neu, weg_n = ohne_saetze(str(felder.get("text", "")), weg)
        if weg_n:
            felder["text"] = neu
            bild["wert"] = [x for kv in felder.items() for x in kv]
            await r.hset(bild_key, key, json.dumps(bild))


async def ausstehend(r: Redis, user_id: str, character_id: str, *, window: int, marke: str,
                     limit: int) -> Ausstehend:
    """The entries before the session window (`fenster_start` with `hoechstens`: at most the newest
    `window`, from a block's start — the enricher's read) that follow the entry marked `marke` (all of
    them for an empty mark), read in one atomic step; an entry folded in already never returns,
    even when a wider window takes it back in."""
    out = await r.eval(_AUSSTEHEND, 1, session_key(user_id, character_id), window, marke, limit)
    items = out[2:]
    return Ausstehend(stand=out[0].decode(), rueckstand=int(out[1]),
                      eintraege=[(eintrag_marke(x), json.loads(x)) for x in items])


async def fold_summary(r: Redis, user_id: str, character_id: str, *, nach_marke: str, text: str, marke: str,
                       bis_turn_id: str, neu: int, turn_id: str | None = None) -> bool:
    """Store the new summary with its cursor, only if the cursor still stands at `nach_marke`
    (the state it was computed from). False: another run folded these entries first."""
    done = await r.eval(_FALTEN, 2, summary_key(user_id, character_id), redis_vorher.vorher_key(user_id, character_id, turn_id),
                        nach_marke, text, marke, bis_turn_id, neu)
    return bool(done)


async def annotate_turn(r: Redis, user_id: str, character_id: str, turn_id: str, felder: dict[str, Any], *,
                        rolle: str = "user", search_last: int = 200) -> bool:
    """Add fields to a stored session turn (salience's `kern` and `intentionen`, seed 001 §3.1: the
    turns keep every field); setting the same values again changes nothing. False: not found.
    Optimistic: a commit that moves the list meanwhile makes it read again."""
    from redis.exceptions import WatchError

    key = session_key(user_id, character_id)
    for _ in range(5):
        async with r.pipeline(transaction=True) as p:
            try:
                await p.watch(key)
                raw = await p.lrange(key, -search_last, -1)
                hit = next((i for i in range(len(raw) - 1, -1, -1)
                            if (t := json.loads(raw[i]))["turn_id"] == turn_id and t["rolle"] == rolle), None)
                if hit is None:
                    return False
                p.multi()
                p.lset(key, hit - len(raw), json.dumps({**json.loads(raw[hit]), **felder}))
                await p.execute()
                return True
            except WatchError:
                continue
    return False


async def stored_result(r: Redis, user_id: str, character_id: str, turn_id: str) -> TurnResult | None:
    return result_from(await r.get(result_key(user_id, character_id, turn_id)))


def result_from(raw: bytes | str | None) -> TurnResult | None:
    """A stored turn result as read from `result_key` (None: the turn_id has not run); its keys as
    it was stored with (`TurnResult.body`)."""
    return None if raw is None else TurnResult.model_validate_json(raw)


Zaun = tuple[str, str, str]
"""A commit's fence: (the registry's hash, the pair's field, the committing process's entry)."""


def _zaun_args(zaun: Zaun | None, fallback_key: str) -> tuple[str, str, str]:
    return zaun if zaun is not None else (fallback_key, "", "")


def _gezaeunt(done: int, user_id: str, character_id: str, turn_id: str) -> None:
    if int(done) == -1:
        raise PairSuperseded(f"turn {turn_id} of {user_id}:{character_id} not committed: another process serves "
                             "the pair now")


async def commit_turn(r: Redis, commit: TurnCommit) -> bool:
    """Store result, both session turns, the pushed message, Nova's state and the outbox jobs
    atomically (`TurnCommit`). False: already committed. PairSuperseded: `commit.zaun` names an
    entry that no longer serves the pair."""
    c = commit
    user_id, character_id, turn_id = c.user_id, c.character_id, c.turn_id
    fence_key, fence_field, fence_value = _zaun_args(c.zaun, result_key(user_id, character_id, turn_id))
    done = await r.eval(
        _COMMIT, 10,
        result_key(user_id, character_id, turn_id), session_key(user_id, character_id), OUTBOX_STREAM,
        push_key(user_id, character_id), zustand_key(user_id, character_id), mensch_key(user_id, character_id, turn_id),
        redis_vorher.vorher_key(user_id, character_id, turn_id), fence_key,
        schluessel_index.paare_key(user_id), schluessel_index.turns_key(user_id, character_id),
        json.dumps(c.result.body()), c.ttl_s, json.dumps(session_entry(c.mensch)) if c.mensch is not None else "",
        json.dumps(session_entry(c.nova)), c.keep_turns, c.push.model_dump_json() if c.push is not None else "", c.push_keep,
        json.dumps(zustand_json(c.zustand)) if c.zustand is not None else "", fence_field, fence_value, character_id,
        schluessel_index.horizont(c.ttl_s), turn_id, *[job_json(j) for j in c.jobs],
    )
    _gezaeunt(done, user_id, character_id, turn_id)
    return bool(done)


async def commit_human(r: Redis, commit: HumanCommit) -> int:
    """Keep the human's message when Nova's chain failed: his session entry and its jobs (the turn's
    record, salience of his words) atomically, once per turn (`HumanCommit`). 1: kept now; 2: his
    part was kept before; 0: the whole turn is committed. A later commit of the whole turn adds
    Nova's reply alone. The fence as for `commit_turn`."""
    c = commit
    user_id, character_id, turn_id = c.user_id, c.character_id, c.turn_id
    fence_key, fence_field, fence_value = _zaun_args(c.zaun, result_key(user_id, character_id, turn_id))
    done = int(await r.eval(
        _MENSCH, 7, result_key(user_id, character_id, turn_id), mensch_key(user_id, character_id, turn_id),
        session_key(user_id, character_id), OUTBOX_STREAM, fence_key,
        schluessel_index.paare_key(user_id), schluessel_index.turns_key(user_id, character_id),
        str(time.time()), c.ttl_s, json.dumps(session_entry(c.mensch)), c.keep_turns, fence_field, fence_value,
        character_id, schluessel_index.horizont(c.ttl_s), turn_id, *[job_json(j) for j in c.jobs],
    ))
    _gezaeunt(done, user_id, character_id, turn_id)
    return done


async def load_zustand(r: Redis, user_id: str, character_id: str) -> dict | None:
    """Nova's emotion state as the pair's last committed turn left it (None: none committed here)."""
    raw = await r.get(zustand_key(user_id, character_id))
    return None if raw is None else json.loads(raw)


PUSH_WAIT_MS = 3000
"""One blocking read of the push stream: below the Redis client's socket timeout (5 s)."""

CURSOR = re.compile(r"^(0|[0-9]{1,15}-[0-9]{1,10})$")
"""A position in a pair's push stream: `0` (from the oldest kept message) or a message id."""


async def push_cursor_now(r: Redis, user_id: str, character_id: str) -> str:
    """The id of the newest pushed message (`0` when there is none): a cursor for 'only new ones'."""
    last = await r.xrevrange(push_key(user_id, character_id), count=1)
    return last[0][0].decode() if last else "0"


async def read_pushed(r: Redis, user_id: str, character_id: str, after: str, *, block_ms: int = 0,
                      count: int = 50) -> list[tuple[str, dict]]:
    """Messages pushed after the cursor `after`, oldest first; waits up to `block_ms` for one."""
    if not CURSOR.match(after):
        raise ValueError(f"invalid cursor {after!r}: expected 0 or a message id like 1733011200000-0")
    got = await r.xread({push_key(user_id, character_id): after}, count=count, block=block_ms or None)
    out = []
    for _stream, entries in got or []:
        for mid, fields in entries:
            out.append((mid.decode(), json.loads(fields[b"nachricht"])))
    return out


_GREET = """
if redis.call('LLEN', KEYS[1]) > 0 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
return 1
"""


async def begruessen(r: Redis, user_id: str, character_id: str, turn: dict) -> bool:
    """The character's greeting as the first message of a pair's session, once: only a session
    without any turn takes it (atomic, so two clients asking at once store it once)."""
    return bool(await r.eval(_GREET, 2, session_key(user_id, character_id), schluessel_index.paare_key(user_id),
                             json.dumps(turn), character_id))


_RESTORE = """
if redis.call('LLEN', KEYS[1]) > 0 then return 0 end
for i = 2, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[1]), -1)
return 1
"""


def eintraege_aus_records(records: list[StoredTurn]) -> list[dict]:
    """Session entries from stored turn records (oldest first), as the dispatcher wrote them: the
    human's message (or Nova's own thought, by its speaker; none for a Thinker retry), then her
    reply, each with `quelle: postgres`. The name his client sent and an operator's date come back
    as the dispatcher wrote them (`name`, `datiert`, the date as both entries' time). What
    perception added to an entry (emotion, intentions) is not in the record."""
    out = []
    for rec in records:
        res = rec.result
        ergebnis = res if isinstance(res, TurnResult) else None  # a kept message's record names no character
        name = (ergebnis.character_name if ergebnis else None) or "Nova"
        herkunft = res.herkunft if res is not None else "user"
        zeitpunkt, person = (res.zeitpunkt, res.name) if res is not None else (None, None)
        base = {"turn_id": rec.turn_id, "herkunft": herkunft, "time": zeitpunkt or rec.created_at, "quelle": "postgres"}
        if not (ergebnis and ergebnis.ursprung_turn_id) and rec.user_text:
            label = sprecher(name, herkunft == "eigener_impuls")
            rolle = "assistant" if herkunft == "eigener_impuls" else "user"
            nachricht = {"name": person} if person else {}
            if zeitpunkt:
                nachricht["datiert"] = True
            out.append({**base, "rolle": rolle, "sprecher": label, "inhalt": rec.user_text, **nachricht})
        if rec.reply:  # a turn whose reply failed keeps the human's message alone
            out.append({**base, "rolle": "assistant", "sprecher": name, "inhalt": rec.reply})
    return out


async def verlauf_wiederherstellen(r: Redis, lade, user_id: str, character_id: str, keep: int) -> int:
    """When Redis lost the pair's session history (empty list) but Postgres holds its turns, write
    the last `keep` turns back (only into an empty list: a turn committed meanwhile wins). `lade`:
    an async callable (limit) -> turn records. Returns the entries restored."""
    if await count_turns(r, user_id, character_id) > 0:
        return 0
    eintraege = eintraege_aus_records(await lade(keep))
    if not eintraege:
        return 0
    done = await r.eval(_RESTORE, 1, session_key(user_id, character_id), keep, *[json.dumps(e) for e in eintraege])
    return len(eintraege) if done else 0
