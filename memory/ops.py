"""The Postgres memory operations that nodes may call through the store deployment, by name.

A node in a pair actor holds no connection; it asks the store deployment to run one of these
with its pooled connections: `await deps.store.call("lesepfad.erinnern", user, character, ...)`.
Long-term memory is read through `lesepfad.erinnern` only (memory/lesepfad.py).
"""
from __future__ import annotations

from core.errors import StoreError
from memory import aufzeichnungen, charakter, charaktere, dashboard, dateien, lesepfad, library, lzg, notizen, pg, timeline, ziele

OPS = {
    "lzg.add_nodes": lzg.add_nodes,
    "lzg.add_nodes_einmal": lzg.add_nodes_einmal,
    "lzg.knoten_der_quelle": lzg.knoten_der_quelle,
    "lzg.add_synapses": lzg.add_synapses,
    "lzg.has_nodes": lzg.has_nodes,
    "lzg.touch": lzg.touch,
    "lesepfad.erinnern": lesepfad.erinnern,
    "ziele.add_goal": ziele.add_goal,
    "ziele.load_goals": ziele.load_goals,
    "ziele.verstaerken": ziele.verstaerken,
    "ziele.bilden": ziele.bilden,
    "ziele.turn_ereignis": ziele.turn_ereignis,
    "ziele.wiederholung_verstaerken": ziele.wiederholung_verstaerken,
    "library.add": library.add,
    "library.bestand": library.bestand,
    "library.suchen": library.suchen,
    "library.vorhanden": library.vorhanden,
    "library.eintraege": library.eintraege,
    "aufzeichnungen.add": aufzeichnungen.add,
    "aufzeichnungen.suchen": aufzeichnungen.suchen,
    "aufzeichnungen.bestand": aufzeichnungen.bestand,
    "dateien.finden": dateien.finden,
    "dateien.speichern": dateien.speichern,
    "dateien.liste": dateien.liste,
    "dateien.loeschen": dateien.loeschen,
    "timeline.add": timeline.add,
    "timeline.move": timeline.move,
    "timeline.delete": timeline.delete,
    "timeline.find_by_date_range": timeline.find_by_date_range,
    "timeline.find_by_keyword": timeline.find_by_keyword,
    "timeline.proaktives_fenster": timeline.proaktives_fenster,
    "notizen.create": notizen.create,
    "notizen.update": notizen.update,
    "notizen.delete": notizen.delete,
    "notizen.find_by_keyword": notizen.find_by_keyword,
    "notizen.find_fulltext": notizen.find_fulltext,
    "notizen.proactive_listing": notizen.proactive_listing,
    "charakter.add_directive": charakter.add_directive,
    "charakter.directives": charakter.directives,
    "charakter.set_directive_active": charakter.set_directive_active,
    "charakter.deactivate_instruction": charakter.deactivate_instruction,
    "charakter.add_instruction": charakter.add_instruction,
    "charakter.instructions": charakter.instructions,
    "charakter.anweisungen_lage": charakter.anweisungen_lage,
    "charakter.anweisungen_aendern": charakter.anweisungen_aendern,
    "charakter.set_profile": charakter.set_profile,
    "charakter.profile": charakter.profile,
    "charakter.profil_wachsen": charakter.profil_wachsen,
    "charakter.profil_schritt_erledigt": charakter.profil_schritt_erledigt,
    "charakter.save_emotion": charakter.save_emotion,
    "charakter.load_emotion": charakter.load_emotion,
    "charaktere.create": charaktere.create,
    "charaktere.get": charaktere.get,
    "charaktere.exists": charaktere.exists,
    "charaktere.list_all": charaktere.list_all,
    "charaktere.update": charaktere.update,
    "charaktere.delete": charaktere.delete,
    "charaktere.wissen": charaktere.wissen,
    "charaktere.wissen_suchen": charaktere.wissen_suchen,
    "pg.decision_rates": pg.decision_rates,
    "pg.revoke_api_keys": pg.revoke_api_keys,
    "pg.recent_turn_records": pg.recent_turn_records,
    "dashboard.turn_stats": dashboard.turn_stats,
    "dashboard.node_stats": dashboard.node_stats,
    "dashboard.recent_pairs": dashboard.recent_pairs,
    "dashboard.pair_turns": dashboard.pair_turns,
}


class PoolStore:
    """The store deployment's operations run in-process on a pool: the same functions by the same
    names, for the benchmarks and tests that hold a pool themselves."""

    def __init__(self, pool):
        self.pool = pool
        self.calls: list[tuple] = []

    async def call(self, op, *args, **kwargs):
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
