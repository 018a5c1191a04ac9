"""selbstbild (background): Nova grows from her own turns — who she is becoming, what occupies her,
and the relationship in both directions.

Seed 004 names her profiles (`nova_kern`, LZG: who has she become; `nova_adaptiv`, KZG: what
occupies her now; `nova_beziehung`: how she sees Person B) and the pair schema: (nova, mensch) and
(mensch, nova) are different statements, so the relationship grows on both sides — `nova_beziehung`
and `mensch_beziehung` (how Person B relates to her) — and the responder shows them labelled in
[ZWISCHEN BEIDEN]. NODES.md gives `praegung` the slow growth of profiles; its answer already holds
the memories it imprints, so this node asks its own small question after it (one model call, four
short sentences, each empty when the turn shows nothing new).

Growth is slow like the human's core: one sentence per profile and turn at most, the newest few
kept (`GRENZEN`), the oldest dropped, a sentence already there not added again. Each write carries
the step `selbstbild:{turn_id}`: a redelivered job finds it and neither asks nor writes again. On an
unusable answer the named fallback `dynamik` lets Person B's side grow from the relationship
dynamic perceived in their message (seed 004 §3.2 d), Nova's side stays; with no dynamic to go by
it is `unveraendert`. Every run leaves one decision entry `selbstbild.profile`.

Her emotional base mood (`nova_emotions`) and her way of speaking (`nova_intentionen`, seed 004
§3.1) grow without a model token, from how her own reply was perceived (`nova_perzeption`, carried
into the job): the profile row keeps a tally of the emotion and the style perceived in her last
`FENSTER` turns, and a value standing there at least `MINDESTENS` times becomes its sentence
(`EMOTION_SATZ`, `STIL_SATZ`) — one reply in a mood says nothing about her, half her recent turns
do. The tally changes in the same step as the profiles, so a redelivered job counts nothing twice.
`neutral` is counted and never becomes a sentence; a style the model did not perceive (her
computed state stood in) is not counted (named fallback `stil_ungezaehlt`), and a job without the
perception counts nothing (named fallback `ohne_wahrnehmung`). Every run leaves one decision entry
`selbstbild.grundton`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from pipeline.figur import einsetzen
from pipeline.llm_json import ask_json
from pipeline.node import Node
from pipeline.services import Deps
from core.beziehung import ProfilGewachsen
from core.state import TurnState, current_reply

if TYPE_CHECKING:  # the pair actor checks the chains and loads this module: no database driver here
    from memory.beziehung import Beobachtung

NAME = "selbstbild"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "draft", "pruefung", "urteil", "perzeption", "nova_perzeption"),
    writes=(),
)
ENTSCHEIDUNG = "selbstbild.profile"
GRUNDTON = "selbstbild.grundton"
SATZ_ZEICHEN = 56
"""The longest sentence the engine may write per field: four of them and the keys fit the node's
160 tokens also in umlaut-heavy German (measured on SmolLM2's tokenizer: 145 at worst)."""
SATZ_MAX = 160
"""An engine that ignores the schema may write longer: cut to this."""
FELDER = {"selbst": "nova_kern", "thema": "nova_adaptiv", "sie_ueber_ihn": "nova_beziehung",
          "er_zu_ihr": "mensch_beziehung"}
"""Answer field → profile field."""
GRENZEN = {"nova_kern": 5, "nova_adaptiv": 3, "nova_beziehung": 5, "mensch_beziehung": 5, "nova_emotions": 3,
           "nova_intentionen": 3}
"""Sentences kept per profile: the long-term ones as many as the human's core (praegung), what
occupies her now (KZG in seed 004) fewer, so it follows the conversation; her base mood and her
way of speaking a few, so a mood that has passed gives way to the one that recurs now."""
FENSTER = 8
"""Her last turns whose perceived emotion and style the tally keeps."""
MINDESTENS = 4
"""How often a value must stand among them to become a sentence: half her recent turns."""
EMOTION_SATZ = {
    "freude": "{{char}} ist meist froehlich gestimmt.",
    "zufriedenheit": "{{char}} ist meist zufrieden und ausgeglichen.",
    "vertrauen": "{{char}} begegnet dem Gespraech meist mit Vertrauen.",
    "erwartung": "{{char}} ist oft neugierig und gespannt.",
    "ueberraschung": "{{char}} laesst sich oft ueberraschen.",
    "angst": "{{char}} ist oft besorgt.",
    "traurigkeit": "{{char}} ist oft nachdenklich und traurig.",
    "ekel": "{{char}} reagiert oft mit Widerwillen.",
    "aerger": "{{char}} ist oft veraergert.",
    "frustration": "{{char}} ist oft frustriert.",
}
"""The base mood's sentence per perceived emotion (vocab.EMOTIONEN; `neutral` says nothing)."""
STIL_SATZ = {
    "locker": "{{char}} spricht meist locker und ungezwungen.",
    "formell": "{{char}} drueckt sich meist foermlich aus.",
    "fachlich": "{{char}} erklaert gern sachlich und genau.",
    "emotional": "{{char}} spricht oft mit viel Gefuehl.",
    "jugendlich": "{{char}} spricht oft jugendlich und salopp.",
}
"""Her way of speaking's sentence per perceived style (vocab.SPRACHSTILE)."""
DYNAMIK_SATZ = {
    "vertrauen": "Person B begegnet {{char}} mit Vertrauen.",
    "distanz": "Person B haelt Abstand zu {{char}}.",
    "angriff": "Person B ist {{char}} gegenueber auch schon scharf geworden.",
    "hilfesuchend": "Person B sucht bei {{char}} Halt und Hilfe.",
    "dankbar": "Person B ist {{char}} dankbar.",
}
"""The fallback's sentence per relationship dynamic (vocab.BEZIEHUNGSDYNAMIK; `neutral` says
nothing). `{{char}}` is filled where the profile is shown, so a renamed character stays right."""

log = logging.getLogger("novaberg.node.selbstbild")


def _satz():
    return Field(default="", json_schema_extra={"maxLength": SATZ_ZEICHEN})


class _Antwort(BaseModel):
    model_config = ConfigDict(extra="ignore")
    selbst: str = _satz()
    thema: str = _satz()
    sie_ueber_ihn: str = _satz()
    er_zu_ihr: str = _satz()


def saetze_aus(answer: _Antwort, mensch_sprach: bool) -> dict[str, str]:
    """The profile sentences of a usable answer: cleaned, cut, empty ones left out. Person B's side
    grows only from a turn in which Person B spoke."""
    out = {}
    for feld, profil in FELDER.items():
        satz = " ".join(getattr(answer, feld).split())[:SATZ_MAX]
        if profil == "mensch_beziehung" and not mensch_sprach:
            continue
        if satz.strip(" .-–—") and satz.casefold() not in ("leer", "nichts", "keine"):
            out[profil] = satz
    return out


def _bild(p) -> str:
    """What the profiles hold so far, for the model (so it adds only what is new)."""
    zeilen = [f"{label}: {einsetzen(' '.join(text.split()), p.character_name)}" for label, text in (
        ("Wer sie geworden ist", p.nova_kern), ("Was sie gerade beschaeftigt", p.nova_adaptiv),
        (f"Wie {p.character_name} Person B sieht", p.nova_beziehung),
        (f"Wie Person B {p.character_name} begegnet", p.mensch_beziehung)) if text.strip()]
    return "\n".join(zeilen) or "(noch nichts)"


async def _fragen(state: TurnState, deps: Deps) -> tuple[dict[str, str], str, dict]:
    """Ask the model; on an unusable answer take the named fallback. (sentences, outcome, inputs)."""
    s, p = state.stimulus, state.pair
    mensch_sprach = s.user_prompt is not None
    answer, antwort = await ask_json(deps, NAME, _Antwort, {
        "character_name": p.character_name, "bild": _bild(p),
        "mensch": s.user_prompt if mensch_sprach else f"(Person B hat nichts gesagt; {p.character_name} "
                                                      f"spricht aus eigenem Gedanken: {s.text})",
        "antwort": current_reply(state)})
    if answer is not None:
        saetze = saetze_aus(answer, mensch_sprach)
        return saetze, "gewachsen" if saetze else "nichts_neu", {"antwort": antwort}
    dynamik = state.perzeption.beziehungs_dynamik if state.perzeption and mensch_sprach else None
    inputs = {"antwort": antwort, "dynamik": dynamik}
    if dynamik in DYNAMIK_SATZ:
        log.warning("selbstbild: fallback dynamik: the model's answer was not usable (%s); Person B's side grows "
                    "from the perceived dynamic %r, Nova's side stays (%s:%s, turn %s)", antwort, dynamik,
                    s.user_id, s.character_id, s.turn_id)
        return {"mensch_beziehung": DYNAMIK_SATZ[dynamik]}, f"dynamik_{antwort}", inputs
    log.warning("selbstbild: fallback unveraendert: the model's answer was not usable (%s) and no dynamic to go by "
                "(%r); the profiles stay as they are (%s:%s, turn %s)", antwort, dynamik, s.user_id,
                s.character_id, s.turn_id)
    return {}, f"unveraendert_{antwort}", inputs


def _beobachtet(state: TurnState) -> tuple[dict[str, Beobachtung], dict]:
    """What this turn adds to the tally of her base mood and her way of speaking, from how her reply
    was perceived; and the inputs for the decision entry."""
    s, np_ = state.stimulus, state.nova_perzeption
    if np_ is None:
        log.warning("selbstbild: fallback ohne_wahrnehmung: the job carries no perception of her reply; her base "
                    "mood and way of speaking count nothing this turn (%s:%s, turn %s)", s.user_id, s.character_id,
                    s.turn_id)
        return {}, {"wahrgenommen": None}
    beobachtet = {"nova_emotions": dict(wert=np_.emotion, satz=EMOTION_SATZ.get(np_.emotion, ""),
                                               fenster=FENSTER, mindestens=MINDESTENS)}
    if np_.wahrgenommen:
        beobachtet["nova_intentionen"] = dict(wert=np_.stil, satz=STIL_SATZ.get(np_.stil, ""),
                                                     fenster=FENSTER, mindestens=MINDESTENS)
    else:
        log.warning("selbstbild: fallback stil_ungezaehlt: her reply's style was not perceived (her computed state "
                    "stood in); only the emotion %r counts (%s:%s, turn %s)", np_.emotion, s.user_id,
                    s.character_id, s.turn_id)
    return beobachtet, {"emotion": np_.emotion, "arousal": np_.arousal, "wahrgenommen": np_.wahrgenommen,
                        "stil": np_.stil if np_.wahrgenommen else None}


def _grundton_entscheidung(deps: Deps, out: ProfilGewachsen, beobachtet: dict[str, Beobachtung],
                           inputs: dict) -> None:
    """One decision entry for her base mood and way of speaking: grown, counted, or why not."""
    gewachsen = [f for f in out.gewachsen if f in beobachtet]
    if not out.neu:
        outcome = "schon_erledigt"
    elif not beobachtet:
        outcome = "ohne_wahrnehmung"
    else:
        outcome = "gewachsen" if gewachsen else "gezaehlt"
    deps.trace.decision(NAME, GRUNDTON, outcome, {**inputs, "wiederkehr": out.wie_oft,
                                                  "fenster": FENSTER, "gewachsen": gewachsen}, threshold=MINDESTENS)


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    schritt = f"{NAME}:{s.turn_id}"
    if await deps.store.beziehung.profil_schritt_erledigt(s.user_id, s.character_id, schritt):
        log.info("selbstbild: turn %s grew the profiles already (a redelivered job): nothing written", s.turn_id)
        deps.trace.decision(NAME, ENTSCHEIDUNG, "schon_erledigt", {"schritt": schritt})
        deps.trace.decision(NAME, GRUNDTON, "schon_erledigt", {"schritt": schritt})
        return {}
    saetze, outcome, inputs = await _fragen(state, deps)
    beobachtet, grundton = _beobachtet(state)
    # the step is recorded also when nothing grows, so a second delivery does not ask or count again
    out = await deps.store.beziehung.profil_wachsen(s.user_id, s.character_id, schritt, saetze,
                                {k: GRENZEN[k] for k in (*saetze, *beobachtet)}, beobachtet=beobachtet)
    gewachsen = [f for f in out.gewachsen if f in saetze]
    if not out.neu:  # a second delivery raced past the check: the step's record decided
        outcome = "schon_erledigt"
    elif outcome == "gewachsen" and not gewachsen:  # every sentence was there already
        outcome = "nichts_neu"
    deps.trace.decision(NAME, ENTSCHEIDUNG, outcome, {**inputs, "saetze": saetze, "gewachsen": gewachsen})
    _grundton_entscheidung(deps, out, beobachtet, grundton)
    log.info("selbstbild: %s for %s:%s (turn %s): %s", outcome, s.user_id, s.character_id, s.turn_id,
             out.gewachsen)
    return {}
