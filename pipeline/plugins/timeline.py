"""The timeline's proactive window: appointments 3 days back to 14 ahead, with weekday and relation."""
from pipeline.plugins.plugin import Plugin


async def enrich(state, deps, such) -> list[dict]:
    s, cfg = state.stimulus, deps.services.memory_cfg
    rows = await deps.store.timeline.proaktives_fenster(s.user_id, s.character_id, deps.settings.timezone,
                                                        back_days=cfg.timeline_window_back_days,
                                                        ahead_days=cfg.timeline_window_ahead_days)
    return [t.model_dump(mode="json") for t in rows]


PLUGIN = Plugin(name="timeline", enrich=enrich, suchschluessel=False)
"""Reads the time, not the search key: the enricher starts it beside the query rewrite."""
