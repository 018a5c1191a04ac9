"""Nova's library: the pair's `wissen` entries near the search key, and the character's own
background knowledge (a Character Card's lorebook) — activated by its keys in the newest messages
(memory/wissen_schluessel.py) or near the key."""
import asyncio

from core.state import BibliothekTreffer
from pipeline.plugins.plugin import Plugin


def nachrichten(state) -> list[str]:
    """The messages a lorebook scans, newest first: the current one, then the session's."""
    s = state.stimulus
    verlauf = state.memory.session_turns if state.memory is not None else []
    return [t for t in (s.text, *(v.inhalt for v in reversed(verlauf))) if t]


async def enrich(state, deps, such) -> list[BibliothekTreffer]:
    if such is None:
        return []
    s = state.stimulus
    cfg = deps.services.memory_cfg
    eigene, charakter = await asyncio.gather(  # independent reads: side by side
        deps.store.bibliothek.suchen(s.user_id, s.character_id, such, cfg),
        deps.store.charaktere.wissen_suchen(s.character_id, such, nachrichten(state), cfg))
    return sorted(eigene + charakter, key=lambda h: -h.gewicht)


PLUGIN = Plugin(name="bibliothek", enrich=enrich)
"""Reads near the search key: without one (`such` None) it finds nothing."""
