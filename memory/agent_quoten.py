"""The agents' quota counters (seed 003, "Die Quotenzähler am Engpass"), kept in Redis so that a
restart does not zero them (the seed's named weakness and its remedy). agent_dispatch counts per
agent and chain what it delivered (`zugestellt`, before the dispatch) and what came back, by
outcome (`bearbeitet`, after it): the difference is a delivery loss. The denominator is the
router's: the utterances it classified, per chain. The quota (delivered / routed) is judged only
once the chain has the minimum sample of utterances."""
from __future__ import annotations

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


async def geroutet(r: Redis, chain: str) -> None:
    await r.hincrby(ROUTED, chain, 1)


async def zugestellt(r: Redis, agent: str, chain: str) -> None:
    await r.hincrby(DELIVERED, f"{agent}:{chain}", 1)


async def bearbeitet(r: Redis, agent: str, chain: str, outcome: str) -> None:
    await r.hincrby(PROCESSED, f"{agent}:{chain}:{outcome}", 1)


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
