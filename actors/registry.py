"""Which process serves a pair: the project's own registry (pair → actor) with a fencing token.
Activation and the warm spares it takes processes from: actors/activation.py.

A pair actor is a Ray actor process named `pairhost:{hex}`; it belongs to no pair when it starts.
A small pool of them (`pair_spares`) is started ahead, each already connected to the deployments
(`PairActor.vorwaermen`), their names in the Redis list `pairs:reserve:{fassung}` (one per version of the code). Activating a pair
(`aktivieren`, from any ingress replica or background worker):

1. the registry's entry for the pair (`pairs:besitz`, value `{actor}|{token}`) names a live
   actor: it is asked to serve the pair under that token (`binden`) and is the pair's;
2. otherwise a spare is taken from the reserve (none there: a process is started now, the named
   fallback `kein_ersatz`) and claimed for the pair by compare-and-set against the entry that was
   read: a new token from one counter, so tokens only grow. Whoever loses the race puts the spare
   back and takes the winner's actor.

The fencing token keeps one actor per pair at any moment: an actor serves a pair only under the
registry's current token, checked when it is bound and again at every turn's start
(`PairActor._begin`); an actor that finds itself replaced raises `PairSuperseded` and exits, and its
callers resolve the pair anew. An idle actor gives its entry up by compare-and-delete
(`freigeben`) before it exits, so it can never delete a newer owner's entry.
"""
from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.wire import PairSuperseded  # noqa: F401 (the registry's error, raised across processes)

log = logging.getLogger("novaberg.registry")

BESITZ = "pairs:besitz"
"""Hash: pair name (`pair:{user}:{character}`) → `{actor name}|{token}`."""
TOKEN = "pairs:token"
"""The one counter the fencing tokens come from."""
RESERVE = "pairs:reserve"
"""`pairs:reserve:{fassung}`: list of warm spares' actor names, ready to be claimed — one list per
version of the code (`fassung`), so a deployment of new code never hands out a spare of the old.
(`pairs:reserve` itself: the list of a release before versions, swept as a version gone.)"""
LEBT = "pairs:fassung:lebt:"
"""`pairs:fassung:lebt:{fassung}`: set by that version's reserve keepers while one lives (TTL)."""
RESERVE_LOCK = "pairs:reserve:lock"
GESPERRT = "pairs:gesperrt:"
"""`pairs:gesperrt:{pair}`: while it lives (an erasure of the pair's user or character), no claim
of the pair succeeds."""
SPERRE_S = 60
HOST_PREFIX = "pairhost:"

_CLAIM = """
if redis.call('EXISTS', KEYS[3]) == 1 then return {0, ''} end
local cur = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if cur ~= ARGV[2] then return {0, cur} end
local t = redis.call('INCR', KEYS[2])
local v = ARGV[3] .. '|' .. t
redis.call('HSET', KEYS[1], ARGV[1], v)
return {1, v}
"""
_RELEASE = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""


@dataclass(frozen=True)
class Eintrag:
    aktor: str
    token: int

    @property
    def wert(self) -> str:
        return f"{self.aktor}|{self.token}"

    @staticmethod
    def lesen(raw: Any) -> "Eintrag | None":
        if not raw:
            return None
        s = raw.decode() if isinstance(raw, bytes) else str(raw)
        aktor, _, token = s.rpartition("|")
        return Eintrag(aktor, int(token)) if aktor and token.isdigit() else None


_QUELLEN = ("actors", "core", "cluster", "memory", "pipeline", "prompts", "serve")


def fassung() -> str:
    """The version of the code a process runs: a hash over the project's source files (the pair
    process, the nodes, the prompts, the migrations), taken when the process imported this module,
    so as near its own code as a process can say. Processes started from the same tree agree."""
    return _FASSUNG


def _fassung() -> str:
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha1()
    for folder in _QUELLEN:
        for f in sorted((root / folder).rglob("*")):
            if f.suffix in (".py", ".txt", ".sql", ".json") and "__pycache__" not in f.parts:
                h.update(f.relative_to(root).as_posix().encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:12]


_FASSUNG = _fassung()


def reserve_key(version: str | None = None) -> str:
    return f"{RESERVE}:{version or fassung()}"


def pair_name(user_id: str, character_id: str) -> str:
    return f"pair:{user_id}:{character_id}"


def host_name() -> str:
    return f"{HOST_PREFIX}{uuid.uuid4().hex[:16]}"


async def eintrag(redis, pair: str) -> Eintrag | None:
    return Eintrag.lesen(await redis.hget(BESITZ, pair))


async def beanspruchen(redis, pair: str, vorher: Eintrag | None, aktor: str) -> tuple[bool, Eintrag | None]:
    """Compare-and-set: the pair goes to `aktor` under a new token when its entry is still
    `vorher` (and the pair is not locked by an erasure). Returns (won, the entry that now stands).
    A claim whose reply was lost and that was sent again finds its own entry: that is a win."""
    won, raw = await redis.eval(_CLAIM, 3, BESITZ, TOKEN, GESPERRT + pair, pair, vorher.wert if vorher else "", aktor)
    stand = Eintrag.lesen(raw)
    return bool(int(won)) or (stand is not None and stand.aktor == aktor), stand


async def sperren(redis, pair: str) -> None:
    """No claim of the pair succeeds for `SPERRE_S` (its data is being erased)."""
    await redis.set(GESPERRT + pair, "1", ex=SPERRE_S)


async def entsperren(redis, pair: str) -> None:
    await redis.delete(GESPERRT + pair)


async def eintraege_von(redis, aktor: str) -> dict[str, Eintrag]:
    """The entries that name `aktor` (a scan of every entry: only a process Ray restarted asks)."""
    out = {}
    async for pair, raw in redis.hscan_iter(BESITZ):
        stand = Eintrag.lesen(raw)
        if stand is not None and stand.aktor == aktor:
            out[pair.decode() if isinstance(pair, bytes) else pair] = stand
    return out


async def in_reserve(redis, aktor: str) -> bool:
    return await redis.lpos(reserve_key(), aktor) is not None


async def freigeben(redis, pair: str, mein: Eintrag) -> bool:
    """Compare-and-delete: the entry goes only while it is still `mein`."""
    return bool(int(await redis.eval(_RELEASE, 1, BESITZ, pair, mein.wert)))
