"""A plugin's declaration: one typed object per plugin module (`PLUGIN = Plugin(...)`), validated
when the module is imported, as a node's is (`pipeline/node.py`).

    PLUGIN = Plugin(name="timeline", enrich=enrich, suchschluessel=False)

Its name (the channel of `MemoryRecord.plugins` its context goes into), its `async enrich(state,
deps, such) -> list[dict]`, and whether it reads the search key: one that does not
(`suchschluessel=False`; `such` may be None for it) is started before the query rewrite, beside the
model call instead of after it. The list (`pipeline/plugins/__init__.py`) is checked together
(`verzeichnis`) when it is imported.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

from core.errors import ConfigError

Enrich = Callable[[Any, Any, Any], Awaitable[list[dict]]]
"""`enrich(state, deps, such)`: the plugin's context for the turn."""


@dataclass(frozen=True, eq=False)
class Plugin:
    name: str
    """Its channel in `MemoryRecord.plugins`."""
    enrich: Enrich
    """`async enrich(state, deps, such) -> list[dict]`."""
    suchschluessel: bool = True
    """It reads the search key (`such`); False: it may start before the key is there."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigError(f"plugin {self.name!r}: its name must be a word (letters, digits, _)")
        if not inspect.iscoroutinefunction(self.enrich):
            raise ConfigError(f"plugin {self.name!r}: enrich must be an async function, not {self.enrich!r}")
        if not isinstance(self.suchschluessel, bool):
            raise ConfigError(f"plugin {self.name!r}: suchschluessel must be True or False")

    def __repr__(self) -> str:
        return f"Plugin({self.name!r})"


def verzeichnis(declared: Iterable[Plugin]) -> tuple[Plugin, ...]:
    """The declared plugins, checked together: each entry a `Plugin`, no name twice. Raises
    ConfigError naming what is wrong."""
    declared, seen = tuple(declared), set()
    for p in declared:
        if not isinstance(p, Plugin):
            raise ConfigError(f"the plugin list holds {p!r}, which is no Plugin declaration "
                              "(a plugin module declares `PLUGIN = Plugin(...)`)")
        if p.name in seen:
            raise ConfigError(f"the plugin list holds two plugins named {p.name!r}")
        seen.add(p.name)
    return declared
