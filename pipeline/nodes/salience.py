"""salience (background): annotate the turn (kern, intentionen), score its salience — the
model's importance, the human's arousal and the goal pull `zielsog_roh` — and decide the
pending writes: a KZG entry when the turn matters, a delegation when one was named. A named
delegation is a knowledge gap: its curiosity boost from the pair's activated goals
(`memory.ziel_vektoren`, seed 001 §4; `pipeline/wissensluecken.py`) travels with it, and a gap
the goals pull on goes to the front of the pixie's queue.

No tags: nothing read them, and seed 001 §3.1 records why none should (the lesson of Chat 30:
metadata as string tags and a distilled core in place of the words destroyed the emotional
information; the remedy is passing the words on whole). The KZG entry keeps the turn's words and
its emotion as fields; the model is no longer asked for tags (fewer output tokens a turn)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pipeline.llm_json import ask_json
from pipeline.node import Node
from pipeline.services import Deps
from core.state import DelegationSchreiben, HintergrundRecord, KzgSchreiben, TurnState, current_reply
from pipeline.wissensluecken import NEUGIER_VORRANG, neugier_boosts

NAME = "salience"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "draft", "pruefung", "urteil", "perzeption", "memory", "hintergrund"),
    writes=("hintergrund",),
)
KZG_SCHWELLE = 0.35


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kern: str = ""
    intentionen: list[str] = Field(default_factory=list)
    wichtigkeit: float = 0.3
    delegation: str = ""


def score(wichtigkeit: float, arousal: float, zielsog: float) -> float:
    return round(min(1.0, 0.5 * wichtigkeit + 0.3 * arousal + 0.2 * zielsog), 4)


async def _wissensluecke(state: TurnState, deps: Deps, aufgabe: str) -> DelegationSchreiben:
    """The named task as a knowledge gap with its curiosity boost from the activated goals (one
    embedding, only when a goal with a vector was activated); decision `salience.neugier`."""
    m = state.memory
    if m is None or not m.ziel_vektoren:
        deps.trace.decision(NAME, "salience.neugier", "keine_ziele", {})
        return DelegationSchreiben(aufgabe=aufgabe)
    vec = await deps.embedder.embed(deps.trace, aufgabe)
    b = neugier_boosts({"aufgabe": vec}, m.ziel_vektoren, m.aktivierte_ziele)["aufgabe"]
    deps.trace.decision(NAME, "salience.neugier", "vorrang" if b["boost"] >= NEUGIER_VORRANG else "hinten_an", b,
                        threshold=NEUGIER_VORRANG)
    return DelegationSchreiben(aufgabe=aufgabe, neugier=b["boost"])


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    # a human's turn kept on its own (Nova's chain failed) has no reply: his words are scored alone
    antwort = current_reply(state) if state.draft else ""
    name = state.pair.character_name if state.pair else s.character_id
    answer, outcome = await ask_json(deps, NAME, _Antwort, {"character_name": name, "mensch": s.text, "antwort": antwort})
    a = answer or _Antwort(kern=s.text[:200])
    arousal = state.perzeption.arousal if state.perzeption else 0.3
    zielsog = state.memory.zielsog_roh if state.memory else 0.0
    sal = score(min(max(a.wichtigkeit, 0.0), 1.0), arousal, zielsog)
    writes = []
    if sal >= KZG_SCHWELLE:
        writes.append(KzgSchreiben(inhalt=(f"{s.text} — {antwort}" if antwort else s.text)[:500],
                                   emotion=state.perzeption.emotion if state.perzeption else None, arousal=arousal))
    if a.delegation.strip():
        writes.append(await _wissensluecke(state, deps, a.delegation.strip()[:300]))
    deps.trace.decision(NAME, "salience.schreiben", "kzg" if sal >= KZG_SCHWELLE else "nichts",
                        {"salienz": sal, "zielsog_roh": zielsog, "antwort": outcome}, threshold=KZG_SCHWELLE)
    prev = state.hintergrund or HintergrundRecord()
    return {"hintergrund": prev.model_copy(update={"kern": a.kern[:300] or s.text[:200], "intentionen": a.intentionen[:5],
                                                   "pending_writes": prev.pending_writes + writes})}
