"""The user's active notes, listed proactively (name, summary, topics)."""
NAME = "notizen"


async def enrich(state, deps, such) -> list[dict]:
    return await deps.store.call("notizen.proactive_listing", state.stimulus.user_id)
