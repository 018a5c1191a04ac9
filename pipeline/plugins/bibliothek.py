"""Nova's library: the pair's `wissen` entries near the search key, and the character's own
background knowledge (a Character Card's lorebook) — by its keys in the message or near the key."""
import asyncio

NAME = "bibliothek"


async def enrich(state, deps, such) -> list[dict]:
    if such is None:
        return []
    s = state.stimulus
    cfg = deps.services.memory_cfg
    eigene, charakter = await asyncio.gather(  # independent reads: side by side
        deps.store.bibliothek.suchen(s.user_id, s.character_id, such, cfg),
        deps.store.charaktere.wissen_suchen(s.character_id, such, s.text, cfg))
    return sorted(eigene + charakter, key=lambda h: -h["gewicht"])
