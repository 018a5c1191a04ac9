"""The store's side of the memory operations: the implementations behind the typed clients of
`memory/clients.py`, which a node calls (`await deps.store.lesepfad.erinnern(user, character, ...)`)
and the store deployment runs here with its pooled connections; a node in a pair actor holds no
connection. Long-term memory is read through `lesepfad.erinnern` only (memory/lesepfad.py).
"""
from __future__ import annotations

from core.errors import StoreError
from memory import (aufzeichnungen, beziehung, bibliothek, charaktere, clients, dashboard, dateien, erasure,
                    erinnerungen, lesepfad, lzg, notizen, pg, ruecknahme, timeline, ziele)

_MODULES = {"lzg": lzg, "lesepfad": lesepfad, "ziele": ziele, "bibliothek": bibliothek, "aufzeichnungen": aufzeichnungen,
            "dateien": dateien, "timeline": timeline, "notizen": notizen, "beziehung": beziehung,
            "charaktere": charaktere, "pg": pg, "dashboard": dashboard, "erasure": erasure,
            "ruecknahme": ruecknahme, "erinnerungen": erinnerungen}

OPS = {f"{c.MODULE}.{name}": getattr(_MODULES[c.MODULE], name) for c in clients.MODULES for name in c.ops()}
"""The operations the store deployment runs, by the name the clients send: exactly those
`memory/clients.py` declares (a declaration without its implementation fails here, at import)."""


class PoolStore(clients.StoreOps):
    """The store's typed clients run in-process on a pool: the same operations, for the benchmarks
    and tests that hold a pool themselves. `calls` records each (name, args, kwargs)."""

    def __init__(self, pool):
        super().__init__(self._run)
        self.pool = pool
        self.calls: list[tuple] = []

    async def _run(self, op: str, args: tuple, kwargs: dict):
        self.calls.append((op, args, kwargs))
        return await lookup(op)(self.pool, *args, **kwargs)

    async def load_pair(self, user_id: str, character_id: str) -> dict:
        """The character row and the pair's profiles, as the store deployment's `load_pair`."""
        return await pg.load_pair(self.pool, user_id, character_id)


class UnknownOperation(StoreError, KeyError):
    pass


def lookup(name: str):
    try:
        return OPS[name]
    except KeyError:
        raise UnknownOperation(f"no memory operation {name!r}") from None
