"""Character agent: the instructions that shape the character (seed 004: user-defined static seed
text in [IDENTITAET], at most three active, then a consolidation question).

The order comes from the planner's model (prompts/default/planner.rules.txt); its parameters are
read as `CharakterAuftrag`: an action — add (`anweisung`), lift (`deaktivieren`), replace
(`ersetzen`) or merge (`zusammenfassen`, a replace of several) — the new text, and the
instruction(s) it concerns (`alt`, `alt2`: words of their text or their place 1–3; `id`: the
stored id). A reference is matched by id, by place, else by the best overlap of words; no match
or a tie asks back, naming the candidates (`finden`).

A fourth instruction is not added: the result asks to consolidate (status `rueckfrage`), naming
the three active ones and what is missing (`fehlt`: `alt`), and the fourth is kept aside for a
while (`MemoryConfig.instruction_pending_s`): the answer — lift one, or merge two — brings it in
with the same change; so does the fourth order completed with the one to give way (`alt`).
Each change is one store operation (`beziehung.anweisungen_aendern`, lift and add in one
transaction) with the turn's step as idempotency key; a turn that runs again gets the first run's
result. Every branch is named in the log and as a decision entry (`charakter.auftrag`, and
`charakter.verweis` for each reference)."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from pipeline.agents.agent import Agent, schreibschluessel
from core.beziehung import Anweisung, AnweisungsAenderung
from core.state import AgentResult, Auftrag

NAME = "charakter"
log = logging.getLogger("novaberg.agent.charakter")

HINZU = ("anweisung", "anlegen", "hinzufuegen", "aufnehmen", "neu")
AUFHEBEN = ("deaktivieren", "aufheben", "entfernen", "loeschen", "streichen")
ERSETZEN = ("ersetzen", "aendern", "tauschen", "zusammenfassen")
"""The action words the planner's model may write, by the action they mean (the first of each is
the one the prompt names)."""

KURZ = 60
"""The longest an instruction is quoted in a question or a result (characters)."""

_STOPP = frozenset("""
    der die das den dem des ein eine einen einem einer eines und oder mit ohne von vom zu zum zur im
    in am an auf aus bei fuer ueber um als wie so sehr mehr nicht kein keine auch noch nur mal doch
    du dich dir dein deine ich mich mir mein meine er sie es wir ihr ihn ihm bist bin ist sind sei
    seid sein soll sollst sollte willst kannst kann immer ab jetzt bitte welche welcher welches diese
    dieser dieses jene alte alten neue neuen anweisung anweisungen nummer nr platz weg raus
