"""The Redis stores a turn's nodes read and write, as typed clients over one Redis connection:
`deps.session.load_window(user_id, character_id, n)` runs `memory.session.load_window(redis, …)`
and returns the entries as `SessionTurn`s; the pending order (`deps.auftrag`), the agents' quota
counters (`deps.quoten`), the landscape detail (`deps.landschaft`), the short-term memory's
vectors (`deps.kzg`) and the planned impulses (`deps.impulse`) likewise. A node reaches Redis only
through these clients (a test holds every node to it); the processes around the turn (actors,
routes) call the store modules' functions on their connection.

Each method runs the store module's function of the same purpose, so what is written and how
(keys, scripts, the before-images a take-back restores) stays in that module.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.state import KzgTreffer, LandschaftRecord, NovaZustandRecord, SessionTurn
from memory import agent_quoten, ausstehender_auftrag, kzg, redis_vorher, session
from memory.ausstehender_auftrag import Stand
from memory.session import SessionZusammenfassung

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from core.wire import HumanCommit, TurnCommit, TurnResult
    from memory.kzg import KZGIndex


class _RedisClient:
    """A client of one Redis store, bound to a connection."""

    def __init__(self, redis: Redis):
        self.redis = redis


def _turns(raw: list[dict[str, Any]]) -> list[SessionTurn]:
    return [SessionTurn.model_validate(t) for t in raw]


@dataclass(frozen=True)
class AusstehendeTurns:
    """Session entries that left the window and are not in the summary yet, oldest first
    (`memory.session.ausstehend`): `stand` `anfang`, `gefunden` or `luecke`; `eintraege` the
    (marke, entry) pairs, at most the limit asked for; `rueckstand` all such entries."""

    stand: str
    eintraege: list[tuple[str, SessionTurn]]
    rueckstand: int


class SessionStore(_RedisClient):
    """A pair's conversation in Redis (memory/session.py): its history, its summary, Nova's
    state after the last turn, and the turn's commit."""

    async def load_window(self, user_id: str, character_id: str, n: int, *,
                          hoechstens: bool = False) -> list[SessionTurn]:
        """The window of the newest `n` entries, cut at a block's start (`session.fenster_start`)."""
        return _turns(await session.load_window(self.redis, user_id, character_id, n, hoechstens=hoechstens))

    async def load_turns(self, user_id: str, character_id: str, last: int) -> list[SessionTurn]:
        """The newest `last` entries, oldest first."""
        return _turns(await session.load_turns(self.redis, user_id, character_id, last))

    async def count_turns(self, user_id: str, character_id: str) -> int:
        return await session.count_turns(self.redis, user_id, character_id)

    async def load_summary(self, user_id: str, character_id: str) -> SessionZusammenfassung:
        """The summary with its cursor."""
        return await session.load_summary(self.redis, user_id, character_id)

    async def summary_text(self, user_id: str, character_id: str) -> str | None:
        """The summary's text (None: none was written)."""
        return await session.get_summary(self.redis, user_id, character_id)

    async def ausstehend(self, user_id: str, character_id: str, *, window: int, marke: str,
                         limit: int) -> AusstehendeTurns:
        """The entries before the window that follow the entry marked `marke` (`session.ausstehend`)."""
        out = await session.ausstehend(self.redis, user_id, character_id, window=window, marke=marke, limit=limit)
        return AusstehendeTurns(stand=out.stand, rueckstand=out.rueckstand,
                                eintraege=[(m, SessionTurn.model_validate(e)) for m, e in out.eintraege])

    async def fold_summary(self, user_id: str, character_id: str, *, nach_marke: str, text: str, marke: str,
                           bis_turn_id: str, neu: int, turn_id: str | None = None) -> bool:
        """Store the new summary and its cursor if the cursor still stands at `nach_marke`."""
        return await session.fold_summary(self.redis, user_id, character_id, nach_marke=nach_marke, text=text,
                                          marke=marke, bis_turn_id=bis_turn_id, neu=neu, turn_id=turn_id)

    async def annotate_turn(self, user_id: str, character_id: str, turn_id: str, felder: dict[str, Any], *,
                            rolle: str = "user") -> bool:
        """Add fields to a stored entry (False: not found)."""
        return await session.annotate_turn(self.redis, user_id, character_id, turn_id, felder, rolle=rolle)

    async def load_zustand(self, user_id: str, character_id: str) -> NovaZustandRecord | None:
        """Nova's emotion state as the pair's last committed turn left it (None: none committed)."""
        raw = await session.load_zustand(self.redis, user_id, character_id)
        return None if raw is None else NovaZustandRecord.model_validate(raw)

    async def commit_turn(self, commit: TurnCommit) -> bool:
        """Commit a turn once (`session.commit_turn`). False: committed already; PairSuperseded:
        the commit's fence names a process that no longer serves the pair."""
        return await session.commit_turn(self.redis, commit)

    async def commit_human(self, commit: HumanCommit) -> int:
        """Commit the human's part of a turn on its own, once (`session.commit_human`): 1 kept now,
        2 kept before, 0 the whole turn is committed."""
        return await session.commit_human(self.redis, commit)

    async def stored_result(self, user_id: str, character_id: str, turn_id: str) -> TurnResult | None:
        """The stored result of a finished turn (None: the turn_id has not run)."""
        return await session.stored_result(self.redis, user_id, character_id, turn_id)


