"""enricher (seed 001): Nova's memory interface.

Human chain: the session turns, the user's intentions, the prompt embedding, activated goals with
their strengths and their vectors, and the ungated goal pull — no vector search.
Character chain: the same, plus the session summary (seed 001 §3.1), the query
rewrite (one LLM call, 20 s deadline, every other exit named and logged with the raw utterance
used instead), the perception-gravity shift of the search key, KZG, LZG (anchors + spreading), the
plugin hooks, and the file index as its own channel. One search key serves every reader. The
protocol line names the memories read.

Goals (seed 001 §4): `aktivierte_ziele` (without vectors), `ziel_vektoren` (the vector of each
activated goal by its id; read by salience for the curiosity boost of a knowledge gap,
`pipeline/wissensluecken.py`, the reader §4 names: "der Neugier-Boost der Wissenslücken je
Kandidat") and `zielsog_roh` (salience's goal pull) are in the state. `gravitationsterm` — §4:
"Aggregierter Drive-Term, normiert auf [0, 1]" — is not, on purpose: the seed lists it among the
written fields and names no node that reads it (the goal pull of salience is `zielsog_roh`, kept
apart "damit eine Zahl nicht zwei Wirkungen hat"; the search shift weighs each goal by its own
strength). A field of the turn state that nothing reads is a defect of the node contract
(pipeline/contract.py), so the term stands where the seed's date line says it is passed on, in
[0, 1]: in the `enricher.ziele` decision entry of every turn of both chains, beside the
activations per horizon.
"""
from __future__ import annotations

import asyncio
import logging

from core.errors import StoreError
from memory import session
from memory.config import MemoryConfig
from memory.kzg import KZGIndex
from memory.ziele import Aktivierung, aktivieren, wahrnehmung_verschieben, ziel_paar_bestimmen
from pipeline import plugins
from pipeline.llm_json import ask
from pipeline.node import Node
from pipeline.services import Deps
from core.state import (DateiTreffer, GravitationsPunkt, KzgTreffer, MemoryRecord, Resonanz, SessionTurn, Stimulus,
                        TurnState)
from pipeline.trace import Slot

NAME = "enricher"
NODE = Node(
    name=NAME,
    reads=("stimulus", "perzeption", "emotion"),
    writes=("memory",),
    store_reads=("session", "kzg", "gv", "ziele", "aufzeichnungen", "bibliothek", "lzg", "timeline", "notizen",
                 "charaktere"),
    store_writes=("ziele",),
    optional_reads={"emotion": "the human chain runs before ei_calc; only the character chain's search shift "
                              "uses Nova's sector"},
    # the stores `vorab` reads at the turn's start: nothing the turn runs before the enricher writes them
    at_start_reads=("session", "ziele", "kzg", "lzg", "bibliothek", "charaktere", "aufzeichnungen", "gv"),
    # the character chain's model call (the query rewrite) starts at the turn's start, beside perzeption's:
    # it reads the session and the utterance, nothing the turn writes before the enricher
    model_call_at_start=True,
)
REWRITE_MIN_TURNS = 2
REWRITE_MAX_CHARS = 300  # the plausibility limit of the rewritten key
REWRITE_MAX_TOKENS = 48
REWRITE_VERLAUF_TURNS = 6

log = logging.getLogger("novaberg.node.enricher")


SESSION: Slot[list[SessionTurn]] = Slot("enricher.session")
"""The session's turns, read once per turn (`vorab` starts it; both chains' enricher and the router
take it)."""
ZIELE: Slot[Aktivierung] = Slot("enricher.ziele")
"""The goal pair's activation: both chains read the same goal pair, activated once per turn."""
ZIELE_GELADEN: Slot[list] = Slot("enricher.ziele_geladen")
"""A goal pair's goals (`.of(character_id, user_id)`), read once per turn."""


class SessionDefect(StoreError, RuntimeError):
    """The session holds turns but none could be read: a defect, not an empty conversation."""


async def _session(deps: Deps, user_id: str, character_id: str) -> list[SessionTurn]:
    # both chains of one turn run the enricher: the session is read once per turn (`vorab` starts it)
    return await deps.trace.start_once(SESSION, lambda: _read_session(deps, user_id, character_id))