""".split())
_ORDINAL = re.compile(r"(erst|zweit|dritt|viert|fuenft|letzt)e[nrs]?")
_ORDINAL_PLATZ = {"erst": 1, "zweit": 2, "dritt": 3, "viert": 4, "fuenft": 5}
_UMLAUT = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})


def _woerter(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", str(text).casefold().translate(_UMLAUT))


def _kurz(text: str, n: int = KURZ) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n].rsplit(" ", 1)[0].rstrip(",;:.") + " ..."


def _liste(anweisungen: list[Anweisung]) -> str:
    teile = [f"'{_kurz(a.text)}'" for a in anweisungen]
    return teile[0] if len(teile) == 1 else ", ".join(teile[:-1]) + " und " + teile[-1]


@dataclass
class CharakterAuftrag:
    """The parameters of a character order as the planner's model writes them into the order's
    free `parameter` object (flat short texts, `llm_json.FREI_WERT`, at most three)."""

    aktion: str
    """`anweisung`, `deaktivieren` or `ersetzen` (merge is a replace of several); "" when the
    model wrote none of the known action words."""
    text: str = ""
    """The new instruction (`anweisung`, `ersetzen`), the merged one (`zusammenfassen`)."""
    verweise: list[str] = field(default_factory=list)
    """The instructions the order concerns: `id` (the stored id), `alt`, `alt2` (words of their
    text, or their place 1–3 among the active ones, oldest first)."""
    verweis_ids: set[str] = field(default_factory=set)
    """Which of `verweise` came as `id`: matched against the stored ids only."""

    @classmethod
    def lesen(cls, auftrag: Auftrag | None) -> "CharakterAuftrag":
        p = (auftrag.parameter if auftrag else None) or {}
        wort = str((auftrag.aktion if auftrag else "") or "").strip().casefold().translate(_UMLAUT)
        aktion = ("anweisung" if wort in HINZU else "deaktivieren" if wort in AUFHEBEN
                  else "ersetzen" if wort in ERSETZEN else "")
        verweise, ids = [], set()
        for key in ("id", "alt", "alt2"):
            v = " ".join(str(p.get(key) if p.get(key) is not None else "").split())
            if v and v not in verweise:
                verweise.append(v)
                if key == "id":
                    ids.add(v)
        return cls(aktion=aktion, text=" ".join(str(p.get("text") or "").split()), verweise=verweise,
                   verweis_ids=ids)


@dataclass
class Treffer:
    """How a reference was matched: `wie` is `id`, `platz`, `woerter`, `unbekannt` or `mehrdeutig`."""

    wie: str
    anweisung: Anweisung | None = None
    kandidaten: list[Anweisung] = field(default_factory=list)
    """No match: every active instruction; a tie: the tied ones."""
    punkte: dict[int, int] = field(default_factory=dict)


def _platz(woerter: list[str], n: int) -> int | None:
    """The place (1-based) a reference names: "2", "die zweite", "Nr. 3", "die letzte"."""
    rest = [w for w in woerter if w not in _STOPP]
    if len(rest) != 1:
        return None
    w = rest[0]
    if w.isdigit():
        return int(w)
    m = _ORDINAL.fullmatch(w)
    if m is None:
        return None
    return n if m.group(1) == "letzt" else _ORDINAL_PLATZ[m.group(1)]


def _gleiche_woerter(a: str, b: str) -> bool:
    """The same word, or the same stem ("frech"/"frecher", "Botanik"/"botanisch")."""
    if a == b:
        return True
    if min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)):
        return True
    gemeinsam = 0
    for x, y in zip(a, b):
        if x != y:
            break
        gemeinsam += 1
    return gemeinsam >= 5


def finden(verweis: str, aktiv: list[Anweisung], *, nur_id: bool = False) -> Treffer:
    """The active instruction a reference means: its stored id, else its place among the active
    ones (oldest first, as the consolidation question lists them), else the one sharing the most
    words with the reference (stems count; function words do not). A reference that matches
    nothing, or two instructions equally well, finds none."""
    ids = {a.id: a for a in aktiv}
    ziffern = verweis.strip().lstrip("#")
    if ziffern.isdigit() and nur_id:
        a = ids.get(int(ziffern))
        return Treffer("id", a) if a else Treffer("unbekannt", kandidaten=list(aktiv))
    woerter = _woerter(verweis)
    platz = _platz(woerter, len(aktiv))
    if platz is not None:
        if 1 <= platz <= len(aktiv):
            return Treffer("platz", aktiv[platz - 1])
        if platz in ids:  # not a place among the active ones: a stored id
            return Treffer("id", ids[platz])
        return Treffer("unbekannt", kandidaten=list(aktiv))
    gesucht = [w for w in dict.fromkeys(woerter) if w not in _STOPP] or list(dict.fromkeys(woerter))
    punkte = {a.id: sum(any(_gleiche_woerter(w, x) for x in _woerter(a.text)) for w in gesucht) for a in aktiv}
    best = max(punkte.values(), default=0)
    if best == 0:
        return Treffer("unbekannt", kandidaten=list(aktiv), punkte=punkte)
    beste = [a for a in aktiv if punkte[a.id] == best]
    if len(beste) > 1:  # a tie: the one that holds the reference as a phrase, if only one does
        phrase = " ".join(gesucht)
        ganz = [a for a in beste if phrase in " ".join(_woerter(a.text))]
        if len(ganz) != 1:
            return Treffer("mehrdeutig", kandidaten=beste, punkte=punkte)
        beste = ganz
    return Treffer("woerter", beste[0], punkte=punkte)


def _ergebnis(aktion: str, out: AnweisungsAenderung) -> tuple[AgentResult, str]:
    """The agent's result for the store's answer to a change, and the branch's name."""
    neu, weg, aktiv, status = out.neu, out.aufgehoben, out.aktiv, out.status
    if aktion != "deaktivieren" and len(weg) > 1:
        aktion = "zusammenfassen"
    elif aktion == "anweisung" and weg:
        aktion = "ersetzen"
    if status == "voll":
        vorgemerkt = out.vorgemerkt
        angabe = "welche Anweisung fuer die neue weichen soll, oder welche zwei zusammengefasst werden"
        frage = (f"Es gelten schon {len(aktiv)} Anweisungen, mehr gehen nicht: {_liste(aktiv)}. "
                 + (f"Welche davon soll fuer die neue ('{_kurz(vorgemerkt.text)}') weichen"
                    if vorgemerkt else "Welche davon soll weichen")
                 + ", oder sollen zwei davon zu einer zusammengefasst werden?")
        return AgentResult(agent_name=NAME, status="rueckfrage", ergebnis={
            "aktion": "konsolidieren", "frage": frage, "fehlt": "alt", "angabe": angabe,
            "aktiv": [a.model_dump() for a in aktiv], "vorgemerkt": vorgemerkt.id if vorgemerkt else None}), \
            "konsolidieren"
    if status == "vorhanden":
        return AgentResult(agent_name=NAME, status="verworfen", ergebnis={
            "aktion": aktion, "grund": "genau diese Anweisung schon gilt"}), "schon_vorhanden"
    if status == "nicht_aktiv":
        return AgentResult(agent_name=NAME, status="verworfen", ergebnis={
            "aktion": aktion, "grund": "die gemeinte Anweisung inzwischen nicht mehr gilt"}), "nicht_mehr_aktiv"
    if weg and neu and len(neu) == 1:
        if len(weg) == 1:
            text, zweig = f"Anweisung '{_kurz(weg[0].text)}' durch '{_kurz(neu[0].text)}' ersetzt", "ersetzt"
        else:
            text, zweig = f"Anweisungen {_liste(weg)} zu '{_kurz(neu[0].text)}' zusammengefasst", "zusammengefasst"
    elif weg and neu:
        text, zweig = f"Anweisung(en) {_liste(weg)} aufgehoben und {_liste(neu)} aufgenommen", "zusammengefasst"
    elif weg:
        text, zweig = f"Anweisung aufgehoben: {_liste(weg)}", "aufgehoben"
    else:
        text, zweig = f"Anweisung aufgenommen: {_liste(neu)}", "aufgenommen"
    return AgentResult(agent_name=NAME, status="abgeschlossen", ergebnis={
        "aktion": aktion, "id": (neu or weg)[0].id, "neu": [a.id for a in neu],
        "aufgehoben": [a.id for a in weg], "beschreibung": text}), zweig


