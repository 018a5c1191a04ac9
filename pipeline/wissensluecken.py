"""Knowledge gaps (`wissensluecken`): the curiosity boost of each candidate from the pair's goals.

Seed 001 §4 names the reader of `ziel_vektoren`: "der Neugier-Boost der Wissenslücken je
Kandidat (`ei/wissensluecken.py::_neugier_boosts`)". A knowledge gap here is a task for later
that salience names for the pixie (a `DelegationSchreiben`): something Nova does not know yet and
will research between conversations. Its boost is how strongly her activated goals pull on it —
the gap's cosine to a goal's vector times that goal's `aktivierungs_staerke`, the strongest goal
counting (the same weighting as the perception gravity of §3.3a, `e_ziel × aktivierungs_staerke`).
A gap at or above `NEUGIER_VORRANG` goes to the front of the pixie's queue: what her goals pull
toward is researched first.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from memory.vectors import cosine

NEUGIER_VORRANG = 0.30
"""Boost from which a gap goes to the front of the queue. A goal activates from 0.40
(`MemoryConfig.goal_threshold`): at the threshold the gap must lie at cosine ≥ 0.75 to it — the
level at which zielbildung measured related goals on all-MiniLM-L6-v2 (»Einen Halbmarathon
laufen« / »Einen Marathon laufen« 0.74) — a strongly activated goal (0.6) from 0.5. Derived from
those measurements, not measured on gaps: a watch value, not a final one."""


def neugier_boosts(kandidaten: Mapping[str, Sequence[float]], ziel_vektoren: Mapping[int, Sequence[float]],
                   aktivierte: Iterable) -> dict[str, dict]:
    """Per candidate: {"boost", "ziel"} — the strongest pull of an activated goal on it (cosine to
    the goal's vector × the goal's activation strength, not below 0) and that goal's id; boost 0.0
    and ziel None without activated goals with a vector."""
    staerken = {z.id: z.aktivierungs_staerke for z in aktivierte if z.id in ziel_vektoren}
    out = {}
    for name, vec in kandidaten.items():
        best, ziel = 0.0, None
        for zid, staerke in staerken.items():
            zug = max(0.0, cosine(vec, ziel_vektoren[zid])) * staerke
            if zug > best:
                best, ziel = zug, zid
        out[name] = {"boost": round(min(best, 1.0), 6), "ziel": ziel}
    return out