sitzung = _session
"""The turn's session as the enricher hands it on (read once per turn): the router's early call reads it."""


async def _read_session(deps: Deps, user_id: str, character_id: str) -> list[SessionTurn]:
    # the window moves in blocks (memory/session.fenster_start): the prompts that show it keep their
    # prefix; SESSION_MAX_TURNS is its ceiling (seed 004 §4.1), so it shows between n - 7 and n entries
    turns = await deps.session.load_window(user_id, character_id, deps.settings.session_max_turns, hoechstens=True)
    if not turns:
        stored = await deps.session.count_turns(user_id, character_id)
        if stored:
            # seed 001: an empty history beside existing turns is a defect and must be loud
            raise SessionDefect(f"session of {user_id}:{character_id} holds {stored} turns, read 0")
    return turns


async def _zusammenfassung(deps: Deps, user_id: str, character_id: str) -> str | None:
    """The session summary (seed 001 §3.1): the turns that left the window, folded in by the
    background node `zusammenfassung`; None while none has left it."""
    text = await deps.session.summary_text(user_id, character_id)
    return (text or "").strip() or None


async def _goals(deps: Deps, state: TurnState, raw_vec) -> Aktivierung:
    # both chains read the same goal pair (ziel_paar_bestimmen): activate and reinforce once per turn
    cached = deps.trace.get(ZIELE)
    if cached is not None:
        return cached
    a = await _activate_goals(deps, state, raw_vec)
    deps.trace.put(ZIELE, a)
    return a


async def _activate_goals(deps: Deps, state: TurnState, raw_vec) -> Aktivierung:
    s = state.stimulus
    turn_pair = (s.user_id, s.character_id) if deps.trace.chain == "human" else (s.character_id, s.user_id)
    character_id, user_id = ziel_paar_bestimmen(turn_pair, deps.trace.chain)
    goals = await _load_goals(deps, character_id, user_id)
    a = aktivieren(goals, raw_vec, deps.services.memory_cfg.goal_threshold)
    if a.ohne_embedding:
        log.error("enricher: goals without embedding %s cannot activate", a.ohne_embedding)
    verstaerkt = await deps.store.ziele.verstaerken(a.aktivierte, turn=(s.user_id, s.character_id, s.turn_id)) \
        if a.aktivierte else []
    if verstaerkt:
        deps.trace.decision(NAME, "enricher.ziele_verstaerkung", "verstaerkt", {"ziele": verstaerkt})
    return a


def _load_goals(deps: Deps, character_id: str, user_id: str) -> asyncio.Future:
    """The goal pair's goals, read once per turn (`vorab` starts the read)."""
    return deps.trace.start_once(ZIELE_GELADEN.of(character_id, user_id),
                                 lambda: deps.store.ziele.load_goals(character_id, user_id))


def gravitationsterm(a: Aktivierung) -> float:
    """The summed strengths of the activated goals, normalised onto [0, 1]."""
    total = sum(g.aktivierungs_staerke for g in a.aktivierte)
    return round(total / (1.0 + total), 6)


async def rewrite(deps: Deps, turns: list[SessionTurn], raw: str, sprecher: str = session.PERSON_B) -> tuple[str, str]:
    """The search text and its origin: `rewrite`, or a named exit with the raw utterance.
    `sprecher`: the utterance's label, as the history will carry it (`session.sprecher`)."""
    if not deps.settings.query_rewrite:
        exit_ = "abgeschaltet"
    elif not turns:
        exit_ = "verlauf_leer"
    elif len(turns) < REWRITE_MIN_TURNS:
        exit_ = "zu_wenig_verlauf"
    else:
        # the utterance is the history's last line, as the next turn's history will carry it: the
        # next rewrite's prompt repeats this one up to the reply (prefix reuse)
        verlauf = "\n".join([*(f"{t.sprecher}: {t.inhalt}" for t in session.fenster(turns, REWRITE_VERLAUF_TURNS)),
                             f"{sprecher}: {raw}"])
        text, outcome = await ask(deps, NAME, {"verlauf": verlauf}, prompt="query_rewrite",
                                  timeout_s=deps.settings.query_rewrite_deadline_s)
        if outcome == "aufruf_gescheitert":
            exit_ = "aufruf_gescheitert"
        elif text is None:
            exit_ = "leer"
        else:
            line = text.strip().splitlines()[0].strip()
            if line.lower().startswith("suchanfrage:"):
                line = line[len("suchanfrage:"):].strip()
            line = line.strip('"„“ ')
            if not line:
                exit_ = "leer"
            elif len(line) > REWRITE_MAX_CHARS:
                exit_ = "zu_lang"
            else:
                return line, "rewrite"
    log.warning("enricher: query rewrite exit %s: searching with the raw utterance %s", exit_, deps.settings.said(raw))
    return raw, exit_