class AuftragStore(_RedisClient):
    """The pair's pending order (memory/ausstehender_auftrag.py)."""

    async def laden(self, user_id: str, character_id: str) -> Stand | None:
        """The stored state; a document that does not parse raises `ValidationError`."""
        return await ausstehender_auftrag.laden(self.redis, user_id, character_id)

    async def geschrieben_von(self, user_id: str, character_id: str) -> str:
        """The turn that wrote the state last ("" none)."""
        return await ausstehender_auftrag.geschrieben_von(self.redis, user_id, character_id)

    async def schreiben(self, user_id: str, character_id: str, stand: Stand, *, gelesen: str) -> bool:
        """Store the turn's state over the one it read (`gelesen`). False: another turn wrote meanwhile."""
        return await ausstehender_auftrag.schreiben(self.redis, user_id, character_id, stand, gelesen=gelesen)


class QuotenStore(_RedisClient):
    """The agents' quota counters (memory/agent_quoten.py); `turn` counts once per turn."""

    async def geroutet(self, chain: str, turn: str | None = None) -> None:
        await agent_quoten.geroutet(self.redis, chain, turn)

    async def zugestellt(self, agent: str, chain: str, turn: str | None = None) -> None:
        await agent_quoten.zugestellt(self.redis, agent, chain, turn)

    async def bearbeitet(self, agent: str, chain: str, outcome: str, turn: str | None = None) -> None:
        await agent_quoten.bearbeitet(self.redis, agent, chain, outcome, turn)


def gv_key(user_id: str, character_id: str) -> str:
    """The landscape detail of a pair's last turn (a hash: cluster, gv_detail, werkzeug, vehikel)."""
    return f"gv:detail:{user_id}:{character_id}"


_LANDSCHAFT = """
if redis.call('HGET', KEYS[1], 'turn_id') ~= ARGV[1] then
  redis.call('HSET', KEYS[1], 'vorher', redis.call('HGET', KEYS[1], 'cluster') or '')
end
redis.call('HSET', KEYS[1], 'turn_id', ARGV[1], 'cluster', ARGV[2], 'gv_detail', ARGV[3], 'werkzeug', ARGV[4],
           'vehikel', ARGV[5])
return 1
"""
"""The turn's detail; the cluster before it kept as `vorher` once per turn (a turn run again under
its id does not take its own first run's cluster for the previous turn's)."""


