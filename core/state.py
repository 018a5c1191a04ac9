"""The typed turn state: one record per producer.

Nodes declare the records they read and write; the runner assigns what a node returns with
validation, so a key that no record declares cannot appear (seed 000 §3.5: an undeclared key was
once dropped silently at a node boundary and the self-trigger was lost for months).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.result import TurnResult


Herkunft = Literal["user", "eigener_impuls", "self_trigger"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class _Eintrag(BaseModel):
    """A stored entry as a read returns it and the turn carries it. Unknown keys are ignored (an
    entry a newer store wrote still reads). Read by attribute only: `e["inhalt"]` is a TypeError
    and `e.get(...)` an AttributeError, so no reader agrees on the entry's shape by string keys."""

    model_config = ConfigDict(extra="ignore")

    def __contains__(self, key: object) -> bool:
        """Refused: an optional field is always there (None when the store lacked it), and a model
        iterates its fields as pairs, so `"k" in e` would be False without saying why; read the field."""
        raise TypeError(f"{type(self).__name__}: read the field {key!r} instead of testing for it")


class AusstehenderAuftrag(BaseModel):
    """An order that asked back, with what is known of it."""

    model_config = ConfigDict(extra="forbid")
    agent: str
    aktion: str
    parameter: dict[str, Any] = Field(default_factory=dict)
    """The parameters known (those the order had): free-form, each agent's action names its own."""
    fehlt: list[str] = Field(default_factory=list)
    """The parameters missing, as the agent named them (e.g. `wann`)."""
    angabe: str = ""
    """What is missing, in words (e.g. "Tag und Uhrzeit des Termins")."""
    frage: str = ""
    """The question Nova was given to ask."""
    turn_id: str
    """The turn that asked."""
    turns: int = Field(default=0, ge=0)
    """Human turns since the question that did not concern it."""


class Stimulus(_Record):
    """The input of the turn: exactly one of `user_prompt` / `eigener_gedanke` is set."""

    user_id: str
    character_id: str
    turn_id: str
    user_prompt: str | None = None
    eigener_gedanke: str | None = None
    herkunft: Herkunft = "user"
    received_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    person_name: str | None = None
    """The human's name as his client sent it with the message; his utterance in long-term memory
    carries it (praegung), otherwise `Person B`."""
    datiert: bool = False
    """`received_at` is the message's own date, given by an operator for a replayed conversation
    (`TurnRequest.zeitpunkt`), not its arrival: a retry or a regenerate of the message keeps it."""
    reiz_herkunft: Herkunft | None = None
    """For a self-triggered retry: where the stimulus it repeats came from."""
    gedanke_arousal: float | None = Field(default=None, ge=0, le=1)
    """The arousal an own thought brought with it."""
    thinker_unsicher_retry: bool = False
    """Set on the Thinker's retry (seed 000 §3.5): it never triggers again."""
    ursprung_turn_id: str | None = None
    """The turn a retry repeats."""

    @model_validator(mode="after")
    def _one_stimulus(self):
        if (self.user_prompt is None) == (self.eigener_gedanke is None):
            raise ValueError("exactly one of user_prompt / eigener_gedanke must be set")
        return self

    @property
    def text(self) -> str:
        return self.user_prompt if self.user_prompt is not None else self.eigener_gedanke  # type: ignore[return-value]


class PairRecord(_Record):
    """Written by db_zugriff: the character and both sides' profiles."""

    character_name: str
    charakter_anweisung: str = ""
    identitaet: str = ""
    """Who the character is, as she was created (her card): [PERSON A — WER SIE IST] before what grew."""
    sprechweise: str = ""
    szenario: str = ""
    beispieldialog: str = ""
    nova_kern: str = ""
    nova_adaptiv: str = ""
    nova_emotions: str = ""
    nova_intentionen: str = ""
    nova_beziehung: str = ""
    """How she sees Person B: the pair (nova, mensch)."""
    mensch_kern: str = ""
    mensch_beziehung: str = ""
    """How Person B relates to her: the pair (mensch, nova), a statement of its own (seed 004 §3.3)."""
    mensch_themen: str = ""
    """What occupies Person B just now (seed 004 §3.1: [PERSON B — WER ER IST] "sein Kern · was ihn
    beschäftigt"): the last few sentences praegung wrote, the oldest dropped."""
    direktiven: list[str] = Field(default_factory=list)
    anweisungen: list[str] = Field(default_factory=list)
    nova_emotion: str = "neutral"
    nova_arousal: float = 0.3


