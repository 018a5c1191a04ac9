"""Enricher plugin hooks: each module here declares `PLUGIN = Plugin(name=..., enrich=...)`
(`pipeline/plugins/plugin.py`) and `PLUGINS` below lists them; each adds context after the memory
search, without a change to the enricher (seed 001: the hook is the only interface). A plugin
declared with `suchschluessel=False` reads nothing of the search key (`such` may be None for it):
the enricher starts it before the query rewrite, so it runs beside the model call instead of after
it. Importing this module checks the list: a declaration missing its parts, or a name twice, is a
ConfigError here."""
from __future__ import annotations

from pipeline.plugins.bibliothek import PLUGIN as _BIBLIOTHEK
from pipeline.plugins.notizen import PLUGIN as _NOTIZEN
from pipeline.plugins.plugin import Plugin, verzeichnis
from pipeline.plugins.timeline import PLUGIN as _TIMELINE

__all__ = ["PLUGINS", "Plugin"]

PLUGINS: tuple[Plugin, ...] = verzeichnis((_BIBLIOTHEK, _NOTIZEN, _TIMELINE))
"""Every plugin, in the order the enricher starts them."""

