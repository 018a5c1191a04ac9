"""Enricher plugin hooks: each module here with `NAME` and `async def enrich(state, deps, such)`
adds context after the memory search, without a change to the enricher (seed 001: the hook is
the only interface). Discovered from this folder. A plugin that sets `SUCHSCHLUESSEL = False` reads
nothing of the search key (`such` may be None for it): the enricher starts it before the query
rewrite, so it runs beside the model call instead of after it."""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache


@lru_cache(maxsize=1)
def discover() -> tuple:
    mods = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "enrich") and hasattr(mod, "NAME"):
            mods.append(mod)
    return tuple(mods)


def braucht_suchschluessel(plugin) -> bool:
    return getattr(plugin, "SUCHSCHLUESSEL", True)