def _sprecher(s, turns: list[SessionTurn]) -> str:
    """The utterance's label as the dispatcher will store it: Person B, or her own thought under
    her name, taken from her replies in the history (without one, the thought's mark alone)."""
    if s.eigener_gedanke is None:
        return session.PERSON_B
    name = session.figur_im_verlauf(turns)
    return session.sprecher(name, True) if name else session.GEDANKE.strip()


async def _cluster(deps: Deps, user_id: str, character_id: str) -> str | None:
    """The landscape cluster of the previous turn (gv_node writes it); None: no turn wrote one."""
    if deps.landschaft is None:
        return None
    return await deps.landschaft.cluster(user_id, character_id, deps.trace.turn_id)


def _cluster_vorturn(deps: Deps, cluster: str | None) -> str:
    """The cluster this turn works with (seed 001 §5: always the previous turn's, `paradox` as
    fallback): the named fallback `kein_vorturn` when no turn of the pair wrote one."""
    if cluster is None:
        log.info("enricher: fallback kein_vorturn: no previous turn's landscape cluster; paradox")
    deps.trace.decision(NAME, "enricher.landschaft", "vorturn" if cluster is not None else "kein_vorturn",
                        {"cluster": cluster or "paradox"})
    return cluster or "paradox"


async def _aufzeichnungen(deps: Deps, state: TurnState, suchtext: str, such_vektor) -> list[DateiTreffer]:
    """The file index (seed 001 §3.1a), its own channel beside the plugins. The keyword channel
    reads the words of the utterance and of the search text (the rewrite names what the utterance
    points back to), the dense channel the search key."""
    s = state.stimulus
    worte = s.text if suchtext == s.text else f"{s.text}\n{suchtext}"
    try:
        files = await deps.store.aufzeichnungen.suchen(s.user_id, s.character_id, worte, such_vektor,
                                      deps.services.memory_cfg)
    except Exception as e:  # a failing source leaves its channel empty, loudly
        log.warning("enricher: file index failed (%s: %s); no records this turn", type(e).__name__, e)
        return []
    deps.trace.decision(NAME, "enricher.aufzeichnungen", "treffer" if files.treffer else "keine", {
        "bestand": files.bestand, "kanaele": [h.kanal for h in files.treffer],
        "schwaechster_kosinus": files.schwaechster_kosinus})
    return files.treffer


async def lzg_lesen(store, user_id: str, character_id: str, suchtext: str, such_vektor, cfg: MemoryConfig, *,
                    cluster: str | None = None, nova_sektor: str | None = None) -> Resonanz:
    """The enricher's long-term memory read: the memory read path (`lesepfad.erinnern`) with the
    search text and the shifted search vector, bounded by `cfg.lesepfad_k`. `bench.locomo_recall`
    measures this very function."""
    return await store.lesepfad.erinnern(user_id, character_id, suchtext, such_vektor, cfg,
                            cluster=cluster, nova_sektor=nova_sektor)


async def _nichts(value):
    return value


async def _plugins(deps: Deps, s, such_vektor, turns: list, *, suchschluessel: bool = True) -> dict[str, list[dict]]:
    """The context of every plugin that reads the search key (`suchschluessel`) or of every one that
    does not, read side by side; a failing source leaves its channel empty, loudly. A plugin sees
    the stimulus and the session's turns (a lorebook scans the newest messages)."""
    partial = TurnState.model_construct(stimulus=s, memory=MemoryRecord.model_construct(session_turns=turns))

    async def one(plugin: plugins.Plugin) -> list[dict]:
        try:
            return await plugin.enrich(partial, deps, such_vektor)
        except Exception as e:
            log.warning("enricher: plugin %s failed (%s: %s); its context is empty this turn", plugin.name,
                        type(e).__name__, e)
            return []

    found = [p for p in plugins.PLUGINS if p.suchschluessel == suchschluessel]
    return dict(zip((p.name for p in found), await asyncio.gather(*(one(p) for p in found))))