def _fertig(deps, zweig: str, result: AgentResult, **inputs) -> AgentResult:
    log.info("charakter: %s (%s)", zweig, result.status)
    deps.trace.decision(NAME, f"{NAME}.auftrag", zweig, {**inputs, "status": result.status})
    return result


def _rueckfrage(frage: str, fehlt: str | None = None, angabe: str = "") -> AgentResult:
    """A question back; `fehlt` names the parameter the answer supplies and `angabe` says it in
    words (the keys the other agents' questions carry, for the planner's pending order)."""
    ergebnis = {"frage": frage}
    if fehlt:
        ergebnis |= {"fehlt": fehlt, "angabe": angabe}
    return AgentResult(agent_name=NAME, status="rueckfrage", ergebnis=ergebnis)


@dataclass
class _Lauf:
    """One order's run: what every step of it reads."""

    deps: Any
    s: Any
    """The turn's stimulus."""
    cfg: Any
    """The memory's settings (`MemoryConfig`)."""
    key: dict[str, str]
    """The step's idempotency key (`schreibschluessel`)."""
    a: CharakterAuftrag
    aktion: str


async def dispatch_charakter(state, deps) -> AgentResult:
    a = CharakterAuftrag.lesen(state.plan.auftrag)
    genannt = state.plan.auftrag.aktion if state.plan.auftrag else None
    aktion = _aktion(a, genannt)
    if not aktion:
        return _fertig(deps, "aktion_unklar", _rueckfrage(
            "Soll ich eine Anweisung aufnehmen, aufheben oder ersetzen, und welche?", "aktion",
            "ob eine Anweisung aufgenommen, aufgehoben oder ersetzt werden soll"), aktion=genannt)
    if aktion == "anweisung" and not a.text:
        return _fertig(deps, "ohne_text", _rueckfrage("Wie genau soll sich die Figur veraendern?", "text",
                                                      "wie genau sich die Figur veraendern soll"), aktion=aktion)
    lauf = _Lauf(deps, state.stimulus, deps.services.memory_cfg, schreibschluessel(state, NAME), a, aktion)
    if aktion == "anweisung" and not a.verweise:
        return await _aufnehmen(lauf)
    return await _aendern(lauf)


