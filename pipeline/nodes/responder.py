"""responder (seed 004): write Nova's reply from a script, not a report.

System message, what is stable for the pair, byte-identical across turns so the engine reuses the
prefix: [ROLLE], on an impulse turn [EIGENER GEDANKE], then [REGELN] and the binding blocks last:
[DIREKTIVEN], [PERSON A — IHR WESEN]. User message: [FRUEHER IM GESPRAECH] (the session summary,
once turns have left the window), [GESPRAECHSVERLAUF], then the blocks that change from turn to turn
in the order of seed 004 §3.1 ([SZENE], [PERSON A — WER SIE IST], [PERSON A — IHRE EMOTION],
[PERSON B — WER ER IST], [ZWISCHEN BEIDEN], [AUFGABE], [PERSON B — WIE ER GERADE DA IST],
[INHALT]), then [AKTUELLER PROMPT] (or, on an impulse turn, the opening in its place, §4),
[DEIN SPRACHSTIL] and the binding [REGIE FUER DIESE REPLIK] last. The profiles stand after the
history with the per-turn blocks: the background (praegung, selbstbild) grows them after every turn,
and before the history each growth would make the engine re-read the whole history (prompts/README.md).
Where each block and rule of seed 004 §3/§4 lives: prompts/README.md.

The reply's token budget follows the span haltungsraum chose (`antwort_budget`); a reply that still
hits it is closed at its last full sentence (`pipeline/satzende.py`, decision `responder.kappung`).
"""
from __future__ import annotations

import logging
import re

from pipeline import satzende, vocab
from pipeline.figur import du_fassung, einsetzen, sein_name
from pipeline.node import Node
from pipeline.nodes.ei_calc import DECAY, VERLAUF_MAX, stil_des_turns, vektor
from pipeline.nodes import reducer
from pipeline.services import Deps
from core.state import DraftRecord, EmotionsEintrag, HaltungRecord, SessionTurn, TurnState
from pipeline.timefmt import local_now, wochentag

NAME = "responder"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "memory", "perzeption", "emotion", "gravitation", "plan", "landschaft", "haltung",
           "verfasser"),
    writes=("draft",),
)
DEFAULT_SPANNE = f"{HaltungRecord().umfang}, {HaltungRecord().spanne}"
"""The span of the direction when haltungsraum did not run: the record's defaults (`mittel`)."""
ENERGIE_AROUSAL = 0.7
"""EI micro: from this arousal on, mirror his energy (seed 004 §3.2 b)."""
HOHER_AROUSAL = 0.6
"""EI micro: the vent and the anti-therapist building blocks need at least this arousal."""
VENTIL_INTENTIONEN = {"hilferuf", "emotionaler_ausdruck"}
"""EI micro: with high arousal, these intentions ask for a vent, not an analysis."""
RUECKBEZUG_MIN = 3
"""EI micro: the look back needs this many entries in his emotion history and a change of direction."""
TAG = re.compile(r"^\s*(?:\[[^\W\d][\w\-]*(?:\s*\|[^\]\n]*)?\](?!\()\s*)+")
"""Salience tags at the start of a stored turn (`[emotionaler_ausdruck | freude | emotional] …`),
stripped before the turn enters the history (seed 004 §4)."""

log = logging.getLogger("novaberg.node.responder")


def _verlauf(turns: list[SessionTurn]) -> str:
    if not turns:
        return "(Das Gespraech beginnt gerade.)"
    lines = []
    for i, t in enumerate(turns, 1):
        info = f" ({t.emotion}, a={t.arousal:.1f})" if t.emotion and t.arousal is not None else ""
        lines.append(f"----- Turn {i}{info} -----\n{t.sprecher}: {TAG.sub('', t.inhalt)}")
    # the count closes the history: in every header ("Turn 3 von 4", seed 004 §4) it changed the
    # first header each turn, and the engine could reuse none of the history (prompts/README.md)
    n = len(turns)
    lines.append(f"----- {n} Turn{'s' if n != 1 else ''}, Turn {n} ist der neueste -----")
    return "\n".join(lines)