VORPRUEFUNG: Slot[tuple] = Slot("enricher.vorpruefung")
"""The character chain's pre-check reads, started once per turn."""
FRUEHER_REWRITE: Slot[tuple] = Slot("enricher.rewrite")
"""The character chain's query rewrite, started at the turn's start (`vorab`)."""


@NODE.at_turn_start
def vorab(deps: Deps, s: Stimulus) -> None:
    """The enricher's reads that need nothing of this turn, started at its start beside
    perzeption's model call (the pair actor calls it): the stimulus's vector, the session, the goal
    pair's goals, the character chain's pre-check, and — when that finds memory to search — the
    query rewrite."""
    if s.text:
        deps.embedder.prefetch(deps.trace, s.text)
    deps.trace.start_once(SESSION, lambda: _read_session(deps, s.user_id, s.character_id))
    _load_goals(deps, *ziel_paar_bestimmen((s.user_id, s.character_id), "human"))
    vorpruefung_starten(deps, s.user_id, s.character_id)
    deps.trace.start_once(FRUEHER_REWRITE, lambda: _frueh_umschreiben(deps, s))


def _etwas_zu_suchen(n_kzg: int, has_lzg: bool, bib: dict, n_dateien: int) -> bool:
    return bool(n_kzg > 0 or has_lzg or bib.aktiv or bib.charakter or n_dateien)


async def _frueh_umschreiben(deps: Deps, s: Stimulus) -> tuple[str, str] | None:
    """The rewrite as the character chain would ask it, once the pre-check finds memory to search
    (None: nothing to search, no call)."""
    _, n_kzg, has_lzg, bib, n_dateien, _ = await vorpruefung_starten(deps, s.user_id, s.character_id)
    if not _etwas_zu_suchen(n_kzg, has_lzg, bib, n_dateien):
        return None
    turns = await _session(deps, s.user_id, s.character_id)
    return await rewrite(deps, turns, s.text, _sprecher(s, turns))


async def _umschreiben(deps: Deps, s: Stimulus, turns: list[SessionTurn]) -> tuple[str, str]:
    """The rewrite started at the turn's start, else asked now (the written order, a remote enricher)."""
    frueh = deps.trace.started_in(FRUEHER_REWRITE)
    got = await frueh if frueh is not None else None
    return got if got is not None else await rewrite(deps, turns, s.text, _sprecher(s, turns))


def vorpruefung_starten(deps: Deps, user_id: str, character_id: str) -> asyncio.Future:
    """The character chain's pre-check, once per turn: the summary, the KZG count, whether LZG,
    the library, the character's knowledge and the file index hold anything, the previous turn's
    cluster. The reads are independent: one round trip's time."""
    return deps.trace.start_once(VORPRUEFUNG, lambda: asyncio.gather(
        _zusammenfassung(deps, user_id, character_id), deps.kzg.count(user_id, character_id),
        deps.store.lzg.has_nodes(user_id, character_id),
        deps.store.bibliothek.bestand(user_id, character_id),
        deps.store.aufzeichnungen.bestand(user_id, character_id),
        _cluster(deps, user_id, character_id)))


