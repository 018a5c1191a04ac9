"""§4.4 search discipline: one web search per turn by default; a failed or empty search counts;
without budget the model gets the guiding text instead; the first search is served from the
sachlage research hits when there are some (no provider call)."""
from __future__ import annotations

import logging

log = logging.getLogger("novaberg.thinker.budget")
LEITTEXT = ("Die Web-Suche dieses Turns ist verbraucht. Pruefe mit dem, was vorliegt, oder schreibe "
            "ERGEBNIS: OK, wenn nichts dagegen spricht.")


class SearchBudget:
    def __init__(self, limit: int = 1, sachlage_treffer: list[dict] | None = None):
        self.limit = limit
        self.used = 0
        self.sachlage_treffer = sachlage_treffer or []

    def available(self) -> bool:
        return self.used < self.limit

    def take(self, query: str) -> list[dict] | None:
        """Count one search; returns the sachlage hits when they serve it (no provider call)."""
        self.used += 1
        if self.used == 1 and self.sachlage_treffer:
            log.info("thinker: web_search %r served from %d sachlage hits (no provider call)", query,
                     len(self.sachlage_treffer))
            return self.sachlage_treffer
        return None