def _aktion(a: CharakterAuftrag, genannt: str | None) -> str:
    """The order's action; a text with neither a known action nor a reference is a new instruction."""
    if not a.aktion and a.text and not a.verweise:
        log.warning("charakter: fallback aktion_als_anweisung: action %r is none of the known ones; the text "
                    "is added as a new instruction", genannt)
        return "anweisung"
    return a.aktion


async def _aufnehmen(lauf: _Lauf) -> AgentResult:
    """A new instruction naming none to give way: added, or kept aside when three are active."""
    s, cfg = lauf.s, lauf.cfg
    out = await lauf.deps.store.beziehung.anweisungen_aendern(s.user_id, s.character_id, neu=[lauf.a.text],
                                max_active=cfg.max_active_instructions,
                                vormerken=cfg.instruction_pending_s > 0, **lauf.key)
    result, zweig = _ergebnis(lauf.aktion, out)
    return _fertig(lauf.deps, "schon_erledigt" if out.wiederholt else zweig, result, aktion=lauf.aktion,
                   aktiv=len(out.aktiv), grenze=cfg.max_active_instructions)


async def _aendern(lauf: _Lauf) -> AgentResult:
    """An order concerning active instructions: each reference matched, then one change (lift,
    replace, merge) with the instruction kept aside where it comes in."""
    deps, s, cfg, aktion = lauf.deps, lauf.s, lauf.cfg, lauf.aktion
    lage = await deps.store.beziehung.anweisungen_lage(s.user_id, s.character_id,
                                 cfg.instruction_pending_s, **lauf.key)
    if lage.schritt is not None:  # this step ran before (the turn runs again): its first result
        result, _ = _ergebnis(aktion, AnweisungsAenderung(**dict(lage.schritt), aktiv=lage.aktiv, wiederholt=True))
        return _fertig(deps, "schon_erledigt", result, aktion=aktion)
    aktiv, vorgemerkt = lage.aktiv, lage.vorgemerkt
    if not aktiv:
        return _fertig(deps, "keine_anweisung", AgentResult(agent_name=NAME, status="verworfen", ergebnis={
            "aktion": aktion, "grund": "gerade keine Anweisung gilt"}), aktion=aktion)
    verweise = _verweise(lauf, aktiv)
    if isinstance(verweise, AgentResult):
        return verweise
    gemeint = _gemeint(lauf, verweise, aktiv)
    if isinstance(gemeint, AgentResult):
        return gemeint
    ids = [g.id for g in gemeint]
    neu = _neue_texte(lauf, gemeint, ids, aktiv, vorgemerkt)
    if isinstance(neu, AgentResult):
        return neu
    if vorgemerkt and vorgemerkt.text in neu:
        log.info("charakter: the instruction kept aside (%s) comes in", vorgemerkt.id)
    out = await deps.store.beziehung.anweisungen_aendern(s.user_id, s.character_id, neu=neu, aufheben=ids,
                                max_active=cfg.max_active_instructions, vormerkung_schliessen=True, **lauf.key)
    result, zweig = _ergebnis(aktion, out)
    return _fertig(deps, "schon_erledigt" if out.wiederholt else zweig, result, aktion=aktion, ids=ids,
                   vorgemerkt=vorgemerkt.id if vorgemerkt and vorgemerkt.text in neu else None)


