"""Taking turns back (regenerate, edit, rewind): everything the turns wrote, in every store, goes,
and what they changed comes back as it was (docs/TURN_WRITES.md lists each write).

The pair actor runs a retraction under its turn order, in three steps, each safe to run again
(a retraction cut short by a kill is finished by the pair's next actor, `actors/pair.py`):
1. `zaun` — the turns are marked retracted (Redis `zurueckgenommen:{user}:{character}`, which
   the outbox worker and the pair actor read before they work for a turn), their background jobs
   still queued leave the outbox, and one a worker already holds is waited for;
2. `zuruecknehmen` (Postgres, in the store deployment, one transaction) — before-images put back
   (`memory/vorher.py`), the rows carrying the turns' ids deleted, the turns recorded as retracted
   (`zurueckgenommene_turns`), a regenerated reply kept as a swipe (`antwort_varianten`);
3. `zuruecknehmen_redis` — the session entries, results, markers, short-term memory entries,
   planned impulses, delegations, pushed messages and node errors of the turns; the keys they
   overwrote put back (`memory/redis_vorher.py`).
Postgres is imported only inside the store's functions: a pair actor loads no database driver.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Sequence

from core.bestand import Swipe, ZurueckgenommeneZeilen
from memory import kzg, outbox, redis_vorher, schluessel_index, session

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from redis.asyncio import Redis

log = logging.getLogger("novaberg.ruecknahme")

ZURUECKGENOMMEN_S = redis_vorher.FRIST_S


def zurueckgenommen_key(user_id: str, character_id: str) -> str:
    return f"zurueckgenommen:{user_id}:{character_id}"


# ---------------------------------------------------------------------------------------- Postgres
_LOESCHEN: tuple[tuple[str, str], ...] = (
    ("turns", "DELETE FROM turns WHERE user_id=%s AND character_id=%s AND turn_id = ANY(%s)"),
    ("pipeline_log", "DELETE FROM pipeline_log WHERE user_id=%s AND character_id=%s AND turn_id = ANY(%s)"),
    ("timeline", "DELETE FROM timeline WHERE user_id=%s AND character_id=%s AND turn_id = ANY(%s)"),
    ("notizen", "DELETE FROM notizen WHERE user_id=%s AND turn_id = ANY(%s)"),
    ("direktiven", "DELETE FROM direktiven WHERE user_id=%s AND character_id=%s AND turn_id = ANY(%s)"),
    ("charakter_anweisungen:wieder_aktiv",
     "UPDATE charakter_anweisungen SET aktiv=true, aufgehoben_turn_id=NULL, aufgehoben_schritt=NULL"
     " WHERE user_id=%s AND character_id=%s AND aufgehoben_turn_id = ANY(%s)"),
    ("charakter_anweisungen",
     "DELETE FROM charakter_anweisungen WHERE user_id=%s AND character_id=%s AND turn_id = ANY(%s)"),
    ("ziele", "DELETE FROM ziele WHERE user_id=%s AND character_id=%s AND quelle_turn = ANY(%s)"),
    ("autonomous_wissen", "DELETE FROM autonomous_wissen WHERE user_id=%s AND character_id=%s"
                          " AND schluessel LIKE 'delegation:%%' AND split_part(schluessel, ':', 2) = ANY(%s)"),
    ("pair_profiles:schritte",
     "UPDATE pair_profiles SET profil_schritte = ARRAY(SELECT x FROM unnest(profil_schritte) x"
     " WHERE split_part(x, ':', 2) <> ALL(%s)) WHERE user_id=%s AND character_id=%s"
     " AND EXISTS (SELECT 1 FROM unnest(profil_schritte) x WHERE split_part(x, ':', 2) = ANY(%s))"),
)
"""What a turn wrote with its id, by table (docs/TURN_WRITES.md): deleted, or a lift undone. The
long-term nodes go by `lzg.knoten_loeschen` (their postings and synapses with them, their
neighbours' surroundings brought up to date)."""


def _args(name: str, user_id: str, character_id: str, ids: list[str]) -> tuple:
    if name == "pair_profiles:schritte":
        return ids, user_id, character_id, ids
    if name == "notizen":  # a note is the user's, whichever character's turn wrote it
        return user_id, ids
    return user_id, character_id, ids


async def zuruecknehmen(pool: AsyncConnectionPool, user_id: str, character_id: str, turn_ids: list[str], *,
                        varianten_an: str | None = None, verworfen: dict[str, str] | None = None,
                        varianten_max: tuple[int, int] | None = None) -> ZurueckgenommeneZeilen:
    """Take the turns back in Postgres, in one transaction: what they changed is put back (newest
    first), what they wrote with their id deleted, and they are recorded as retracted (a turn job
    still on its way writes nothing for them). `varianten_an`: the turn that replaces them (a
    regenerate or an edit) — their swipes move to it, and the replies `verworfen` (turn_id →
    reply) join them; without it their swipes go too. `varianten_max` (per turn, per pair): the
    swipes kept, the newest; the older ones go (`antwort_varianten:gekuerzt`). Running it again
    changes nothing more. Returns the rows changed per table."""
    from memory import lzg, vorher  # the store deployment's import: Postgres' types

    ids = list(turn_ids)
    out: dict[str, int] = {}
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("INSERT INTO zurueckgenommene_turns (user_id, character_id, turn_id)"
                           " SELECT %s, %s, unnest(%s::text[]) ON CONFLICT DO NOTHING", (user_id, character_id, ids))
        out["turn_vorher"] = await vorher.zuruecksetzen(conn, user_id, character_id, ids)
        for name, sql in _LOESCHEN:
            out[name] = (await conn.execute(sql, _args(name, user_id, character_id, ids))).rowcount
        out["lzg_knoten"] = await lzg.knoten_loeschen(conn, user_id, character_id, quellen=ids)
        out["antwort_varianten"] = await _varianten(conn, user_id, character_id, ids, varianten_an, verworfen or {})
        if varianten_an is not None and varianten_max is not None:
            out["antwort_varianten:gekuerzt"] = await _varianten_kuerzen(conn, user_id, character_id, varianten_an,
                                                                         *varianten_max)
    return ZurueckgenommeneZeilen(tabellen=out)


async def _varianten_kuerzen(conn, user_id: str, character_id: str, turn_id: str, je_turn: int, je_paar: int) -> int:
    """Keep the newest `je_turn` swipes of the turn and the newest `je_paar` of the pair; the
    older ones go (the bound on what one pair's regenerates keep)."""
    n = (await conn.execute("DELETE FROM antwort_varianten WHERE nr IN (SELECT nr FROM antwort_varianten"
                            " WHERE user_id=%s AND character_id=%s AND turn_id=%s ORDER BY nr DESC OFFSET %s)",
                            (user_id, character_id, turn_id, je_turn))).rowcount
    n += (await conn.execute("DELETE FROM antwort_varianten WHERE nr IN (SELECT nr FROM antwort_varianten"
                             " WHERE user_id=%s AND character_id=%s ORDER BY nr DESC OFFSET %s)",
                             (user_id, character_id, je_paar))).rowcount
    if n:
        log.info("ruecknahme: %d older swipes of %s:%s dropped (kept: %d per turn, %d per pair)", n, user_id,
                 character_id, je_turn, je_paar)
    return n


async def _varianten(conn, user_id: str, character_id: str, ids: list[str], an: str | None,
                     verworfen: dict[str, str]) -> int:
    if an is None:
        cur = await conn.execute("DELETE FROM antwort_varianten WHERE user_id=%s AND character_id=%s"
                                 " AND turn_id = ANY(%s)", (user_id, character_id, ids))
        return cur.rowcount
    n = (await conn.execute("UPDATE antwort_varianten SET turn_id=%s WHERE user_id=%s AND character_id=%s"
                            " AND turn_id = ANY(%s)", (an, user_id, character_id, ids))).rowcount
    for turn_id, reply in verworfen.items():
        if reply:
            cur = await conn.execute(
                "INSERT INTO antwort_varianten (user_id, character_id, turn_id, verworfen_turn_id, reply)"
                " VALUES (%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING", (user_id, character_id, an, turn_id, reply))
            n += cur.rowcount
    return n


async def varianten(pool: AsyncConnectionPool, user_id: str, character_id: str, turn_id: str) -> list[Swipe]:
    """The replies a turn replaced (its swipes), oldest first: {turn_id, reply, created_at}."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT verworfen_turn_id, reply, created_at FROM antwort_varianten WHERE user_id=%s"
                                 " AND character_id=%s AND turn_id=%s ORDER BY nr", (user_id, character_id, turn_id))
        return [Swipe(turn_id=r[0], reply=r[1], created_at=r[2].isoformat()) for r in await cur.fetchall()]


# ---------------------------------------------------------------------------------------- Redis
def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


async def gilt_als_zurueckgenommen(r: Redis, user_id: str, character_id: str, *turn_ids: str | None) -> str | None:
    """The first of the turn ids that was taken back (None: none was)."""
    ids = [t for t in turn_ids if t]
    if not ids:
        return None
    hits = await r.smismember(zurueckgenommen_key(user_id, character_id), ids)
    return next((t for t, hit in zip(ids, hits) if hit), None)


def job_turn(raw: Any) -> str | None:
    """The turn an outbox job works for (a turn's record, or a background job)."""
    try:
        job = json.loads(_s(raw))
    except (TypeError, ValueError):
        return None
    return job_ziel(job)[2] if isinstance(job, dict) else None


def job_ziel(job: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(user, character, turn) of a parsed outbox job."""
    stimulus = (job.get("state") or {}).get("stimulus") or {}
    t = job.get("turn") or stimulus
    return t.get("user_id"), t.get("character_id"), job.get("turn_id") or t.get("turn_id")


async def job_zurueckgenommen(r: Redis, job: dict[str, Any]) -> bool:
    """Whether a job works for a turn that was taken back (then it does nothing, and says so)."""
    user_id, character_id, turn_id = job_ziel(job)
    if not (user_id and character_id and turn_id):
        return False
    if await gilt_als_zurueckgenommen(r, user_id, character_id, turn_id) is None:
        return False
    log.warning("outbox: fallback zurueckgenommen: the %s job of turn %s of %s:%s does nothing, the turn was "
                "taken back", job.get("kind"), turn_id, user_id, character_id)
    return True


SPIELRAUM_S = 300
"""How long before a turn's first write (`memory/schluessel_index.py`) its jobs, pushed messages and
node errors are looked for: a node error carries its pair actor's clock, not Redis'."""


async def _ab(r: Redis, user_id: str, character_id: str, ids: set[str]) -> float | None:
    """Where the turns' entries in the streams and the node errors begin (epoch seconds); None: a
    turn is not in the key index (written before it existed), and they are read from the beginning."""
    start = await schluessel_index.beginn(r, user_id, character_id, sorted(ids))
    if start is None:
        log.warning("ruecknahme: fallback ohne_index: a turn of %s:%s is not in the key index; the outbox, the "
                    "pushed messages and the node errors are read from their beginning", user_id, character_id)
        return None
    return start - SPIELRAUM_S


async def _eintraege(r: Redis, stream: str, ab: float | None, seite: int = 500):
    """The stream's entries from `ab` on (None: all), oldest first, a page at a time."""
    start = "-" if ab is None else f"{max(int(ab * 1000), 0)}-0"
    while True:
        page = await r.xrange(stream, min=start, max="+", count=seite)
        for entry in page:
            yield entry
        if len(page) < seite:
            return
        ms, _, seq = _s(page[-1][0]).partition("-")
        start = f"{ms}-{int(seq) + 1}"


async def _jobs(r: Redis, stream: str, user_id: str, character_id: str, ids: set[str], ab: float | None) -> list[str]:
    found = []
    async for entry_id, fields in _eintraege(r, stream, ab):
        raw = fields.get(b"job") or fields.get("job") or b"{}"
        if outbox.job_owner(raw) == (user_id, character_id) and job_turn(raw) in ids:
            found.append(_s(entry_id))
    return found


async def zaun(r: Redis, user_id: str, character_id: str, turn_ids: Sequence[str], *, warten_s: float = 60.0) -> int:
    """Step 1: mark the turns retracted, take their queued jobs (and dead letters) out of the
    outbox, and wait (up to `warten_s`) for a job a worker holds already. Returns the jobs taken out."""
    ids = set(turn_ids)
    key = zurueckgenommen_key(user_id, character_id)
    await r.sadd(key, *ids)
    await r.expire(key, ZURUECKGENOMMEN_S)
    n, ab = 0, await _ab(r, user_id, character_id, ids)
    for stream in (outbox.OUTBOX_STREAM, outbox.DEAD_STREAM):
        found = await _jobs(r, stream, user_id, character_id, ids, ab)
        if not found:
            continue
        if stream == outbox.OUTBOX_STREAM:
            await _warten(r, found, warten_s)
            await r.xack(stream, outbox.GROUP, *found)
            await outbox.vergessen(r, *found)
        n += await r.xdel(stream, *found)
    return n


async def _warten(r: Redis, entry_ids: list[str], warten_s: float) -> None:
    """Wait until no worker holds one of the entries (it began before the mark and writes on)."""
    deadline = time.monotonic() + warten_s
    while True:
        held = [e for e in entry_ids if await r.xpending_range(outbox.OUTBOX_STREAM, outbox.GROUP, min=e, max=e, count=1)]
        if not held:
            return
        if time.monotonic() > deadline:
            log.warning("fallback ruecknahme.job_laeuft: %d background jobs of retracted turns still held by a worker "
                        "after %.0fs; taken out all the same", len(held), warten_s)
            return
        await asyncio.sleep(0.1)


_SESSION = """
local keep = {}
local gone = 0
for _, e in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local ok, t = pcall(cjson.decode, e)
  local id = ok and t['turn_id'] or nil
  local hit = false
  for i = 1, #ARGV do if id == ARGV[i] then hit = true end end
  if hit then gone = gone + 1 else keep[#keep + 1] = e end
end
if gone > 0 then
  redis.call('DEL', KEYS[1])
  for i = 1, #keep, 500 do redis.call('RPUSH', KEYS[1], unpack(keep, i, math.min(#keep, i + 499))) end
end
return gone
"""

async def _liste(r: Redis, key: str, ids: set[str], *felder: str) -> int:
    n = 0
    for raw in await r.lrange(key, 0, -1):
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        if any(e.get(f) in ids for f in felder):
            n += await r.lrem(key, 1, raw)
    return n


async def _impulse(r: Redis, user_id: str, character_id: str, ids: set[str]) -> int:
    n = 0
    for key in ("impulse:faellig", "impulse:faellig:genommen"):
        for m in await r.zrange(key, 0, -1):
            try:
                i = json.loads(m)
            except ValueError:
                continue
            if (i.get("user_id"), i.get("character_id")) == (user_id, character_id) and i.get("aus_turn") in ids:
                n += await r.zrem(key, m)
                await r.srem(f"impulse:offen:{user_id}:{character_id}", str(i.get("id")))
    return n


async def _gepusht(r: Redis, user_id: str, character_id: str, ids: set[str], ab: float | None) -> int:
    key = session.push_key(user_id, character_id)
    weg = []
    async for entry_id, fields in _eintraege(r, key, ab):
        try:
            m = json.loads(fields.get(b"nachricht") or fields.get("nachricht") or b"{}")
        except ValueError:
            continue
        if m.get("turn_id") in ids or m.get("ursprung_turn_id") in ids:
            weg.append(entry_id)
    return await r.xdel(key, *weg) if weg else 0


async def _fehler(r: Redis, user_id: str, character_id: str, ids: set[str], ab: float | None) -> int:
    weg = [m for m in await r.zrangebyscore("errors:nodes", "-inf" if ab is None else ab, "+inf")
           if (p := _s(m).split(":"))[2:4] == [user_id, character_id] and ":".join(p[4:]) in ids]
    return await r.zrem("errors:nodes", *weg) if weg else 0


async def zuruecknehmen_redis(r: Redis, user_id: str, character_id: str, turn_ids: list[str]) -> dict[str, int]:
    """Step 3: the turns' Redis data (`turn_ids` oldest first). Running it again changes nothing more."""
    ids, u, c = set(turn_ids), user_id, character_id
    out = {"vorher": await redis_vorher.zuruecksetzen(r, u, c, list(turn_ids))}
    keys = [k for t in ids for k in (session.result_key(u, c, t), session.mensch_key(u, c, t), f"bg:done:{u}:{c}:{t}",
                                     f"bg:done:{u}:{c}:{t}:mensch", f"aufgriff:geplant:{u}:{c}:{t}")]
    keys += [f"bg:delegation:{u}:{c}:{t}:{n}" for t in ids for n in range(schluessel_index.DELEGATIONEN_JE_TURN)]
    out["schluessel"] = await r.delete(*keys)
    out["session"] = int(await r.eval(_SESSION, 1, session.session_key(u, c), *ids))
    out["kzg"] = await kzg.entfernen(r, u, c, [f"turn-{t}" for t in ids])
    out["kzg_abloesung"] = await kzg.abloesung_zuruecknehmen(r, u, c, sorted(ids))
    out["impulse"] = await _impulse(r, u, c, ids)
    out["delegationen"] = await _liste(r, f"delegationen:{u}:{c}", ids, "turn_id") \
        + await _liste(r, f"delegationen_in_arbeit:{u}:{c}", ids, "turn_id")
    ab = await _ab(r, u, c, ids)
    out["push"] = await _gepusht(r, u, c, ids, ab)
    out["errors:nodes"] = await _fehler(r, u, c, ids, ab)
    await r.zrem(schluessel_index.turns_key(u, c), *ids)  # last: a step cut short finds its turns again
    return out