class AktiviertesZiel(_Record):
    """A goal of the pair over the activation threshold this turn (seed 001 §3.3a)."""

    id: int
    inhalt: str
    horizont: str
    motivation: float
    aktivierungs_staerke: float


class SessionTurn(_Record):
    """One stored turn of the Redis session; the speaker is named on every turn."""

    rolle: Literal["user", "assistant"]
    sprecher: str
    inhalt: str
    turn_id: str
    herkunft: Herkunft | Literal["begruessung"] = "user"
    """`begruessung`: the character's greeting, the first message of a new pair."""
    time: datetime
    emotion: str | None = None
    arousal: float | None = None
    vektor: str | None = None
    stil: str | None = None
    dynamik: str | None = None
    tone: str | None = None
    kern: str | None = None
    intentionen: list[str] | None = None
    modus: str | None = None
    quelle: str | None = None
    """Source id of an imported turn (e.g. LoCoMo's dia_id)."""
    ziele: list[AktiviertesZiel] | None = None
    """The goals this message of the human activated (seed 001 §3.3a: stored, without vectors)."""
    name: str | None = None
    """The name his client sent with the message (`TurnRequest.name`); the label stays `sprecher`."""
    datiert: bool | None = None
    """True: `time` is the message's own date, given by an operator (`Stimulus.datiert`)."""
    vergessen: bool | None = None
    """True: the entry was edited by a forget (memory/session.verlauf_vergessen): sentences that
    repeated a forgotten item were dropped, an entry left empty holds the placeholder."""


class PerzeptionRecord(_Record):
    """Written by perzeption: how the human's message comes across."""

    emotion: str = "neutral"
    arousal: float = Field(default=0.3, ge=0, le=1)
    intent: str = "austausch"
    tone: str = "neutral"
    gespraechs_modus: str = "austausch"
    beziehungs_dynamik: str = "neutral"
    user_intentionen: list[str] = Field(default_factory=list)
    fallback: str | None = None
    """Name of the fallback taken, if the model's answer was not usable."""


class EmotionsEintrag(_Eintrag):
    """One step of the human's emotion history (pipeline/nodes/ei_calc.verlauf), newest first."""

    emotion: str
    arousal: float = 0.3
    gewicht: float = 1.0
    """Its weight in the history: 1.0 for this turn, decaying with age."""


class EmotionRecord(_Record):
    """Written by ei_calc: the human's emotion history and Nova's own state."""

    emotions_verlauf: list[EmotionsEintrag] = Field(default_factory=list)
    emotions_vektor: str = "plateau"
    ei_arousal: float = 0.3
    sprach_stil: str = "locker"
    modus_plausibel: bool = True
    nova_emotion: str = "neutral"
    nova_arousal: float = 0.3
    nova_sektor: str = "neutral"
    konflikt: bool = False