def _or(text: str, fallback: str) -> str:
    return text.strip() or fallback


def _haltung_text(h) -> str:
    naehe = "nah" if h.naehe >= 0.65 else ("zurueckhaltend" if h.naehe <= 0.35 else "offen")
    waerme = "warm" if h.waerme >= 0.7 else "freundlich"
    return f"{naehe}, {waerme}"


def wesen(p, person: str = "Person B") -> str:
    """[PERSON A — IHR WESEN], the binding block last (seed 004 §3.1): the character's instructions,
    her way of speaking and how she sounds, from her character record (a card's `{{user}}` is
    `person`: his name when known)."""
    name = p.character_name
    teile = [einsetzen(x, name, person) for x in [p.charakter_anweisung] + p.anweisungen if x.strip()]
    if p.sprechweise.strip():
        teile.append(f"Wie {name} spricht: {einsetzen(p.sprechweise, name, person)}")
    if p.beispieldialog.strip():
        teile.append(f"So klingt {name} (Beispiele fuer ihren Ton, nicht woertlich wiederholen):\n"
                     f"{einsetzen(p.beispieldialog, name, person).strip()}")
    return "\n".join(teile) or f"{name} ist warm, neugierig und aufmerksam."


def achsen(h) -> str:
    """The attitude's axes for [SZENE] (seed 004 §3.3: the situation in three grains, "sechs Achsen —
    darunter die Initiative"): every quantity haltungsraum sets — Umfang, Naehe, Waerme, Energie,
    Initiative. The seed counts six and names only the initiative; the attitude here has five, and
    all five stand in the scene (prompts/README.md). Nothing when haltungsraum did not run."""
    if h is None:
        return ""
    return (f" Achsen: Umfang {h.umfang}, Naehe {h.naehe:.1f}, Waerme {h.waerme:.1f}, Energie {h.energie}, "
            f"Initiative {h.initiative:.1f} (hoch: sie fuehrt das Gespraech, niedrig: sie folgt ihm).")


def _saetze(text: str) -> str:
    """A grown profile (one sentence a line, newest last) on one line."""
    return " ".join(x.strip() for x in text.split("\n") if x.strip())


def zwischen_beiden(p) -> str:
    """[ZWISCHEN BEIDEN]: both directions, labelled (seed 004 §3.3) — (nova, mensch) and
    (mensch, nova) are different statements, not two versions of one."""
    name = p.character_name
    zeilen = [f"{label}: {einsetzen(_saetze(value), name)}" for label, value in (
        (f"Wie {name} Person B sieht", p.nova_beziehung), (f"Wie Person B {name} begegnet", p.mensch_beziehung))
        if value.strip()]
    return "\n".join(zeilen) or "Die beiden kennen sich noch nicht lange."


CHARS_PER_TOKEN = 2.0
"""Characters per token of the prompt, estimated low: SmolLM2's tokenizer reads this prompt's German,
markers and figures at 2.2–2.7 (a prompt estimated at 2.5 ran past a 4096-token context at 2.39);
tests/stores/test_nodes_chain_parts.py counts the built prompt with the real tokenizer."""
TRIM_BLOCK = 4  # the history is cut in blocks, not turn by turn, so the cached prefix survives
LAGE_RESERVE_TOKENS = 1500
"""The room the history's cut keeps for the blocks after it (the turn's blocks, the prompt, the
style and the direction), in tokens: a fixed reserve, not their length this turn. Their length
changes every turn; a cut reckoned against it moved back and forth from turn to turn, and each move
changed the history's start, so the engine reused nothing of the prompt after the system message.
Against the reserve the cut moves only as the history itself grows: between the session window's
block cuts the history grows at its end. Turns whose blocks outgrow the reserve cut further
(`fallback verlauf_ueber_reserve`). A context too small for it keeps half of what the stable part
of the prompt leaves."""


