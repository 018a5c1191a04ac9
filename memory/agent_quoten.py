"""The agents' quota counters (seed 003, "Die Quotenzähler am Engpass"), kept in Redis so that a
restart does not zero them (the seed's named weakness and its remedy). agent_dispatch counts per
agent and chain what it delivered (`zugestellt`, before the dispatch) and what came back, by
outcome (`bearbeitet`, after it): the difference is a delivery loss. The denominator is the
router's: the utterances it classified, per chain. The quota (delivered / routed) is judged only
once the chain has the minimum sample of utterances."""
from __future__ import annotations

import hashlib

from pydantic import BaseModel
from redis.asyncio import Redis

DELIVERED = "agents:zugestellt"
"""Hash `{agent}:{chain}` -> deliveries."""
PROCESSED = "agents:bearbeitet"
"""Hash `{agent}:{chain}:{outcome}` -> results that came back."""
ROUTED = "agents:geroutet"
"""Hash `{chain}` -> utterances the router classified (the quota's denominator)."""
MIN_SAMPLE = 100
"""Seed 003: below 100 utterances of a chain the quota is shown but not judged."""


class AgentQuote(BaseModel):
    agent: str
    chain: str
    zugestellt: int
    bearbeitet: dict[str, int]
    """Results that came back, by the agent's status (`abgeschlossen`, `rueckfrage`, `fehler`, ...)."""
    zustellverlust: int
    """Delivered and never came back (a pipeline defect, not a routing question)."""
    geroutet: int
    """The router's utterances of this chain: the denominator."""
    quote: float | None
    """zugestellt / geroutet; None while the chain has no utterance."""
    beurteilt: bool
    """Whether the denominator has reached `MIN_SAMPLE`."""


def _s(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


GEZAEHLT = "agents:gezaehlt:"
"""`agents:gezaehlt:{what}:{hash of the pair, turn and step}`: a turn's count is in (a turn run again
counts nothing twice); hashed, so no key names the person (an erasure need not find them)."""
GEZAEHLT_TTL_S = 2 * 24 * 3600
_EINMAL = """
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) then
  return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
end
return 0
"""


async def _zaehlen(r: Redis, key: str, field: str, turn: str | None, einmal: str | None = None) -> None:
    """One count; with `turn` (the pair, the turn and the step), once per turn however often it
    runs — once per `einmal` of the turn (default: the field), so a result counts once whatever its
    outcome on a second run."""
    if turn is None:
        await r.hincrby(key, field, 1)
    else:
        mark = hashlib.sha256(turn.encode()).hexdigest()[:24]
        await r.eval(_EINMAL, 2, key, f"{GEZAEHLT}{key}:{einmal or field}:{mark}", field, GEZAEHLT_TTL_S)


async def geroutet(r: Redis, chain: str, turn: str | None = None) -> None:
    await _zaehlen(r, ROUTED, chain, turn)


async def zugestellt(r: Redis, agent: str, chain: str, turn: str | None = None) -> None:
    await _zaehlen(r, DELIVERED, f"{agent}:{chain}", turn)


async def bearbeitet(r: Redis, agent: str, chain: str, outcome: str, turn: str | None = None) -> None:
    await _zaehlen(r, PROCESSED, f"{agent}:{chain}:{outcome}", turn, einmal=f"{agent}:{chain}")


async def lesen(r: Redis) -> list[AgentQuote]:
    """Every agent and chain that was delivered to, with its denominator."""
    async with r.pipeline(transaction=False) as p:
        p.hgetall(DELIVERED)
        p.hgetall(PROCESSED)
        p.hgetall(ROUTED)
        delivered, processed, routed = await p.execute()
    delivered = {_s(k): int(v) for k, v in delivered.items()}
    routed = {_s(k): int(v) for k, v in routed.items()}
    back: dict[tuple[str, str], dict[str, int]] = {}
    for k, v in processed.items():
        agent, chain, outcome = _s(k).rsplit(":", 2)
        back.setdefault((agent, chain), {})[outcome] = int(v)
    out = []
    for agent, chain in sorted({tuple(k.rsplit(":", 1)) for k in delivered} | set(back)):
        n, came, denom = delivered.get(f"{agent}:{chain}", 0), back.get((agent, chain), {}), routed.get(chain, 0)
        out.append(AgentQuote(agent=agent, chain=chain, zugestellt=n, bearbeitet=came,
                              zustellverlust=max(0, n - sum(came.values())), geroutet=denom,
                              quote=round(n / denom, 4) if denom else None, beurteilt=denom >= MIN_SAMPLE))
    return out