async def _basis(deps: Deps, state: TurnState) -> tuple[dict, list[SessionTurn], list, Aktivierung]:
    """What both chains read: the session, the stimulus's vector, the goals (with their decision
    entries); returns the record's fields, the turns, the vector and the goals' activation."""
    s = state.stimulus
    # the session and the raw stimulus's vector (the goals need it in every run) at once
    turns, raw_vec = await asyncio.gather(_session(deps, s.user_id, s.character_id),
                                          deps.embedder.embed(deps.trace, s.text))
    intentionen = state.perzeption.user_intentionen if state.perzeption else []
    a = await _goals(deps, state, raw_vec)
    base = dict(session_turns=turns, query_embedding=raw_vec, user_intentionen=intentionen,
                aktivierte_ziele=a.aktivierte, ziel_vektoren=a.ziel_vektoren, zielsog_roh=a.zielsog_roh)
    deps.trace.decision(NAME, "enricher.ziele", "aktiviert" if a.aktivierte else "keine", {
        "ziele": [g.id for g in a.aktivierte], "aktivierte_ziele_count": len(a.aktivierte),
        "aktiviert_je_horizont": a.aktiviert_je_horizont, "ueber_schwelle_je_horizont": a.ueber_schwelle_je_horizont,
        "zielsog_roh": a.zielsog_roh, "gravitationsterm": gravitationsterm(a)})
    deps.trace.decision(NAME, "enricher.verlauf", "verlauf" if turns else "verlauf_leer",
                        {"gelesen": len(turns), "fenster": deps.settings.session_max_turns})
    return base, turns, raw_vec, a


def _nichts_gesucht(deps: Deps, raw_vec, a: Aktivierung, cfg: MemoryConfig) -> None:
    """The character chain's turn without memory to search: no rewrite, no shift, no read."""
    _, exit_, _ = wahrnehmung_verschieben(raw_vec, a, None, cfg, gedaechtnis_suche=False)
    deps.trace.decision(NAME, "enricher.verschiebung", exit_, {"kzg": False, "lzg": False, "bibliothek": 0,
                                                               "dateien": 0})
    _resonanz_melden(deps, None)
    log.info("enricher: no memory yet (KZG, LZG, library, character knowledge and file index empty): no search, "
             "herkunft=%s lzg_resonanz_count=0 lzg_resonanz_ids=[]", exit_)


def _im_hintergrund(aw) -> asyncio.Future:
    """A read started beside the rest; read only, so a failure is noted and nothing undone."""
    f = asyncio.ensure_future(aw)
    f.add_done_callback(lambda t: t.cancelled() or t.exception())
    return f


async def _suchschluessel(deps: Deps, s: Stimulus, turns: list[SessionTurn], raw_vec, anweisung: bool):
    """The search text, its origin and the vector it is searched with before the shift: the raw
    utterance for an instruction (the rewrite started early is dropped), else the rewrite's."""
    if anweisung:
        frueh = deps.trace.started_in(FRUEHER_REWRITE)
        if frueh is not None:
            frueh.cancel()
            log.info("enricher: rewrite_verworfen: the rewrite started at the turn's start is dropped, the "
                     "message is an instruction")
        # imperative override: search the raw utterance
        return s.text, "anweisung", raw_vec
    suchtext, herkunft = await _umschreiben(deps, s, turns)
    such_basis = raw_vec if herkunft != "rewrite" else await deps.embedder.embed(deps.trace, suchtext)
    return suchtext, herkunft, such_basis