class Erinnerung(_Eintrag):
    """One memory the read path recalled (memory/lesepfad.erinnern): a long-term node with how it
    was reached."""

    id: int
    inhalt: str
    dimension: str = "erlebnis"
    beobachter: str = "nova"
    """Whose memory it is: `nova`, or `mensch` for the human's own utterance."""
    emotion: str | None = None
    arousal: float | None = None
    gewicht: float = 1.0
    zuletzt: str | None = None
    """The last activation, ISO 8601."""
    quelle: str | None = None
    """The source the node was written from (a turn id, an imported dialogue's id)."""
    zeitpunkt: str | None = None
    """When what it holds was said, ISO 8601 (None: undated)."""
    aktivierung: float = 1.0
    """The top anchor 1.0, the others by their share of its fused score, spread ones decayed."""
    tiefe: int = 0
    """Synapses from its anchor (0: an anchor itself)."""
    pfad: list[int] = Field(default_factory=list)
    """The node ids from the anchor to it."""
    gewicht_wirksam: float | None = None
    """The weight after the forgetting curve."""
    eingefallen_ueber: str = "Anker"
    """The path in words: `Anker`, or `eingefallen über »…«`."""
    cosinus: float | None = None
    """The dense channel's cosine (None: reached by spreading only)."""
    stichwort: float | None = None
    """The keyword channel's BM25 score (None: reached by spreading only)."""
    score: float | None = None
    """The fused score (None: reached by spreading only)."""
    gueltig_bis: str | None = None
    """Until when what it holds was true, ISO 8601 (None: current): a later memory superseded or
    ended it (memory/lzg.py `abloesen`)."""
    nachfolger: str | None = None
    """The memory that took its place (its text; None: current, ended without one, or forgotten)."""

    def als_text(self) -> str:
        """Its text as a prompt reads it: a superseded memory marked as past (`früher: …, seit …: …`)."""
        return zeitlich(self.inhalt, self.gueltig_bis, self.nachfolger)


def zeitlich(inhalt: str, gueltig_bis: str | float | None, nachfolger: str | None) -> str:
    """A memory's text marked as past when it was superseded: `früher: {inhalt}, seit {day}: {successor}`
    (ended without one: `früher: {inhalt} (bis {day})`); a current one as it is."""
    if gueltig_bis is None:
        return inhalt
    bis = (datetime.fromtimestamp(gueltig_bis, timezone.utc) if isinstance(gueltig_bis, (int, float))
           else datetime.fromisoformat(gueltig_bis))
    tag = bis.strftime("%d %B %Y")
    return f"früher: {inhalt}, seit {tag}: {nachfolger}" if nachfolger else f"früher: {inhalt} (bis {tag})"


class ErinnerungsRahmen(_Eintrag):
    """How a long-term read went."""

    anker_anzahl: int = 0
    sprung_tiefe: int = 0
    """The deepest hop the spreading reached."""
    cluster: str = "paradox"
    """The landscape cluster the read was made in (the enricher's: the previous turn's)."""
    nova_sektor: str | None = None
    """Nova's sector, which coloured the spreading (memory/lzg.py `sektor_faktor`; None: uncoloured)."""
    kaltstart: bool = False
    """The named fallback `cold_start`: the best anchor's cosine stayed below the floor; nothing recalled."""
    bester_kosinus: float | None = None
    """On `kaltstart`: the best anchor's cosine."""


class Resonanz(_Eintrag):
    """What Nova recalls for a question (memory/lesepfad.erinnern): the memories best first and
    their ids in the same order."""

    rahmen: ErinnerungsRahmen = Field(default_factory=ErinnerungsRahmen)
    erinnerungen: list[Erinnerung] = Field(default_factory=list)
    ids: list[int] = Field(default_factory=list)


class KzgTreffer(_Eintrag):
    """A short-term memory entry the KZG search found (memory/kzg.KZGIndex.search)."""

    id: str | None = None
    inhalt: str
    emotion: str | None = None
    arousal: float | None = None
    quelle: str | None = None
    time: float | None = None
    """When it was written, epoch seconds."""
    similarity: float
    """Its cosine to the search key."""
    abgeloest_seit: float | None = None
    """When a later turn superseded what it holds, epoch seconds (None: current; memory/kzg.py `abloesen`)."""
    nachfolger: str | None = None
    """What took its place (None: current, or ended without a successor)."""

    def als_text(self) -> str:
        """Its text as a prompt reads it: a superseded entry marked as past."""
        return zeitlich(self.inhalt, self.abgeloest_seit, self.nachfolger)


class BibliothekTreffer(_Eintrag):
    """A library entry near the search key: the pair's own knowledge (memory/bibliothek.suchen) or
    the character's (memory/charaktere.wissen_suchen, with `weg`)."""

    id: int | None = None
    titel: str
    inhalt: str
    gewicht: float
    """On the 0–1 scale of every memory source."""
    similarity: float | None = None
    weg: str | None = None
    """How a character's entry was found: `immer`, `schluessel` (a lorebook's triggered entry) or
    `thema` (near the key); None for the pair's own."""


