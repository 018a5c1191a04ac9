"""zielbildung (background): Nova's goals in this relationship, taken up from what the human says
he wants or plans.

Whose goals: Nova's, one set per relationship. Seed 001 speaks of them only as hers — the search
key is "eine Mischung aus Frage und Novas aktivierten Zielen" (§3.3a), "die Frage plus Novas
Motivation" (§3.2a) — and holds them per pair: "Der Enricher liest die Ziele des Paares, nicht alle
Ziele Novas. Beide Pfade … reichen ihr Turn-Paar an `ziel_paar_bestimmen()` weiter … Wer das
Turn-Paar direkt als Ziel-Paar verwendet, liest auf einem der beiden Pfade nichts" (§5): both
chains read the same goals of the pair (nova, mensch); the human chain holds no goals of its own.
The seed names no source. The one this node reads is what the human says he wants: a companion's
motivation in a relationship is what matters to the person she is with, and nothing else in a turn
states a goal. So his plan becomes her goal within the pair, weighted with how firmly he stated it
(her motivation follows his), and it is activated, reinforced and fades as hers (§3.3a, §5);
Nova's own thought (`herkunft` ≠ user) forms none.

Seed 001 activates, reinforces and shifts with the pair's goals (§3.3a, §5) but names no node
that forms them; this one does, after the reply left. One model call reads the human's message;
a named goal is embedded and compared with the pair's active goals: the same goal again
(cosine ≥ ZIEL_GLEICH_SCHWELLE) is reinforced — its forgetting curve restarts, the anchor stays —
otherwise a new goal is formed with its horizon (kurz, mittel, lang). Every turn leaves one
decision entry `zielbildung.ziel`. Each write carries the turn: a redelivered job (same turn_id)
finds what the turn did already and does nothing twice.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from core.beziehung import PaarZiel
from memory.vectors import cosine
from memory.ziele import HORIZONTE, ziel_paar_bestimmen
from pipeline.llm_json import ask_json, wort
from pipeline.node import Node
from pipeline.services import Deps
from core.state import TurnState

NAME = "zielbildung"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair"),
    writes=(),
)
ENTSCHEIDUNG = "zielbildung.ziel"
ZIEL_GLEICH_SCHWELLE = 0.80
"""Cosine at or above which a named goal is an existing one, for all-MiniLM-L6-v2: the same goal
in other words lay at 0.81–0.93 (»Nächstes Jahr einen Marathon laufen« / »Ich möchte immer noch
den Marathon nächstes Jahr schaffen« 0.81), related other goals below (»Einen Halbmarathon laufen«
/ »Einen Marathon laufen« 0.74)."""
HORIZONT_STANDARD = "mittel"

log = logging.getLogger("novaberg.node.zielbildung")


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    ziel_genannt: bool = False
    ziel: str = ""
    horizont: str = wort(HORIZONTE, HORIZONT_STANDARD)
    motivation: float = 0.5


@dataclass(frozen=True)
class Ziel:
    inhalt: str
    horizont: str
    motivation: float


def ziel_aus(answer: _Antwort | None) -> Ziel | None:
    """The goal the model named, checked: None when it named none."""
    if answer is None or not answer.ziel_genannt or not answer.ziel.strip():
        return None
    horizont = answer.horizont
    if horizont not in HORIZONTE:
        log.warning("zielbildung: fallback horizont_unbekannt: %r is no horizon; %s is used", horizont,
                    HORIZONT_STANDARD)
        horizont = HORIZONT_STANDARD
    return Ziel(answer.ziel.strip()[:200], horizont, round(min(max(answer.motivation, 0.0), 1.0), 4))


def naechstes(goals: list[PaarZiel], vec) -> tuple[PaarZiel | None, float | None]:
    """The active goal closest to the named one and its cosine; (None, None) without goals."""
    scored = [(cosine(vec, g.embedding), g) for g in goals if g.embedding is not None]
    if not scored:
        return None, None
    c, best = max(scored, key=lambda x: x[0])
    return best, round(c, 6)


async def _festhalten(deps: Deps, pair: tuple[str, str], turn_id: str, ziel: Ziel, goals: list[PaarZiel],
                      vec) -> tuple[str, dict]:
    """Reinforce the same goal or form a new one, once for the turn; (outcome, decision inputs)."""
    gleich, aehnlichkeit = naechstes(goals, vec)
    inputs = {"ziel": ziel.inhalt, "horizont": ziel.horizont, "motivation": ziel.motivation,
              "aehnlichstes": gleich.id if gleich else None, "aehnlichkeit": aehnlichkeit}
    if gleich is not None and aehnlichkeit >= ZIEL_GLEICH_SCHWELLE:
        neu = await deps.store.ziele.wiederholung_verstaerken(gleich.id, turn_id, ziel.motivation)
        return ("verstaerkt" if neu else "schon_erledigt"), {**inputs, "id": gleich.id}
    out = await deps.store.ziele.bilden(*pair, ziel.inhalt, ziel.horizont, ziel.motivation, vec,
                                quelle_turn=turn_id)
    return ("gebildet" if out.neu else "schon_erledigt"), {**inputs, "id": out.id}


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    if s.herkunft != "user":  # Nova's own thought names no goal of the human
        deps.trace.decision(NAME, ENTSCHEIDUNG, "kein_nutzerreiz", {})
        return {}
    pair = ziel_paar_bestimmen((s.character_id, s.user_id), "character")
    frueher = await deps.store.ziele.turn_ereignis(*pair, s.turn_id)
    if frueher is not None:
        log.info("zielbildung: turn %s %s goal %d already (a redelivered job): nothing written", s.turn_id,
                 frueher.art, frueher.id)
        deps.trace.decision(NAME, ENTSCHEIDUNG, "schon_erledigt", {"id": frueher.id, "war": frueher.art})
        return {}
    answer, outcome = await ask_json(deps, NAME, _Antwort, {"character_name": state.pair.character_name,
                                                           "mensch": s.text})
    ziel = ziel_aus(answer)
    if ziel is None:
        deps.trace.decision(NAME, ENTSCHEIDUNG, "kein_ziel" if answer is not None else f"kein_ziel_{outcome}",
                            {"antwort": outcome})
        return {}
    vec = await deps.embedder.embed(deps.trace, ziel.inhalt)
    goals = await deps.store.ziele.load_goals(*pair)
    ergebnis, inputs = await _festhalten(deps, pair, s.turn_id, ziel, goals, vec)
    deps.trace.decision(NAME, ENTSCHEIDUNG, ergebnis, inputs, threshold=ZIEL_GLEICH_SCHWELLE)
    log.info("zielbildung: %s goal %d %s (%s) for %s:%s", ergebnis, inputs["id"], deps.settings.said(ziel.inhalt),
             ziel.horizont,
             s.user_id, s.character_id)
    return {}