def _gravitationspunkte(kzg_hits: list[KzgTreffer], resonanz: Resonanz | None) -> list[GravitationsPunkt]:
    """The emotional memories read (not neutral), KZG's and LZG's, for the search shift's next turn."""
    punkte = [GravitationsPunkt(quelle="kzg", inhalt=h.inhalt, emotion=h.emotion, arousal=h.arousal)
              for h in kzg_hits if h.emotion and h.emotion != "neutral"]
    if resonanz is not None:
        punkte += [GravitationsPunkt(quelle="lzg", inhalt=e.inhalt, emotion=e.emotion, arousal=e.arousal)
                   for e in resonanz.erinnerungen if e.emotion and e.emotion != "neutral"]
    return punkte


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    s = state.stimulus
    cfg = deps.services.memory_cfg
    base, turns, raw_vec, a = await _basis(deps, state)
    if deps.trace.chain == "human":
        return {"memory": MemoryRecord(**base)}
    # pre-check: rewrite, shift and search only when KZG, LZG, the library, the character's knowledge or the
    # file index hold something (`vorab` started it at the turn's start)
    base["zusammenfassung"], n_kzg, has_lzg, bib, n_dateien, vorturn = await vorpruefung_starten(
        deps, s.user_id, s.character_id)
    base["cluster_vorturn"] = cluster = _cluster_vorturn(deps, vorturn)
    has_kzg = n_kzg > 0
    if not _etwas_zu_suchen(n_kzg, has_lzg, bib, n_dateien):
        _nichts_gesucht(deps, raw_vec, a, cfg)
        return {"memory": MemoryRecord(**base)}

    # the plugins that read no search key, and the pair's KZG vectors, read beside the rewrite's model call
    ohne_schluessel = _im_hintergrund(_plugins(deps, s, None, turns, suchschluessel=False))
    index = deps.services.pair_cache(s.user_id, s.character_id).setdefault(
        "kzg_index", KZGIndex(s.user_id, s.character_id))
    kzg_gelesen = _im_hintergrund(deps.kzg.refresh(index) if has_kzg else _nichts(None))
    anweisung = "anweisung" in base["user_intentionen"]
    suchtext, herkunft, such_basis = await _suchschluessel(deps, s, turns, raw_vec, anweisung)
    deps.trace.decision(NAME, "enricher.rewrite", herkunft, {"verlauf": len(turns), "suchtext": suchtext})
    such_vektor, verschiebung, info = wahrnehmung_verschieben(such_basis, a, cluster, cfg,
                                                               intention_anweisung=anweisung)
    deps.trace.decision(NAME, "enricher.verschiebung", verschiebung, {"cluster": cluster, **info})

    nova_sektor = state.emotion.nova_sektor if state.emotion else None
    await kzg_gelesen
    # the sources read side by side: KZG, the read path, the plugins, the file index
    kzg_hits, resonanz, plugin_out, aufzeichnungen, plugin_frueh = await asyncio.gather(
        deps.kzg.search(index, such_vektor, threshold=cfg.kzg_threshold, top_k=cfg.kzg_top_k, refreshed=has_kzg),
        lzg_lesen(deps.store, s.user_id, s.character_id, suchtext, such_vektor, cfg, cluster=cluster,
                  nova_sektor=nova_sektor) if has_lzg else _nichts(None),
        _plugins(deps, s, such_vektor, turns),
        _aufzeichnungen(deps, state, suchtext, such_vektor) if n_dateien else _nichts([]),
        ohne_schluessel)
    plugin_out = {**plugin_frueh, **plugin_out}
    ids = _resonanz_melden(deps, resonanz)
    log.info("enricher: herkunft=%s suchtext=%s verschiebung=%s kzg=%d lzg_resonanz_count=%d lzg_resonanz_ids=%s "
             "bibliothek=%d aufzeichnungen=%d", herkunft, deps.settings.said(suchtext), verschiebung, len(kzg_hits), len(ids), ids,
             len(plugin_out.get("bibliothek", [])), len(aufzeichnungen))
    return {"memory": MemoryRecord(
        **base, kzg=kzg_hits, lzg_resonanz=resonanz, bibliothek=plugin_out.pop("bibliothek", []), plugins=plugin_out,
        such_vektor=[float(x) for x in such_vektor],
        aufzeichnungen=aufzeichnungen, emotionale_gravitationspunkte=_gravitationspunkte(kzg_hits, resonanz))}


def _resonanz_melden(deps: Deps, resonanz: Resonanz | None) -> list[int]:
    """Seed 001 §4: every long-term read names how many memories it read and which
    (`lzg_resonanz_count`, `lzg_resonanz_ids`), a read that found nothing, or did not run, too —
    in the log line and as the turn's `enricher.lzg_resonanz` entry (the pipeline log, where the
    threshold is calibrated from real turns). A read the floor emptied is `cold_start`, with the best
    anchor's cosine against the floor."""
    ids = list(resonanz.ids) if resonanz is not None else []
    kaltstart = resonanz is not None and resonanz.rahmen.kaltstart
    outcome = "nicht_gelesen" if resonanz is None else "cold_start" if kaltstart else "gelesen"
    extra = {"bester_kosinus": resonanz.rahmen.bester_kosinus} if kaltstart else {}
    deps.trace.decision(NAME, "enricher.lzg_resonanz", outcome, {"lzg_resonanz_count": len(ids),
                                                                "lzg_resonanz_ids": ids, **extra},
                        threshold=deps.services.memory_cfg.lesepfad_boden)
    return ids
