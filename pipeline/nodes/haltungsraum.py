"""haltungsraum: Nova's attitude for this reply — `umfang` and its span in characters, nearness,
warmth, energy, initiative (seed 004 §3.3).

The span has three influences since 20.08.2026 (seed 004 §3.3): the room sets `umfang`, the table
`vocab.UMFANG_SPANNE` translates it into characters (halved that day), and the length of the
human's utterance caps it when the turn carries only light intentions (`smalltalk`,
`bestaetigung`, `abschluss`, `humor`). One content intention among them lifts the cap: "Erklaere
mir die Tritiumvorkommen" is short and still asks for length. `spanne_fuer_turn` computes it; the
record carries the span in characters and the words the prompt line shows ("60 bis 175 Zeichen"),
so the line stays a span and a word and the prompt reads no calculation.

Why the default prompts say characters, not sentences: the seed's [REGIE FUER DIESE REPLIK]
carries "Umfang in Zeichen" (§3.1) and "den Umfang als Zeichenspanne" (§3.3). Its measurement of
05.09.2026 found that not every model follows a character span (60–175 asked; the local model gave
226 in the median, the remote model 996) and remedied it on the prompt-model level: the folder of
that one remote model carries its own `responder.rules` with a rule in sentences — explicitly a
second path beside the regie, kept as a provisional measure because it would cap a corridor the
regie widens. That override is per model, not a wording for small local models, so `default/`
keeps the characters; a model measured to ignore them gets its own `prompts/{model_slug}/` file.

`initiative` is read by the responder as one of the attitude's axes in [SZENE] (§3.3: "sechs
Achsen — darunter die Initiative"; `responder.achsen`).
"""
from __future__ import annotations

from pipeline import vocab
from pipeline.node import Node
from pipeline.services import Deps
from core.state import HaltungRecord, TurnState

NAME = "haltungsraum"
NODE = Node(
    name=NAME,
    reads=("stimulus", "perzeption", "emotion", "route", "memory"),
    writes=("haltung",),
)
LEICHT_FAKTOR = 12
"""A light utterance may draw this many times its own length in characters. Set, not measured: the
seed names the cap, not its figure."""
LEICHT_SOCKEL = 80
"""The cap never falls below this many characters (set, not measured)."""


def spanne_text(spanne: tuple[int, int]) -> str:
    """The words of the prompt line for a character span."""
    return f"{spanne[0]} bis {spanne[1]} Zeichen"


def spanne_fuer_turn(umfang: str, reiz_zeichen: int | None, intentionen: list[str]) -> tuple[tuple[int, int], str]:
    """The character span of this turn and how the utterance bore on it: room, table, utterance.

    The cap works only downwards and only on a turn whose intentions are all light; a turn without
    intentions, or without an utterance of the human (her own impulse), keeps the table's span:
    what was not perceived as light is not shortened."""
    unten, oben = vocab.UMFANG_SPANNE[umfang]
    nur_leicht = bool(intentionen) and all(i in vocab.LEICHTE_INTENTIONEN for i in intentionen)
    if reiz_zeichen is None or not nur_leicht:
        return (unten, oben), "kein_deckel" if intentionen else "kein_deckel_ohne_intention"
    deckel = max(LEICHT_SOCKEL, LEICHT_FAKTOR * reiz_zeichen)
    if deckel >= oben:
        return (unten, oben), "deckel_ueber_spanne"
    return (min(unten, deckel // 2), deckel), "deckel_leichte_aeusserung"


def compute(state: TurnState) -> tuple[HaltungRecord, dict]:
    p, e, r = state.perzeption, state.emotion, state.route
    momentum = r.momentum if r else "mid"
    umfang = {"low": "knapp", "mid": "mittel", "high": "ausfuehrlich"}[momentum]
    intentionen = (state.memory.user_intentionen if state.memory else []) or (p.user_intentionen if p else [])
    reiz = state.stimulus.user_prompt
    spanne, deckel = spanne_fuer_turn(umfang, len(reiz) if reiz is not None else None, intentionen)
    dyn = p.beziehungs_dynamik if p else "neutral"
    naehe = {"vertrauen": 0.8, "dankbar": 0.7, "hilfesuchend": 0.7, "neutral": 0.5, "distanz": 0.3,
             "angriff": 0.2}.get(dyn, 0.5)
    valenz = vocab.VALENZ.get(p.emotion if p else "neutral", 0.0)
    waerme = round(min(1.0, 0.6 + (0.3 if valenz < -0.3 else 0.0) + (0.1 if dyn in ("vertrauen", "dankbar") else 0.0)), 3)
    arousal = e.ei_arousal if e else 0.3
    energie = "lebhaft" if arousal >= 0.6 else ("ruhig" if arousal < 0.35 else "gesammelt")
    initiative = {"low": 0.6, "mid": 0.5, "high": 0.3}[momentum]
    rec = HaltungRecord(umfang=umfang, spanne_zeichen=spanne, spanne=spanne_text(spanne), naehe=naehe,
                        waerme=waerme, energie=energie, initiative=initiative)
    return rec, {"grund": f"momentum_{momentum}", "deckel": deckel, "intentionen": list(intentionen),
                 "reiz_zeichen": len(reiz) if reiz is not None else None,
                 "spanne_tabelle": list(vocab.UMFANG_SPANNE[umfang])}


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    rec, info = compute(state)
    deps.trace.decision(NAME, "haltungsraum.umfang", rec.umfang, {**info, "spanne": rec.spanne})
    return {"haltung": rec}