class DateiTreffer(_Eintrag):
    """A chunk of the pair's files the file index found (memory/aufzeichnungen.suchen), one per file."""

    id: int
    """The chunk's id."""
    datei_id: int | None = None
    """The file it was cut from (None: a record written on its own)."""
    pfad: str
    titel: str
    datei: str | None = None
    """The file's name."""
    zusammenfassung: str | None = None
    auszug: str = ""
    """The chunk's text, cut at `files_excerpt_chars`."""
    cosinus: float | None = None
    """The dense channel's cosine (None: found by its words alone)."""
    kanal: Literal["stichwort", "dicht", "beide"]
    rang: float | None = None
    """The keyword channel's rank (None: not found by its words)."""


class Dateisuche(_Eintrag):
    """What the file index found for a question."""

    treffer: list[DateiTreffer] = Field(default_factory=list)
    bestand: int = 0
    """How many chunks the pair's files hold."""
    schwaechster_kosinus: float | None = None


class GravitationsPunkt(_Eintrag):
    """An emotional memory of the turn's reads (seed 001 §4): pulls Nova's state toward its emotion."""

    quelle: Literal["kzg", "lzg"]
    inhalt: str
    emotion: str
    arousal: float | None = None


class MemoryRecord(_Record):
    """Written by the enricher (seed 001)."""

    session_turns: list[SessionTurn] = Field(default_factory=list)
    query_embedding: list[float] | None = None
    user_intentionen: list[str] = Field(default_factory=list)
    aktivierte_ziele: list[AktiviertesZiel] = Field(default_factory=list)
    """Stored with the human's session turn, without vectors (seed 001 §3.3a)."""
    such_vektor: list[float] | None = None
    """The turn's search key after the perception gravity (seed 001 §4, `such_vektor`): KZG, LZG,
    library and file index searched with it; the services `wissen` and `dateien` get it as their
    declared need (`pipeline/dienste.py`). None on a turn that searched no memory."""
    ziel_vektoren: dict[int, list[float]] = Field(default_factory=dict)
    """The vector of each activated goal by its id (seed 001 §4, `ziel_vektoren`); salience reads
    them for the curiosity boost of a knowledge gap (`pipeline/wissensluecken.py`)."""
    zielsog_roh: float = 0.0
    kzg: list[KzgTreffer] = Field(default_factory=list)
    lzg_resonanz: Resonanz | None = None
    """The long-term read (None: long-term memory was not read this turn)."""
    bibliothek: list[BibliothekTreffer] = Field(default_factory=list)
    aufzeichnungen: list[DateiTreffer] = Field(default_factory=list)
    """The file index's hits (memory/aufzeichnungen.suchen's `treffer`)."""
    plugins: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    """Each plugin's context by its name: free-form, each plugin's entries its own shape (`notizen`:
    name, zusammenfassung, inhalt; `timeline`: the appointments of the proactive window)."""
    emotionale_gravitationspunkte: list[GravitationsPunkt] = Field(default_factory=list)
    zusammenfassung: str | None = None
    """The session summary (seed 001 §3.1): the older turns that left the window, compressed;
    None while none has left it. Written by the background node `zusammenfassung`."""
    cluster_vorturn: str = "paradox"
    """The landscape cluster the pair's previous turn chose (seed 001 §5: read from
    `gv:detail:{user}:{character}`, `paradox` when no turn wrote one): the cluster this turn's
    search shift and spreading read take, and the landscape its reply is shaped by (seed 004 §4.1:
    the landscape follows with a lag). The character chain's enricher reads it; gv_node passes it on."""


class GravitationRecord(_Record):
    """Written by emotionale_gravitation: the pull of emotional memories on Nova's state."""

    term: float = Field(default=0.0, ge=0, le=1)
    richtung: str = "neutral"
    punkte: int = 0
    emotion: str | None = None
    """Nova's emotion for this reply after the pull (None: ei_calc gave none); the responder reads it."""
    arousal: float | None = Field(default=None, ge=0, le=1)
    """Her arousal for this reply after the pull."""