def _cut(turns: list[SessionTurn], fits) -> tuple[list[SessionTurn], int]:
    """The oldest turns dropped, a block at a time, until `fits(history's characters)`."""
    dropped = 0
    while turns and not fits(len(_verlauf(turns))):
        turns = turns[TRIM_BLOCK:]
        dropped += TRIM_BLOCK
    return turns, dropped


def fit_history(turns: list[SessionTurn], stable_chars: int, turn_chars: int,
                deps: Deps) -> tuple[list[SessionTurn], int, int]:
    """Drop the oldest turns, a block at a time, until the prompt fits the engine's context: first
    against the fixed reserve for the blocks after the history (`LAGE_RESERVE_TOKENS`), so the cut
    does not move with this turn's blocks; then, only when this turn's blocks (`turn_chars`) are
    longer than the reserve and the prompt would not fit, further blocks (the second count,
    `fallback verlauf_ueber_reserve`). `stable_chars`: what stands before the history (the system
    message, the session summary). The reply's room is the widest span's budget, not this turn's:
    the same every turn, so the cut does not move with the span either. Returns the turns, the
    count dropped in all and the count the fallback dropped."""
    from pipeline.node_config import budget as node_budget

    budget = (deps.settings.llm_ctx - node_budget(NAME, deps.settings)) * CHARS_PER_TOKEN
    # a small context keeps half of what the stable part leaves for the history (it, too, the same every turn)
    reserve = min(LAGE_RESERVE_TOKENS * CHARS_PER_TOKEN, (budget - stable_chars) / 2)
    turns, dropped = _cut(turns, lambda n: stable_chars + reserve + n <= budget)
    turns, extra = _cut(turns, lambda n: stable_chars + turn_chars + n <= budget)
    if extra:
        log.warning("responder: fallback verlauf_ueber_reserve: the blocks after the history (%d chars) exceed "
                    "their reserve (%d chars); %d more oldest turns left out to fit the context", turn_chars,
                    reserve, extra)
    return turns, dropped + extra, extra


def _person_a(p, person: str = "Person B") -> str:
    name = p.character_name
    return "\n".join(
        f"{label}: {einsetzen(value, name, person)}" for label, value in (
            ("Wie sie angelegt ist", p.identitaet),
            ("Gewachsene Persoenlichkeit", _saetze(p.nova_kern)),
            ("Was sie gerade beschaeftigt", _saetze(p.nova_adaptiv)),
            ("Emotionale Grundstimmung", _saetze(p.nova_emotions)),
            ("Ihre Art zu kommunizieren", _saetze(p.nova_intentionen)))
        if value.strip()
    ) or f"{name} lernt Person B gerade erst kennen; ihr Bild von sich waechst mit dem Gespraech."


def person_b(p, name: str = "") -> str:
    """[PERSON B — WER ER IST]: his name when his client sent one, his core and what occupies him just
    now (seed 004 §3.1)."""
    figur = p.character_name
    zeilen = [f"Sein Name: {name}"] if name else []  # his own words: no placeholder of a card is filled in
    zeilen += [f"{label}: {einsetzen(_saetze(value), figur)}" for label, value in (
        ("Sein Kern", p.mensch_kern), ("Was ihn gerade beschaeftigt", p.mensch_themen)) if value.strip()]
    return "\n".join(zeilen) or "Noch unbekannt."


def system_message(state: TurnState, pr, model: str) -> str:
    """The blocks stable for the pair; on an impulse turn [EIGENER GEDANKE] before the rules, so the
    binding blocks stay last (seed 004 §3.1)."""
    s, p = state.stimulus, state.pair
    name, person = p.character_name, sein_name(state) or "Person B"
    parts = [pr.render(NAME, "identity", model, character_name=name,
                       szenario=f"\nDie Szene, in der die beiden sich begegnen: {einsetzen(p.szenario, name, person)}"
                       if p.szenario.strip() else "")]
    if s.eigener_gedanke is not None:
        parts.append(pr.render(NAME, "gedanke", model, character_name=name, gedanke=s.eigener_gedanke))
    parts.append(pr.render(NAME, "rules", model, character_name=name,
                           direktiven="\n".join(f"- {d}" for d in p.direktiven) or "Keine.", wesen=wesen(p, person)))
    return "\n\n".join(parts)


