"""The pair actor's side of taking turns back (regenerate, edit, rewind): which turns an operation
takes back, its record, and its steps (memory/ruecknahme.py does the stores' part).

An operation is recorded before its first step (`ruecknahme:{user}:{character}`, a hash op_id →
`Vorgang`), with the turn ids it takes back fixed then: running it again after a kill takes back
the same turns, never the ones before them. Its stand moves `begonnen` → `zurueckgenommen` (the
stores are done) → `fertig` (a regenerate's or edit's new turn answered too; the record keeps the
result, and the same op_id answers it again). The pair's hash keeps every unfinished operation
and its newest `retractions_kept_per_pair` finished ones (an older finished one goes, and its
op_id counts as new again); it expires `VORGANG_TTL_S` (30 days) after the pair's last operation.
"""
from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from core.wire import PairRuecknahmeRequest, RuecknahmeResult
from memory import ruecknahme

if TYPE_CHECKING:
    from pipeline.services import Services

log = logging.getLogger("novaberg.pair.ruecknahme")

VORGANG_TTL_S = ruecknahme.ZURUECKGENOMMEN_S


def vorgaenge_key(user_id: str, character_id: str) -> str:
    return f"ruecknahme:{user_id}:{character_id}"


class Vorgang(BaseModel):
    """One operation as recorded: what it takes back and where it stands."""

    op_id: str
    art: Literal["rewind", "regenerate", "edit"]
    zurueckgenommen: list[str]
    stand: Literal["begonnen", "zurueckgenommen", "fertig"] = "begonnen"
    text: str | None = None
    """The message the new turn answers (regenerate: the old one; edit: the new one)."""
    name: str | None = None
    """The name the message came with (`TurnRequest.name`): the new turn's memories carry it too."""
    received_at: datetime | None = None
    """The date an operator gave the message (its entry is `datiert`): the new turn keeps it."""
    turn_id: str | None = None
    """The new turn's id (regenerate, edit)."""
    verworfen: dict[str, str] = {}
    """The replies taken back (turn_id → reply): a regenerate keeps them as swipes of the new turn."""
    ergebnis: RuecknahmeResult | None = None
    seit: float | None = None
    """When it was first recorded (Unix time): the oldest finished ones go first."""


def _menschlich(e: dict) -> bool:
    return e.get("rolle") == "user" and e.get("herkunft", "user") == "user"


def planen(eintraege: list[dict], request: PairRuecknahmeRequest, neue_turn_id: str) -> Vorgang | None:
    """The operation on the pair's session (`eintraege`, oldest first): the last `n` messages of the
    human and every entry after the first of them. None: the session holds no message of the human."""
    n = 1 if request.art != "rewind" else request.n
    menschlich = [i for i, e in enumerate(eintraege) if _menschlich(e)]
    if not menschlich:
        return None
    ab = menschlich[-min(n, len(menschlich))]
    ids = list(dict.fromkeys(e["turn_id"] for e in eintraege[ab:] if e.get("turn_id") and e["turn_id"] != "begruessung"))
    verworfen = {e["turn_id"]: e.get("inhalt", "") for e in eintraege[ab:] if e.get("rolle") == "assistant"}
    text = request.text if request.art == "edit" else eintraege[ab].get("inhalt", "")
    name = (request.art == "edit" and request.name) or eintraege[ab].get("name")
    datum = eintraege[ab].get("time") if eintraege[ab].get("datiert") else None
    return Vorgang(op_id=request.op_id, art=request.art, zurueckgenommen=ids,
                   text=text if request.art != "rewind" else None, name=name if request.art != "rewind" else None,
                   received_at=datum if request.art != "rewind" else None,
                   turn_id=neue_turn_id if request.art != "rewind" else None,
                   verworfen=verworfen if request.art == "regenerate" else {})


async def laden(services: Services, user_id: str, character_id: str, op_id: str) -> Vorgang | None:
    raw = await services.redis.hget(vorgaenge_key(user_id, character_id), op_id)
    return None if raw is None else Vorgang.model_validate_json(raw)


async def offene(services: Services, user_id: str, character_id: str) -> list[Vorgang]:
    """The pair's operations a kill cut short (stand other than `fertig`), in the order begun."""
    raw = await services.redis.hgetall(vorgaenge_key(user_id, character_id))
    alle = [Vorgang.model_validate_json(v) for v in raw.values()]
    return [v for v in alle if v.stand != "fertig"]


async def speichern(services: Services, user_id: str, character_id: str, v: Vorgang) -> None:
    """Record the operation as it stands; a finished one lets the oldest finished ones beyond
    `retractions_kept_per_pair` go."""
    key = vorgaenge_key(user_id, character_id)
    v.seit = v.seit or time.time()
    await services.redis.hset(key, v.op_id, v.model_dump_json())
    await services.redis.expire(key, VORGANG_TTL_S)
    if v.stand == "fertig":
        await kuerzen(services.redis, key, services.settings.retractions_kept_per_pair)


async def kuerzen(r, key: str, behalten: int) -> int:
    """Drop the oldest finished operations of a pair's record beyond `behalten`; the unfinished
    ones stay (a kill cut them short, the pair's next actor finishes them). Returns those dropped."""
    if await r.hlen(key) <= behalten:
        return 0
    fertig = sorted((v for v in map(Vorgang.model_validate_json, (await r.hgetall(key)).values())
                     if v.stand == "fertig"), key=lambda v: v.seit or 0.0)
    weg = [v.op_id for v in fertig[:max(0, len(fertig) - behalten)]]
    if weg:
        await r.hdel(key, *weg)
        log.info("ruecknahme: %d older finished operations of %s dropped (kept: %d)", len(weg), key, behalten)
    return len(weg)


async def ausfuehren(services: Services, user_id: str, character_id: str, v: Vorgang) -> dict[str, int]:
    """The stores' steps (fence, Postgres, Redis); each runs again unharmed."""
    ids = v.zurueckgenommen
    by_store = {"outbox": await ruecknahme.zaun(services.redis, user_id, character_id, ids)}
    pg = await services.store.ruecknahme.zuruecknehmen(
        user_id, character_id, ids, varianten_an=v.turn_id, verworfen=v.verworfen,
        varianten_max=(services.settings.swipes_per_turn, services.settings.swipes_per_pair))
    by_store.update({f"pg:{k}": n for k, n in pg.tabellen.items()})
    rd = await ruecknahme.zuruecknehmen_redis(services.redis, user_id, character_id, ids)
    by_store.update({f"redis:{k}": n for k, n in rd.items()})
    log.info("pair %s:%s: %s %s took back turns %s (%s)", user_id, character_id, v.art, v.op_id, ids,
             {k: n for k, n in by_store.items() if n})
    return by_store
