"""Nova's library: `wissen` entries near the search key."""
NAME = "bibliothek"


async def enrich(state, deps, such) -> list[dict]:
    if such is None:
        return []
    s = state.stimulus
    return await deps.store.call("library.suchen", s.user_id, s.character_id, such, deps.services.memory_cfg)