class KontextRecord(_Record):
    """Written by the reducer: the merged memory entries, shaped once per reader (seed 004 §6:
    the generating nodes see the associations, the judging ones the facts)."""

    gedaechtnis_verfasser: str = ""
    """[GEDAECHTNIS] of the Verfasser: every kept entry but the appointment window (it gets the
    asked appointments in [TERMINE], seed 001 §3.2) and every LZG memory, the spread ones with
    the path they came by."""
    gedaechtnis_thinker: str = ""
    """[GEDAECHTNIS] of the Thinker: the Verfasser's with the appointment window."""
    gedaechtnis_tribunal: str = ""
    """The memory part of [FAKTEN] for the tribunal and the corrector: the kept entries, the
    appointments of the window with date and time, the LZG anchors only (no spreading: a fact
    check is no associative read, seed 000 §4.3)."""


class SachlageObjekt(_Eintrag):
    """An acute object of the turn, as sachlage's model named it."""

    name: str
    behauptung: str = ""
    """What the message claims of it."""
    recherche: list[dict[str, Any]] | None = None
    """The web hits that name it (the first object only; None: not researched): free-form, as the
    search provider returns them (`titel`, `url`, `snippet`, …)."""


class SachlageRecord(_Record):
    """Written by sachlage: the acute objects of the turn and the research on the first."""

    objekte: list[SachlageObjekt] = Field(default_factory=list)


class Anker(_Record):
    id: int
    datum: str
    titel: str


class AnkerRecord(_Record):
    """Written by erinnerungsanker: the memory anchors this turn wrote to the timeline; the
    Thinker reads them (seed 000 §3.2: a hit on them is this turn's result, not a conflict)."""

    geschrieben: list[Anker] = Field(default_factory=list)


class RouteRecord(_Record):
    """Written by the router."""

    intent: str = "austausch"
    management: str = "keins"
    needs_web: bool = False
    momentum: str = "mid"
    termine: list[dict] = Field(default_factory=list)
    fallback: str | None = None


class Auftrag(_Record):
    """One order of the planner for an agent (seed 003)."""

    agent: str
    aktion: str
    parameter: dict[str, Any] = Field(default_factory=dict)
    """Free-form: each agent's action takes its own parameters (pipeline/agents/*), as the planner's
    model wrote them."""


class AgentResult(_Record):
    agent_name: str
    status: str
    ergebnis: dict[str, Any] | None = None
    """Free-form: each agent's own result (its `beschreibung` is read by the planner and the
    Thinker; an order that asks back carries `fehlt`, `angabe`, `frage`)."""
    fehler: str | None = None
    auftrag: Auftrag | None = None
    """The order this result answers (set by agent_dispatch): the planner's next decision does
    not repeat what is done."""


class AusstehendLage(_Record):
    """The pair's pending order as the planner read it when a human's message began the turn
    (memory/ausstehender_auftrag.py), and how it read the message against it."""

    vorher: AusstehenderAuftrag | None = None
    """What was pending when the turn began (None: nothing)."""
    gelesen: str = ""
    """The turn that wrote the stored state as read ("" none): the turn's one write goes only over it."""
    lesart: Literal["keins", "ergaenzt", "ersetzt", "unberuehrt", "wiederholt"] = "keins"
    """The message completes the order (`ergaenzt`: it runs first), is a new request (`ersetzt`),
    does not concern it (`unberuehrt`); `wiederholt`: this turn ran before and completed it."""
    ergebnis: AgentResult | None = None
    """`wiederholt`: the result the first run got for the completed order (it does not run again)."""


class PlanRecord(_Record):
    """Written by planner and agent_dispatch."""

    agent_name: str = ""
    """The agent the current order goes to ("" = none: the planner loop ends)."""
    auftrag: Auftrag | None = None
    offen: list[Auftrag] = Field(default_factory=list)
    """The planner's further orders of this turn, in order."""
    agent_results: list[AgentResult] = Field(default_factory=list)
    task_block: str = ""
    task_context_cut: bool = False
    schleifen: int = 0
    ausstehend: AusstehendLage | None = None
    """The pending order of the pair, read once per human turn (None: not read: not a message of
    the human, or no Redis)."""


