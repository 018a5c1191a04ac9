"""The services `wissen` and `dateien` (seed 001, *Query Rewriting*): they read the pair's library
and its file index with the turn's search key, `such_vektor`, which travels to them as their
declared need. The agents of the same names call them when the planner orders a look-up
(pipeline/agents/wissen, pipeline/agents/dateien: their declared need names the memory record that
carries the key), and the Thinker calls them as tools (pipeline/thinker/tools.py) with the same key.

- `wissen`: the library's own query (`bibliothek.suchen`, the one the enricher's library plugin
  reads), the same threshold (`library_threshold`, 0.50 in the seed), capped at 5 instead of 3.
  Only the pair's `wissen` entries: reports stay out, as on the enricher's path.
- `dateien`: the file index (`aufzeichnungen.suchen`) on the dense channel alone, with no floor and
  capped at 8, one hit per file. The seed measured it so (`keine Schwelle, Kappung 8`): the full cap
  always arrives, which is why the search key must carry the conversation's subject.

The enricher writes the key into the turn's memory record (`MemoryRecord.such_vektor`, seed 001
§4); the calling node hands it on. Each call logs its hit count and records a decision entry
under the calling node.
"""
from __future__ import annotations

import logging
from pipeline.services import Deps
from core.state import BibliothekTreffer, DateiTreffer, Stimulus

log = logging.getLogger("novaberg.dienste")

WISSEN_KAPPUNG = 5
"""Seed 001: the service `wissen` shares the library's query and threshold; only its cap differs (5 against 3)."""
DATEIEN_KAPPUNG = 8
"""Seed 001: the service `dateien` has no threshold and a cap of 8."""
KEIN_BODEN = -1.0
"""The lowest cosine there is: the dense channel's floor switched off."""


def _schwaechster(werte: list[float | None]) -> float | None:
    values = [w for w in werte if w is not None]
    return min(values) if values else None


async def wissen(deps: Deps, stimulus: Stimulus, such_vektor, node: str) -> list[BibliothekTreffer]:
    """The pair's library near the key: at most `WISSEN_KAPPUNG` `wissen` entries at or above the
    library's threshold, nearest first (`id`, `titel`, `inhalt`, `similarity`, `gewicht` 0–1)."""
    cfg = deps.services.memory_cfg
    hits = await deps.store.bibliothek.suchen(stimulus.user_id, stimulus.character_id, such_vektor, cfg,
                                              top_k=WISSEN_KAPPUNG)
    schwaechster = _schwaechster([h.similarity for h in hits])
    log.info("dienst wissen: %d Treffer (Schwelle %.2f, Kappung %d), schwaechster Kosinus %s", len(hits),
             cfg.library_threshold, WISSEN_KAPPUNG, "-" if schwaechster is None else f"{schwaechster:.4f}")
    deps.trace.decision(node, f"{node}.dienst_wissen", "treffer" if hits else "keine", {
        "treffer": [h.id for h in hits], "schwaechster_kosinus": schwaechster, "kappung": WISSEN_KAPPUNG},
        threshold=cfg.library_threshold)
    return hits


async def dateien(deps: Deps, stimulus: Stimulus, such_vektor, node: str) -> list[DateiTreffer]:
    """The pair's files near the key: the `DATEIEN_KAPPUNG` nearest, one chunk per file, without a
    floor (`datei`, `titel`, `zusammenfassung`, `auszug`, `cosinus`, …, as the file index returns them)."""
    cfg = deps.services.memory_cfg.model_copy(update={"files_dense_floor": KEIN_BODEN, "files_cap": DATEIEN_KAPPUNG})
    # no words: the keyword channel stays out, the service reads the key alone
    found = await deps.store.aufzeichnungen.suchen(stimulus.user_id, stimulus.character_id, "", such_vektor, cfg)
    hits = found.treffer
    log.info("dienst dateien: %d Treffer, Bestand %d (ohne Schwelle, Kappung %d), schwaechster Kosinus %s",
             len(hits), found.bestand, DATEIEN_KAPPUNG,
             "-" if found.schwaechster_kosinus is None else f"{found.schwaechster_kosinus:.4f}")
    deps.trace.decision(node, f"{node}.dienst_dateien", "treffer" if hits else "keine", {
        "treffer": [h.id for h in hits], "bestand": found.bestand,
        "schwaechster_kosinus": found.schwaechster_kosinus, "kappung": DATEIEN_KAPPUNG})
    return hits