def farbton(state: TurnState) -> tuple[str, str]:
    """The scene's colour tone, rewritten for the actor (seed 004 §3.3): the conversation vector
    describes her in the third person as an analyst; the actor reads "Du bist …". Only when
    gv_detail carries one; left out, and logged, when a third-person reference would remain."""
    l = state.landschaft
    if l is None or not l.gv_detail.strip():
        return "", "kein_farbton"
    du = du_fassung(l.gv_detail.strip(), state.pair.character_name)
    if du is None:
        log.warning("responder: fallback farbton_ausgelassen: gv_detail keeps a third-person reference to %s: %r",
                    state.pair.character_name, l.gv_detail[:120])
        return "", "ausgelassen"
    return f" Farbton: {du}", "du_fassung"


def szene(state: TurnState, pr, model: str, now, ton: str) -> str:
    """[SZENE]: landscape, her sector (of her emotion for this reply, after the pull of her
    emotional memories), the attitude's axes, the colour tone and the local time."""
    l, e = state.landschaft, state.emotion
    sektor = vocab.SEKTOR.get(ihr_zustand(state)[0], "neutral") if e else "neutral"
    return pr.render(NAME, "szene", model, character_name=state.pair.character_name,
                     landschaft=f"Landschaft: {l.cluster}. " if l else "",
                     sektor=sektor, achsen=achsen(state.haltung), farbton=ton,
                     wochentag=wochentag(now), datum=now.strftime("%d.%m.%Y"), uhrzeit=now.strftime("%H:%M"))


def ihr_zustand(state: TurnState) -> tuple[str, float]:
    """Her emotion and arousal for this reply: after the pull of her emotional memories
    (emotionale_gravitation), else as ei_calc computed them."""
    g, e = state.gravitation, state.emotion
    if g is not None and g.emotion is not None:
        return g.emotion, g.arousal if g.arousal is not None else e.nova_arousal
    return e.nova_emotion, e.nova_arousal


def nova_verlauf(state: TurnState) -> list[EmotionsEintrag]:
    """Her own emotion history, newest first: this turn's state, then her stored replies."""
    name = state.pair.character_name
    emotion, arousal = ihr_zustand(state)
    out = [EmotionsEintrag(emotion=emotion, arousal=arousal, gewicht=1.0)]
    older = [t for t in reversed(state.memory.session_turns)
             if t.rolle == "assistant" and t.sprecher == name and t.emotion]
    for age, t in enumerate(older[: VERLAUF_MAX - 1], start=1):
        out.append(EmotionsEintrag(emotion=t.emotion, arousal=t.arousal if t.arousal is not None else 0.3,
                                   gewicht=round(DECAY ** age, 6)))
    return out


def _vektor_text(v: str) -> str:
    return f"{v} — {vocab.VEKTOR_LAGE[v]}" if v in vocab.VEKTOR_LAGE else v


def ihre_emotion(state: TurnState, pr, model: str) -> str:
    """[PERSON A — IHRE EMOTION]: her feeling, its course, its direction, and the conflict."""
    e, name = state.emotion, state.pair.character_name
    history = nova_verlauf(state)
    emotion, arousal = ihr_zustand(state)
    return pr.render(NAME, "emotion", model, character_name=name, emotion=emotion,
                     arousal=f"{arousal:.1f}", vektor=_vektor_text(vektor(history)),
                     verlauf=", ".join(f"{h.emotion} ({h.gewicht:.0%}, a={h.arousal:.0%})" for h in history),
                     konflikt=" " + pr.render(NAME, "konflikt", model, character_name=name) if e.konflikt else "")


def _intentionen(state: TurnState) -> list[str]:
    return (state.memory.user_intentionen if state.memory else []) or \
        (state.perzeption.user_intentionen if state.perzeption else [])