class LandschaftRecord(_Record):
    """Written by gv_node."""

    cluster: str = "paradox"
    """The landscape the reply is shaped by: the previous turn's choice (`MemoryRecord.cluster_vorturn`,
    seed 004 §4.1: "die Landschaft mit ein bis zwei Turns Verzug"); this turn's choice is stored
    for the next turn (`gv:detail:{user}:{character}`)."""
    gv_detail: str = ""
    werkzeug: str = "Impuls"
    vehikel: str = "Aussage"


class HaltungRecord(_Record):
    """Written by haltungsraum."""

    umfang: str = "mittel"
    spanne_zeichen: tuple[int, int] = (175, 350)
    """The reply's span in characters for this turn (seed 004 §3.3): the row of `umfang` in
    `vocab.UMFANG_SPANNE`, capped by the length of a light utterance."""
    spanne: str = "175 bis 350 Zeichen"
    """What the [REGIE FUER DIESE REPLIK] line says of the span."""
    naehe: float = 0.5
    waerme: float = 0.5
    energie: str = "ruhig"
    initiative: float = 0.5


class VerfasserRecord(_Record):
    """Written by verfasser: content notes in third person."""

    inhalt: str = ""


class DraftRecord(_Record):
    """Written by the responder."""

    reply: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning: str | None = None
    prompt_variant: str = "default"


class RetryNutzlast(_Record):
    """The full stimulus of a turn for its self-triggered retry (seed 000 §3.5): exactly one of
    user_prompt / eigener_gedanke, where it came from, the arousal a thought brought, the turn."""

    reiz_herkunft: Herkunft
    gedanke_arousal: float | None = None
    turn_id: str
    thinker_unsicher_retry: Literal[True] = True
    user_prompt: str | None = None
    eigener_gedanke: str | None = None
    person_name: str | None = None
    received_at: datetime | None = None
    """Only for a message an operator dated (`Stimulus.datiert`): the retry keeps its date."""

    @model_validator(mode="after")
    def _one_stimulus(self):
        if (self.user_prompt is None) == (self.eigener_gedanke is None):
            raise ValueError("exactly one of user_prompt / eigener_gedanke must be set")
        return self


class PruefungRecord(_Record):
    """Written by the thinker: its outcome, the checked reply and the annotations for the tribunal.
    `self_trigger` and its payload are declared here so they reach the pair actor (seed 000 §3.5)."""

    status: str = "uebersprungen"
    reply: str | None = None
    """The reply after the check (corrected, or with the gesture); None = the draft unchanged."""
    node_annotations: list[str] = Field(default_factory=list)
    iterationen: int = 0
    werkzeuge: list[str] = Field(default_factory=list)
    self_trigger: bool = False
    self_trigger_payload: "RetryNutzlast | None" = None


class Urteil(_Eintrag):
    """One round's verdict of the tribunal on the reply."""

    urteil: Literal["ok", "mangel", "unklar"]
    """`unklar`: the model's answer was no usable verdict, the reason in `gruende`."""
    gruende: list[str] = Field(default_factory=list)
    runde: int = 0


class UrteilRecord(_Record):
    """Written by tribunal / evaluate / corrector."""

    urteile: list[Urteil] = Field(default_factory=list)
    bestanden: bool = True
    runden: int = 0
    reply: str = ""


class NovaPerzeptionRecord(_Record):
    """Written by perzeption_assistant: Nova's own reply as perceived."""

    emotion: str = "neutral"
    arousal: float = 0.3
    stil: str = "locker"
    wahrgenommen: bool = True
    """False when the model's perception was unusable: her computed state stands in for the
    emotion and the style is the default, not perceived (selbstbild does not count it)."""


