"""The Thinker's timeline tools against the real timeline: seed 000 §4.2 caps `timeline_search`
("Richtung (`both`) und Limit (5) fest konfiguriert"); §4.1 gives `timeline_check` no cap of its
own — a day with more than five appointments comes whole."""
import asyncio
from datetime import datetime, timedelta

from memory import timeline
from pipeline.thinker.tools import TIMELINE_LIMIT, timeline_werkzeuge
from core.state import Stimulus
from tests.conftest import new_pair, with_pool
from tests.scripted_llm import PoolStore, ScriptedLLM, deps_for


def test_timeline_check_shows_the_whole_day_and_timeline_search_stays_capped(pool):
    user, ch = new_pair("tc")
    day = (datetime.now() + timedelta(days=4)).replace(hour=8, minute=0, second=0, microsecond=0)

    async def go(p):
        tz = "Europe/Berlin"
        for i in range(8):
            await timeline.add(p, user, ch, f"Probe {i}", day + timedelta(hours=i), tz)
        deps = deps_for(ScriptedLLM(), store=PoolStore(p), turn=(user, ch, "t1"))
        tools = timeline_werkzeuge(deps, Stimulus(user_id=user, character_id=ch, turn_id="t1", user_prompt="?"))
        return await tools["timeline_check"](day.date().isoformat()), await tools["timeline_search"]("Probe")

    check, search = asyncio.run(with_pool(pool, go))
    assert check.count("[termin]") == 8 and all(f"Probe {i}" in check for i in range(8))
    assert TIMELINE_LIMIT == 5 and search.count("[termin]") == 5