def person_b_jetzt(state: TurnState, pr, model: str) -> str:
    """[PERSON B — WIE ER GERADE DA IST]: emotion, vector, register, style, will, and the
    relationship dynamics once, as the situation (seed 004 §3.4)."""
    pz, e = state.perzeption, state.emotion
    # ei_calc's plausibility check: a register that contradicts his emotion is not passed on
    modus = pz.gespraechs_modus if not e or e.modus_plausibel else "unklar"
    return pr.render(NAME, "person_b", model, emotion=pz.emotion, arousal=f"{pz.arousal:.1f}", modus=modus,
                     vektor=_vektor_text(e.emotions_vektor if e else "plateau"),
                     stil=e.sprach_stil if e and e.sprach_stil else "nicht erkannt",
                     wille=", ".join(_intentionen(state)) or "nicht erkannt", dynamik=pz.beziehungs_dynamik)


def lage_blocks(state: TurnState, pr, model: str, now) -> tuple[list[str], list[str], str]:
    """The blocks between the history and the prompt, in the order of seed 004 §3.1: what changes
    from turn to turn and the profiles the background grows; their names, the colour tone's outcome."""
    s, p = state.stimulus, state.pair
    name = p.character_name
    ton, status = farbton(state)
    lage = [szene(state, pr, model, now, ton), pr.render(NAME, "wer_sie_ist", model, person_a=_person_a(p, sein_name(state) or "Person B"))]
    blocks = ["SZENE", "PERSON A — WER SIE IST"]
    if state.emotion:
        lage.append(ihre_emotion(state, pr, model))
        blocks.append("PERSON A — IHRE EMOTION")
    lage.append(pr.render(NAME, "wer_er_ist", model, person_b=person_b(p, sein_name(state)), zwischen=zwischen_beiden(p)))
    blocks += ["PERSON B — WER ER IST", "ZWISCHEN BEIDEN"]
    cut = bool(state.plan and state.plan.task_context_cut)
    if state.plan and state.plan.task_block:
        lage.append(pr.render(NAME, "aufgabe", model, task_block=state.plan.task_block))
        blocks.append("AUFGABE")
    if state.perzeption and s.user_prompt is not None:
        lage.append(person_b_jetzt(state, pr, model))
        blocks.append("PERSON B — WIE ER GERADE DA IST")
    if state.verfasser and state.verfasser.inhalt and not cut:
        lage.append(pr.render(NAME, "inhalt", model, character_name=name, inhalt=state.verfasser.inhalt))
        blocks.append("INHALT")
    welt = reducer.lore(state.memory, name, sein_name(state) or "Person B") if cut and state.memory else ""
    if welt:  # the lorebook's triggered entries: no Verfasser brings them on a cut turn
        lage.append(pr.render(NAME, "welt", model, character_name=name, welt=welt))
        blocks.append("WELT")
    return lage, blocks, status


def richtungswechsel(verlauf: list[EmotionsEintrag]) -> bool:
    """His emotional course turned somewhere: at least RUECKBEZUG_MIN entries, and the valence went
    one way and then the other."""
    if len(verlauf) < RUECKBEZUG_MIN:
        return False
    vals = [vocab.VALENZ.get(h.emotion, 0.0) for h in verlauf]
    deltas = [a - b for a, b in zip(vals, vals[1:]) if a != b]
    return any(x * y < 0 for x, y in zip(deltas, deltas[1:]))


def ei_mikro(state: TurnState) -> list[tuple[str, str]]:
    """The EI micro direction (seed 004 §3.2 b): only the building blocks this situation calls for.
    Length is the attitude's `umfang` in the direction; the relationship dynamics stand once, as the
    situation. On an impulse turn Person B said nothing new: what answers his message is left out."""
    e, pz = state.emotion, state.perzeption
    if e is None:
        return []
    reiz = state.stimulus.user_prompt is not None
    arousal = pz.arousal if pz else e.ei_arousal
    teile = [
        ("energie", reiz and arousal >= ENERGIE_AROUSAL),
        ("vektor", e.emotions_vektor in vocab.EI_MIKRO_VEKTOR),
        ("ventil", reiz and arousal >= HOHER_AROUSAL and bool(VENTIL_INTENTIONEN & set(_intentionen(state)))),
        ("anti_therapeut", reiz and arousal >= HOHER_AROUSAL and e.emotions_vektor in ("spirale", "absturz")),
        ("rueckbezug", richtungswechsel(e.emotions_verlauf)),
    ]
    name = state.pair.character_name
    return [(k, einsetzen(vocab.EI_MIKRO_VEKTOR[e.emotions_vektor] if k == "vektor" else vocab.EI_MIKRO[k], name))
            for k, an in teile if an]


