"""The pending order of a pair: an order an agent could not run because something was missing,
kept until the human's answer completes it (seed 004 §3.3: a real question comes only through
the [AUFGABE] block's Rückfrage, and its answer must find its order — "Pseudo-Rückfrage → User
antwortet → kein Pending-Agent → Router behandelt als frischen Prompt → Datenverlust"; seed 000
§3.5: while it waits, the event consumer's lock `pending_agent` holds the self-trigger back).

Key: `auftrag:ausstehend:{user}:{character}`, a hash of two fields: `turn_id` (the turn that
wrote it last) and `stand` (the JSON of `Stand`). It lives in Redis, so a new pair actor (after
an idle exit or a crash) finds it. A turn writes it once, under its own turn_id: a turn that runs
again under the same turn_id reads what was pending before its first run (`Stand.vorher`,
`vor_dem_turn`), so it neither counts a turn twice nor runs a completed order again (the result
of the completed order is kept: `Stand.ergebnis`), and a write of a turn that another turn has
overtaken meanwhile is refused (`schreiben` returns False).

`VERFALL_NACH_TURNS`: the seeds give no number (seed 004 §3.3 expects the answer in the human's
next message; seed 000 §3.5 names only the lock). Two human turns: the next message is the
answer or not, and one message in between (a side remark, "Moment, ich schau nach") is allowed;
a second one that does not concern the order means the human has moved on, and the order expires
(the planner logs the fallback `ausstehend_abgelaufen`). Self-triggers and Nova's own impulses
are no human turns and count nothing.
"""
from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from redis.asyncio import Redis

from core.state import AusstehenderAuftrag
from memory import redis_vorher

log = logging.getLogger("novaberg.memory.ausstehender_auftrag")

VERFALL_NACH_TURNS = 2
"""Human turns after the question that did not concern the order, at which it expires."""
AUFBEWAHRUNG_S = 30 * 24 * 3600
"""How long Redis keeps the key after its last write (its outcome, for a turn run again)."""

Ausgang = Literal["neu", "unberuehrt", "erledigt", "ersetzt", "abgelaufen", "kein"]
"""What a turn did with the pending order: a new question asked (`neu`), left pending with its
counter advanced (`unberuehrt`), completed (`erledigt`), dropped for a new request (`ersetzt`),
dropped after `VERFALL_NACH_TURNS` (`abgelaufen`), nothing pending (`kein`)."""


class Stand(BaseModel):
    """The stored document: the pending order as the last turn left it, and what it found."""

    model_config = ConfigDict(extra="forbid")
    turn_id: str
    """The turn that wrote this."""
    ausgang: Ausgang
    auftrag: AusstehenderAuftrag | None = None
    """What is pending now (None: nothing)."""
    vorher: AusstehenderAuftrag | None = None
    """What was pending when that turn began: a turn run again starts from it."""
    ergebnis: dict[str, Any] | None = None
    """The agent's result for the pending order that turn completed (a turn run again shows it
    instead of running the order again)."""


def schluessel(user_id: str, character_id: str) -> str:
    return f"auftrag:ausstehend:{user_id}:{character_id}"


async def laden(r: Redis, user_id: str, character_id: str) -> Stand | None:
    """The stored state (None: no turn wrote one, or Redis expired it). A document that does not
    parse raises `ValidationError`: the caller names its fallback."""
    raw = await r.hget(schluessel(user_id, character_id), "stand")
    return None if raw is None else Stand.model_validate_json(raw)


async def geschrieben_von(r: Redis, user_id: str, character_id: str) -> str:
    """The turn that wrote the stored state last ("" none), read without parsing the state."""
    raw = await r.hget(schluessel(user_id, character_id), "turn_id")
    return "" if raw is None else raw.decode()


def vor_dem_turn(stand: Stand | None, turn_id: str) -> AusstehenderAuftrag | None:
    """What was pending when the turn `turn_id` began: for a turn that wrote the state already
    (it runs again under its turn_id), what was pending before its first run."""
    if stand is None:
        return None
    return stand.vorher if stand.turn_id == turn_id else stand.auftrag


async def offen(r: Redis, user_id: str, character_id: str) -> bool:
    """Whether an order of the pair waits for the human's answer (the self-trigger lock
    `pending_agent`, seed 000 §3.5). A document that does not parse counts as waiting: the lock
    holds rather than a self-trigger answering in the human's place."""
    try:
        stand = await laden(r, user_id, character_id)
    except ValidationError:
        log.warning("pending order of %s:%s: fallback ausstehend_unlesbar: the stored state does not parse; "
                    "counted as pending", user_id, character_id)
        return True
    return stand is not None and stand.auftrag is not None


_SCHREIBEN = redis_vorher.LUA_FESTHALTEN + """
local cur = redis.call('HGET', KEYS[1], 'turn_id') or ''
if cur ~= ARGV[1] and cur ~= ARGV[2] then return 0 end
vorher_festhalten(KEYS[1], KEYS[2], {FRIST})
redis.call('HSET', KEYS[1], 'turn_id', ARGV[2], 'stand', ARGV[3])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
return 1
""".replace("{FRIST}", str(redis_vorher.FRIST_S))
"""Write only over the state the turn read at its start (`gelesen`) or over its own earlier write."""


async def schreiben(r: Redis, user_id: str, character_id: str, stand: Stand, *, gelesen: str) -> bool:
    """Store the turn's state (`stand.turn_id` is the turn). `gelesen`: the turn_id of the state
    the turn read at its start ("" when there was none). False: another turn wrote meanwhile;
    nothing is written."""
    done = await r.eval(_SCHREIBEN, 2, schluessel(user_id, character_id),
                        redis_vorher.vorher_key(user_id, character_id, stand.turn_id), gelesen, stand.turn_id,
                        stand.model_dump_json(), AUFBEWAHRUNG_S)
    return bool(done)