def _verweise(lauf: _Lauf, aktiv: list[Anweisung]) -> list[str] | AgentResult:
    """The references of the order (a lift may name its instruction in `text`), or the question
    back when it names none."""
    a, aktion = lauf.a, lauf.aktion
    verweise = list(a.verweise)
    if not verweise and aktion == "deaktivieren" and a.text:
        log.warning("charakter: fallback verweis_aus_text: the order names the instruction to lift in `text`")
        lauf.deps.trace.decision(NAME, f"{NAME}.verweis_quelle", "verweis_aus_text", {"text": a.text})
        verweise = [a.text]
    if not verweise:
        was = "aufheben" if aktion == "deaktivieren" else "ersetzen"
        return _fertig(lauf.deps, "ohne_verweis", _rueckfrage(
            f"Welche Anweisung soll ich {was}? Es gelten: {_liste(aktiv)}.", "alt",
            f"welche Anweisung ich {was} soll"), aktion=aktion, aktiv=len(aktiv))
    return verweise


def _gemeint(lauf: _Lauf, verweise: list[str], aktiv: list[Anweisung]) -> list[Anweisung] | AgentResult:
    """The active instructions the references mean (each once), or the question back for the
    first reference that matches none or several."""
    deps, gemeint = lauf.deps, []
    for v in verweise:
        t = finden(v, aktiv, nur_id=v in lauf.a.verweis_ids)
        deps.trace.decision(NAME, f"{NAME}.verweis", t.wie, {"verweis": v, "punkte": t.punkte,
                                                              "id": t.anweisung.id if t.anweisung else None})
        if t.anweisung is None:
            log.info("charakter: reference %r: %s among %d active instructions", v, t.wie, len(aktiv))
            frage = (f"Zu '{_kurz(v)}' passt keine Anweisung. Es gelten: {_liste(aktiv)}. Welche ist gemeint?"
                     if t.wie == "unbekannt" else
                     f"Zu '{_kurz(v)}' passen mehrere Anweisungen: {_liste(t.kandidaten)}. Welche ist gemeint?")
            return _fertig(deps, f"verweis_{t.wie}", _rueckfrage(frage), aktion=lauf.aktion, verweis=v,
                           kandidaten=[k.id for k in t.kandidaten])
        if t.anweisung not in gemeint:
            gemeint.append(t.anweisung)
    return gemeint


def _neue_texte(lauf: _Lauf, gemeint: list[Anweisung], ids: list, aktiv: list[Anweisung],
                vorgemerkt: Anweisung | None) -> list[str] | AgentResult:
    """The instructions the change brings in, or the question back for a replace without a text."""
    a, aktion = lauf.a, lauf.aktion
    verbunden = None
    if len(gemeint) > 1 and aktion != "deaktivieren" and (aktion == "anweisung" or not a.text):
        verbunden = "; ".join(" ".join(g.text.split()).rstrip(".;") for g in gemeint)
        log.warning("charakter: fallback zusammenfassung_verbunden: no merged text given; the %d texts are "
                    "joined", len(gemeint))
        lauf.deps.trace.decision(NAME, f"{NAME}.zusammenfassung", "zusammenfassung_verbunden", {"ids": ids})
    if aktion == "deaktivieren":
        # the answer to the consolidation question: the instruction kept aside comes in where one goes
        return [vorgemerkt.text] if vorgemerkt else []
    if aktion == "anweisung":
        # a new instruction with the one(s) it takes the place of (the consolidation question's
        # answer, completed by the planner): it replaces one, or comes in beside the merged two
        log.info("charakter: a new instruction naming %d to give way: replaced", len(gemeint))
        return [verbunden, a.text] if verbunden else [a.text]
    text = a.text or verbunden
    if not text and vorgemerkt:
        text = vorgemerkt.text
    if not text:
        return _fertig(lauf.deps, "ohne_text", _rueckfrage(
            f"Wie soll die neue Anweisung lauten, die {_liste(gemeint)} ersetzt?", "text",
            "wie die neue Anweisung lauten soll"), aktion=aktion, ids=ids)
    neu = [text]
    frei = lauf.cfg.max_active_instructions - (len(aktiv) - len(gemeint)) - 1
    if vorgemerkt and frei > 0 and vorgemerkt.text != text:
        neu.append(vorgemerkt.text)  # a merge left room: the instruction kept aside comes in too
    return neu

AGENT = Agent(name=NAME, dispatch=dispatch_charakter, bedarf=("plan",))
"""Reads its order (the `plan` record) besides the stimulus; nothing else reaches it."""