def ton(state: TurnState) -> str:
    """The tone of [DEIN SPRACHSTIL] (seed 004 §4.1: "Der Ton folgt dem Nutzer sofort", the register
    of the current human turn): the style his message shows; a message that shows none, or an
    impulse turn, keeps the style ei_calc weighed over his last turns."""
    jetzt = stil_des_turns(state.stimulus.user_prompt) if state.stimulus.user_prompt else None
    return jetzt or (state.emotion.sprach_stil if state.emotion else "")


def sprachstil(state: TurnState, pr, model: str) -> str:
    """[DEIN SPRACHSTIL] after the prompt (seed 004 §4.1): landscape, tone, questions, tool, guiding
    line. Left out, and logged, only when all are missing."""
    l, stil = state.landschaft, ton(state)
    if l is None and not stil:
        log.info("responder: [DEIN SPRACHSTIL] omitted: no landscape and no language style this turn")
        return ""
    art = vocab.LANDSCHAFTEN.get(l.cluster) if l else None
    zeilen = [f"Landschaft: {l.cluster.capitalize()}" + (f" — {art.beschreibung}" if art else "")] if l else []
    zeilen.append(" · ".join(x for x in (stil and f"Ton: {stil}", art and f"Fragen: {art.fragen}",
                                         l and f"Werkzeug: {l.werkzeug}, als {l.vehikel}") if x))
    if art:
        zeilen.append(f"Leitgedanke: {art.leitgedanke}")
    return pr.render(NAME, "stil", model, zeilen="\n".join(zeilen))


def regie(state: TurnState, pr, model: str, mikro: list[tuple[str, str]]) -> str:
    """[REGIE FUER DIESE REPLIK], the binding block last: tool, the span in characters and its word
    (seed 004 §3.3: a span and a word, no calculation), attitude, energy, EI micro."""
    h, l = state.haltung, state.landschaft
    return pr.render(NAME, "regie", model, werkzeug=l.werkzeug if l else "Impuls",
                     vehikel=l.vehikel if l else "Aussage", spanne=f"{h.umfang}, {h.spanne}" if h else DEFAULT_SPANNE,
                     haltung=_haltung_text(h) if h else "offen, freundlich", energie=h.energie if h else "ruhig",
                     mikro="".join(f"\n{text}" for _, text in mikro))