class NovaZustandRecord(_Record):
    """Written by ei_calc_persist: Nova's emotion state after the turn (her computed state, her
    perceived reply, the pull of her emotional memories). The dispatcher commits it with the turn;
    the next turn's db_zugriff starts from it."""

    emotion: str = "neutral"
    arousal: float = 0.3
    vektor: str | None = None
    verlauf: list[dict[str, Any]] = Field(default_factory=list)
    """The newest steps of the human's emotion history (`EmotionsEintrag` as dicts): the dispatcher
    commits the state as JSON (`session.zustand_key`) and the worker stores it in `nova_emotion.verlauf`."""
    stand: datetime
    """The turn's time (its stimulus arrived): of two states of a pair, the later turn's holds."""


class KzgSchreiben(_Record):
    """A short-term memory entry the background worker embeds and stores."""

    art: Literal["kzg"] = "kzg"
    inhalt: str
    emotion: str | None = None
    arousal: float | None = None


class DelegationSchreiben(_Record):
    """A research task for the pixie."""

    art: Literal["delegation"] = "delegation"
    aufgabe: str
    neugier: float = Field(default=0.0, ge=0, le=1)
    """The curiosity boost of this knowledge gap from the pair's activated goals
    (`pipeline/wissensluecken.py`); from `NEUGIER_VORRANG` on the gap goes to the front of the queue."""


Schreibauftrag = Annotated[Union[KzgSchreiben, DelegationSchreiben], Field(discriminator="art")]


class HintergrundRecord(_Record):
    """Written by salience / praegung / aufgriff (background): what they decided to write."""

    kern: str = ""
    intentionen: list[str] = Field(default_factory=list)
    pending_writes: list[Schreibauftrag] = Field(default_factory=list)
    """What the background worker writes after the chain (the nodes' own writes are theirs)."""

    @model_validator(mode="before")
    @classmethod
    def _ohne_tags(cls, data):
        """A background job queued before salience stopped writing `tags` still reads (they go)."""
        if isinstance(data, dict) and "tags" in data:
            return {k: v for k, v in data.items() if k != "tags"}
        return data


class DispatchRecord(_Record):
    """Written by the dispatcher."""

    committed: bool
    """False when the same turn_id had been committed already (nothing written twice)."""
    result: TurnResult
    """What the client receives, and what a repeated turn_id returns."""


class TurnRecords(_Record):
    """Part of a turn state: the records a node reads or writes, each optional (what the runner and
    the node deployment exchange, `core.wire.NodeRunRequest`). Which records it holds are the ones
    it was made with (`set_records`), a record written as None among them."""

    stimulus: Stimulus | None = None
    pair: PairRecord | None = None
    perzeption: PerzeptionRecord | None = None
    emotion: EmotionRecord | None = None
    memory: MemoryRecord | None = None
    gravitation: GravitationRecord | None = None
    kontext: KontextRecord | None = None
    sachlage: SachlageRecord | None = None
    anker: AnkerRecord | None = None
    route: RouteRecord | None = None
    plan: PlanRecord | None = None
    landschaft: LandschaftRecord | None = None
    haltung: HaltungRecord | None = None
    verfasser: VerfasserRecord | None = None
    draft: DraftRecord | None = None
    pruefung: PruefungRecord | None = None
    urteil: UrteilRecord | None = None
    nova_perzeption: NovaPerzeptionRecord | None = None
    nova_zustand: NovaZustandRecord | None = None
    hintergrund: HintergrundRecord | None = None
    dispatch: DispatchRecord | None = None

    def set_records(self) -> dict[str, Any]:
        """The records it was made with, by name."""
        return {k: getattr(self, k) for k in type(self).model_fields if k in self.model_fields_set}


class TurnState(TurnRecords):
    """The whole turn: the stimulus and every record written so far."""

    stimulus: Stimulus


def current_reply(state: TurnState) -> str:
    """The reply as it stands: the tribunal loop's, else the Thinker's, else the responder's draft."""
    if state.urteil and state.urteil.reply:
        return state.urteil.reply
    if state.pruefung and state.pruefung.reply:
        return state.pruefung.reply
    return state.draft.reply


RECORDS = tuple(n for n in TurnState.model_fields if n != "stimulus")
