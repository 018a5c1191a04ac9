"""The Thinker's budgets. §4.4 search discipline: one web search per turn by default; a failed or
empty search counts; without budget the model gets the guiding text instead; the first search is
served from the sachlage research hits when there are some (no provider call). The log lines are
F-LOG-3's. §3 the reasoning pass's tokens: a real reasoning chain and its answer, within the
context beside the prompt (`call_tokens`)."""
from __future__ import annotations

import logging
import math

from pipeline.node_config import budget, reasoning_budget

log = logging.getLogger("novaberg.thinker.budget")
LEITTEXT = ("Die Websuche dieses Turns ist bereits gelaufen — ihre Treffer stehen oben im Verlauf. "
            "Pruefe damit, oder lade eine andere URL aus der Trefferliste mit web_fetch(url).")
WEBSUCHE_MAX_JE_TURN = 1


class SearchBudget:
    def __init__(self, limit: int = WEBSUCHE_MAX_JE_TURN, sachlage_treffer: list[dict] | None = None,
                 sachlage_objekt: str = ""):
        self.limit = limit
        self.used = 0
        self.provider_calls = 0
        self.sachlage_treffer = sachlage_treffer or []
        self.sachlage_objekt = sachlage_objekt
        if self.sachlage_treffer:
            log.info("thinker: sachlage research of this turn — %d hits serve the first web search",
                     len(self.sachlage_treffer))
        else:
            log.info("thinker: sachlage research of this turn — no hits, the first web search goes to the provider")

    def available(self) -> bool:
        if self.used < self.limit:
            return True
        log.info("thinker search budget: the turn's budget is spent, no new search")
        return False

    def take(self, query: str) -> list[dict] | None:
        """Count one search; returns the sachlage hits when they serve it (no provider call).
        None means: the caller asks the provider (and the search counts however it ends)."""
        self.used += 1
        if self.used == 1 and self.sachlage_treffer:
            log.info("thinker search budget: the first search is served from the sachlage research (%d hits), "
                     "no new search", len(self.sachlage_treffer))
            return self.sachlage_treffer
        self.provider_calls += 1
        log.info("thinker search budget: one search booked, %d left", max(0, self.limit - self.used))
        return None

    @property
    def vorrecherche(self) -> int:
        return len(self.sachlage_treffer)


PROMPT_CHARS_PER_TOKEN = 2.0
"""Characters per token of the Thinker's prompt, estimated low as the responder's
(`pipeline/nodes/responder.py` `CHARS_PER_TOKEN`): the room left in the context is never overestimated."""


def call_tokens(messages: list[dict], settings) -> int:
    """The tokens one call of the reasoning pass asks for: its answer plus the thinking
    (`node_config.reasoning_budget`), cut to what the context (`llm_ctx`) leaves beside the prompt
    so far — an engine refuses or cuts a call the context cannot hold — but never below the
    answer budget."""
    want = reasoning_budget(settings)
    prompt = math.ceil(sum(len(str(m.get("content") or "")) for m in messages) / PROMPT_CHARS_PER_TOKEN)
    room = settings.llm_ctx - prompt
    if room >= want:
        return want
    n = max(budget("thinker", settings), room)
    log.info("thinker: fallback denkbudget_gekuerzt: the context (%d tokens) leaves about %d beside the prompt; "
             "the reasoning pass asks %d of its %d", settings.llm_ctx, room, n, want)
    return n