def build_messages(state: TurnState, deps: Deps, model: str) -> tuple[list[dict], dict]:
    s, m, pr = state.stimulus, state.memory, deps.prompts
    name = state.pair.character_name
    now = local_now(deps.settings.timezone, s.received_at)  # the turn's time: the prompt follows its state
    system = system_message(state, pr, model)
    lage, blocks, farbton_status = lage_blocks(state, pr, model, now)
    # the session summary (seed 001 §3.1) holds what the window no longer shows: before the history
    frueher = pr.render(NAME, "frueher", model, character_name=name, zusammenfassung=m.zusammenfassung) \
        if m.zusammenfassung else ""
    mikro = ei_mikro(state)
    stil = sprachstil(state, pr, model)
    schluss = [x for x in (stil, regie(state, pr, model, mikro)) if x]
    stable = len(system) + len(frueher) + 300  # 300: the markers and the chat template around them
    turn_chars = sum(len(x) for x in lage + schluss) + len(s.text)
    turns, dropped, ueber = fit_history(m.session_turns, stable, turn_chars, deps)
    if dropped:
        log.warning("responder: fallback verlauf_gekuerzt: %d oldest turns left out to fit the context of %d tokens",
                    min(dropped, len(m.session_turns)), deps.settings.llm_ctx)
    common = dict(verlauf=_verlauf(turns), lage="\n\n".join(lage))
    if s.eigener_gedanke is not None:
        mitte = pr.render(NAME, "auftrag", model, character_name=name, **common)
        form = "verlauf_mit_auftrag" if m.session_turns else "auftrag_ohne_verlauf"
    else:
        mitte = pr.render(NAME, "task", model, aktueller_prompt=s.user_prompt, **common)
        form = "verlauf_mit_reiz" if m.session_turns else "reiz_ohne_verlauf"
    user = "\n\n".join(x for x in (frueher, mitte, *schluss) if x)
    inputs = {"eigener_gedanke": s.eigener_gedanke is not None, "verlauf_beitraege": len(m.session_turns),
              "reiz_zeichen": len(s.text), "system_zeichen": len(system), "bloecke": blocks,
              "sprachstil_block": bool(stil), "kontext_schnitt": bool(state.plan and state.plan.task_context_cut),
              "verlauf_gekuerzt": min(dropped, len(m.session_turns)),
              "verlauf_ueber_reserve": min(ueber, len(m.session_turns)), "farbton": farbton_status,
              "ei_mikro": [k for k, _ in mikro], "zusammenfassung_zeichen": len(m.zusammenfassung or "")}
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], {"form": form, **inputs}


def antwort_budget(state: TurnState, deps: Deps) -> int:
    """The reply's token budget for the span haltungsraum chose this turn (the record's default,
    `mittel`, when it did not run): `node_config.antwort_budget`, capped by the responder's override."""
    from pipeline.node_config import antwort_budget as budget_fuer_spanne

    return budget_fuer_spanne(NAME, (state.haltung or HaltungRecord()).spanne_zeichen, deps.settings)


async def antwort(deps: Deps, messages: list[dict], max_tokens: int):
    """One call for the reply; one the budget cut is closed at its last full sentence (`satzende`)."""
    result = await deps.llm.chat(deps.trace, NAME, messages, stream_tokens=True, max_tokens=max_tokens)
    reply = result.content.strip()
    if reply and result.finish_reason == satzende.GEKAPPT:
        reply = satzende.gekappt(deps, NAME, reply, {"budget_token": max_tokens, "token": result.completion_tokens})
    return result, reply


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    model = await deps.llm.model_name()
    messages, info = build_messages(state, deps, model)
    deps.trace.decision(NAME, "responder.nachricht", info.pop("form"), info)
    if deps.settings.log_utterances:  # the prompt holds the history, the memories and the profiles
        log.debug("Responder: System-Prompt:\n%s", messages[0]["content"])
    max_tokens = antwort_budget(state, deps)
    result, reply = await antwort(deps, messages, max_tokens)
    # the reply's characters next to the span it was asked for: the measurement of 05.09.2026 (seed 004 §3.3)
    deps.trace.decision(NAME, "responder.ergebnis", "antwort" if reply else "leer",
                        {"zeichen": len(reply), "token": result.completion_tokens,
                         "spanne_zeichen": list(state.haltung.spanne_zeichen) if state.haltung else None,
                         "budget_token": max_tokens, "ende": result.finish_reason,
                         "inhalt_zeichen": len(state.verfasser.inhalt) if state.verfasser else 0})
    if not reply:
        log.warning("responder: fallback leer_wiederholung: empty reply (finish %s), asking once more",
                    result.finish_reason)
        result, reply = await antwort(deps, messages, max_tokens)
        deps.trace.decision(NAME, "responder.ergebnis", "antwort" if reply else "leer",
                            {"zeichen": len(reply), "token": result.completion_tokens, "wiederholung": True,
                             "budget_token": max_tokens, "ende": result.finish_reason})
    return {"draft": DraftRecord(reply=reply, model=result.model or model,
                                 prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                                 reasoning=result.reasoning,
                                 prompt_variant=deps.prompts.variant(NAME, "identity", model))}