class LandschaftStore(_RedisClient):
    """The landscape detail gv_node writes and the next turn's enricher reads."""

    async def cluster(self, user_id: str, character_id: str, turn_id: str | None = None) -> str | None:
        """The previous turn's cluster (None: no turn wrote one). For a turn run again (`turn_id`
        wrote the detail already), the cluster before its first run."""
        cluster, von, vorher = await self.redis.hmget(gv_key(user_id, character_id), "cluster", "turn_id", "vorher")
        if turn_id is not None and von is not None and _text(von) == turn_id:
            cluster = vorher
        return (_text(cluster) or None) if cluster is not None else None

    async def schreiben(self, user_id: str, character_id: str, turn_id: str, rec: LandschaftRecord) -> None:
        """The turn's detail, the one before kept for taking the turn back."""
        key = gv_key(user_id, character_id)
        await redis_vorher.festhalten(self.redis, user_id, character_id, turn_id, key)
        await self.redis.eval(_LANDSCHAFT, 1, key, turn_id, rec.cluster, rec.gv_detail, rec.werkzeug, rec.vehikel)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


class KzgStore(_RedisClient):
    """The pair's short-term memory (memory/kzg.py): its count, and its vectors through the pair's
    in-memory index."""

    async def count(self, user_id: str, character_id: str) -> int:
        return await kzg.count(self.redis, user_id, character_id)

    async def refresh(self, index: KZGIndex) -> None:
        """Bring the index up to date with Redis."""
        await index.refresh(self.redis)

    async def search(self, index: KZGIndex, query, *, threshold: float, top_k: int,
                     refreshed: bool = False) -> list[KzgTreffer]:
        """Entries with cosine ≥ threshold, best first, at most top_k (`KZGIndex.search`)."""
        return await index.search(self.redis, query, threshold=threshold, top_k=top_k, refreshed=refreshed)

    async def abloesen(self, user_id: str, character_id: str, entry_ids: list[str], turn_id: str, nachfolger: str,
                       seit: float) -> int:
        """Mark entries superseded by a turn (`kzg.abloesen`): found as past from then on."""
        return await kzg.abloesen(self.redis, user_id, character_id, entry_ids, turn_id, nachfolger, seit)


DUE_KEY = "impulse:faellig"
"""Planned impulses, scored by their due time (a worker delivers each to its pair when it is due)."""
MARKER_TTL_S = 7 * 24 * 3600
"""How long a turn's mark that it planned its impulse is kept."""
_PLANEN = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', tonumber(ARGV[2])) then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
  redis.call('SADD', KEYS[3], ARGV[1])
  return 1
end
return 0
"""
"""The turn's marker, the impulse and its open entry, together or not at all."""


def _marker(user_id: str, character_id: str, turn_id: str) -> str:
    return f"aufgriff:geplant:{user_id}:{character_id}:{turn_id}"


def _offen_key(user_id: str, character_id: str) -> str:
    return f"impulse:offen:{user_id}:{character_id}"


class ImpulsStore(_RedisClient):
    """Nova's impulses planned for later: once per turn, a bounded number open per pair."""

    async def geplant(self, user_id: str, character_id: str, turn_id: str) -> bool:
        """Whether the turn has planned its impulse already."""
        return bool(await self.redis.exists(_marker(user_id, character_id, turn_id)))

    async def offen(self, user_id: str, character_id: str) -> int:
        """The pair's impulses planned and not delivered yet."""
        return await self.redis.scard(_offen_key(user_id, character_id))

    async def planen(self, impulse: dict[str, Any], faellig: float) -> bool:
        """Plan the impulse (its `id`, `user_id`, `character_id`, `aus_turn`) for the time
        `faellig`, once per turn. False: the turn planned one before."""
        u, c = impulse["user_id"], impulse["character_id"]
        neu = await self.redis.eval(_PLANEN, 3, _marker(u, c, impulse["aus_turn"]), DUE_KEY, _offen_key(u, c),
                                    impulse["id"], MARKER_TTL_S, faellig, json.dumps(impulse))
        return bool(neu)
