"""What the store's operations return (memory/clients.py): one model per shape that comes back
from the store deployment, read by attribute.

These shapes cross the store's process seam (a pair actor, the ingress or a worker reads what the
store deployment returned), so they live here, on the ground floor, where both sides import them.
Unknown keys are ignored, so a store one release newer still reads. An answer that carries one
gives it back as `model_dump(mode="json")`: the same keys, in the same order, as its fields.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.result import TurnResult
from core.wire import KeptTurn


class _Bestand(BaseModel):
    model_config = ConfigDict(extra="ignore")


# ------------------------------------------------------------------------------------ characters
class Charakter(_Bestand):
    """A character as stored (`characters`): her fields and when she was made and last changed."""

    character_id: str
    name: str
    identitaet: str
    """Who she is."""
    sprechweise: str
    """How she speaks."""
    szenario: str
    begruessung: str
    """Her first message to a new pair."""
    beispieldialog: str
    charakter_anweisung: str
    """The instructions her creator gave (seed 004's user-defined seed)."""
    karte_rest: dict[str, Any]
    """Every Character Card field with no place of its own, kept for the export: free-form, as the
    card had it (a part nested too deep comes back as its JSON text)."""
    created_at: str
    """ISO 8601."""
    updated_at: str
    """ISO 8601."""


class CharakterZeile(_Bestand):
    """One character of the list (`charaktere.list_all`)."""

    character_id: str
    name: str
    identitaet: str
    """Its first 200 characters."""
    hat_begruessung: bool
    """Whether she has a first message."""
    created: int
    """Unix seconds."""


class CharakterWissen(_Bestand):
    """One entry of a character's background knowledge (`charakter_wissen`, a card's lorebook)."""

    id: int
    titel: str
    inhalt: str
    schluessel: list[str]
    """The keys that activate the entry."""
    gross_klein: bool
    """Keys match case-sensitively."""
    immer: bool
    """Always active (`constant`)."""
    aktiv: bool
    sekundaer: list[str]
    """The secondary keys (`selektiv`)."""
    selektiv: bool
    logik: str
    """How the secondary keys combine: and_any, not_all, not_any, and_all."""
    ganze_woerter: bool
    reihenfolge: int
    """The placement order."""
    scan_tiefe: int | None
    """How many of the newest messages the keys are looked for in (None: the book's setting)."""


# ---------------------------------------------------------------------------------------- files
class Datei(_Bestand):
    """An uploaded file of a pair (`dateien`), as indexed; its text lies in `abschnitte` chunks."""

    id: int
    name: str
    art: str
    """The file's kind (its format)."""
    inhalt_hash: str
    """SHA-256 of its content: the same content is indexed once per pair."""
    bytes: int
    zeichen: int
    """Characters of its text."""
    thema: str
    zusammenfassung: str
    stichworte: list[str]
    erschliessung: dict[str, Any]
    """How it was indexed: free-form, as the indexing recorded it."""
    created_at: str
    """ISO 8601."""
    abschnitte: int
    """How many chunks it has in `aufzeichnungen`."""


class DateienUmfang(_Bestand):
    """What a pair and its user hold already (`dateien.umfang`)."""

    dateien_paar: int
    """The pair's files."""
    bytes_user: int
    """The user's bytes over all pairs."""


# -------------------------------------------------------------------------------------- library
class BibliothekEintrag(_Bestand):
    """One entry of a pair's library (`autonomous_wissen`), either type."""

    id: int
    typ: str
    """`wissen` (what the reading path reaches) or `bericht`."""
    titel: str
    inhalt: str
    gewicht: float
    aktiv: bool
    schluessel: str | None
    """The idempotency key of the delegation that wrote it."""


class BibliothekBestand(_Bestand):
    """What a pair's library holds (`bibliothek.bestand`, the enricher's pre-check)."""

    lesbar: int
    """The active `wissen` entries with a topic vector: what the reading path can reach."""
    aktiv: int
    """Every active entry, both types."""
    charakter: int
    """The character's own active background knowledge (`charakter_wissen`, shared by all its pairs)."""


class BibliothekZerfall(_Bestand):
    """What one decay of the library's weights did (`bibliothek.zerfall`)."""

    verfallen: int
    """How many entries' weights decayed."""
    kleinstes: float | None
    """The smallest weight among them now (None: none decayed)."""


# ------------------------------------------------------------------------------------- memories
class ErinnerungAus(_Bestand):
    """The turn an item of the memory view came from: its message and date."""

    text: str | None
    time: str
    """ISO 8601."""


class ErinnerungsEintrag(_Bestand):
    """One item of the memory view (`erinnerungen.auflisten`): what Nova remembers about the person."""

    id: str
    """The item's memory id (`knoten-12`, `profil-mensch_kern-…`, `kzg-…`)."""
    art: str
    """What it is: erinnerung, ziel, termin, notiz, profil.<field>, kurzzeit."""
    inhalt: str
    turn_id: str | None
    """The turn it came from (None: from no turn)."""
    seit: str | None
    """Since when it is there, ISO 8601 (None: unknown)."""
    aus: ErinnerungAus | None = None
    """Its turn's message (None: the turn record is gone or the item came from no turn)."""
    abgeloest: Abloesung | None = None
    """A long-term memory that no longer holds: when, and what took its place (None: current)."""


class Abloesung(_Bestand):
    """A superseded memory's end in the memory view: it stays ended when its successor is forgotten."""

    seit: str
    """Since when it no longer holds, ISO 8601."""
    durch: str | None = None
    """The successor's memory id (`knoten-…`; None: ended without one, or the successor was forgotten)."""
    inhalt: str | None = None
    """The successor's text."""
    nachfolger_vergessen: bool = False
    """The successor was forgotten; the old memory is not revived by that, it stays ended."""


class ErinnerungQuelle(_Bestand):
    """An item's text and turn, read before it is forgotten (`erinnerungen.beschreiben`): what was
    derived from it is found by them."""

    inhalt: str
    turn_id: str | None


class Nachvergessen(_Bestand):
    """What went in Postgres with a forgotten item's derived text (`erinnerungen.nachvergessen`)."""

    profil_saetze: int
    """The profile's sentences that repeated it."""
    bibliothek: int
    """The library's entries of its turn."""
    turn_saetze: int
    """The stored turns' sentences that repeated it."""


# ----------------------------------------------------------------------------------- retraction
class Swipe(_Bestand):
    """A reply a turn replaced (a swipe)."""

    turn_id: str
    """The turn whose reply it was."""
    reply: str
    created_at: str
    """ISO 8601."""


class ZurueckgenommeneZeilen(_Bestand):
    """What taking turns back changed in Postgres (`ruecknahme.zuruecknehmen`)."""

    tabellen: dict[str, int]
    """Rows changed per table, by the table's name (`antwort_varianten:gekuerzt`: the swipes
    dropped beyond their limits); a count per table, one entry for each table the step touches."""


# ------------------------------------------------------------------------------------- timeline
class Termin(_Bestand):
    """One entry of a pair's timeline (`timeline.find_by_date_range`, `find_by_keyword`): an
    appointment or a memory anchor, its start in UTC and in the pair's zone."""

    id: int
    typ: str
    """`termin`, or `erinnerungs_anker` (a date a memory is anchored to)."""
    titel: str
    personen: list[str]
    beginn_utc: str
    """ISO 8601."""
    beginn_lokal: str
    """ISO 8601 with the zone's offset."""
    wochentag: str
    """The German weekday of the local start."""
    ende_utc: str | None
    turn_id: str | None
    """The turn that wrote it (None: written by none)."""


class FensterTermin(Termin):
    """An appointment of the proactive window (`timeline.proaktives_fenster`)."""

    bezug: str
    """Its relation to today: `heute`, `morgen`, `in 3 Tagen`, `vor 2 Tagen`, …"""


# ---------------------------------------------------------------------------------------- turns
class StoredTurn(_Bestand):
    """One of a pair's stored turns (Postgres `turns`, `pg.recent_turn_records`): what the session
    history is rebuilt from."""

    turn_id: str
    user_text: str | None
    """The human's message (or Nova's own thought) as the turn stored it."""
    reply: str | None
    """Her reply ("" or None: it failed)."""
    result: TurnResult | KeptTurn | None = Field(default=None, union_mode="left_to_right")
    """The turn's result as stored: a `TurnResult`, or a `KeptTurn` for a turn whose character
    chain failed while the message was kept."""
    created_at: str
    """ISO 8601."""


# ------------------------------------------------------------------------------------ operators
class DecisionRate(_Bestand):
    """How often a branching node took one outcome (`pg.decision_rates`)."""

    entscheidung: str
    outcome: str
    count: int
    rate: float
    """Its share of the node's decisions."""


class ApiKeyInfo(_Bestand):
    """An API key without its secret (`pg.list_api_keys`)."""

    id: int
    user_id: str | None
    is_operator: bool
    label: str
    created_at: str | None
    expires_at: str | None
    revoked_at: str | None
    active: bool
    """Whether it works now (neither revoked nor expired)."""


class TurnStats(_Bestand):
    """Finished turns since a point in time: count and latency percentiles (the turn's own total)."""

    count: int
    p50_ms: float | None
    p95_ms: float | None
    pairs: int


class NodeStats(_Bestand):
    """One node's runs and duration percentiles since a point in time."""

    node: str
    runs: int
    p50_ms: float | None
    p95_ms: float | None


class RecentPair(_Bestand):
    """A pair with turns since a point in time."""

    user_id: str
    character_id: str
    turns: int
    last: str
    """Its newest turn, ISO 8601."""


class NodeRun(_Bestand):
    """One node's run in a turn."""

    seq: int
    node: str
    ms: float | None


class NodeDecision(_Bestand):
    """One decision a node took in a turn."""

    seq: int
    node: str
    entscheidung: str | None
    outcome: str | None
    inputs: Any = None
    """What the decision was taken on: free-form, as the node traced it."""


class PairTurn(_Bestand):
    """One of a pair's last turns with its node durations and decisions (`dashboard.pair_turns`)."""

    turn_id: str
    created_at: str
    user_text: str | None
    reply: str | None
    total_ms: float | None
    herkunft: str | None
    nodes: list[NodeRun]
    decisions: list[NodeDecision]


# ----------------------------------------------------------------------------- long-term memory
class EpisodeReceipt(_Bestand):
    """What the one write of long-term memory did (`lzg.episode_schreiben`)."""

    neu: bool
    """False: the episode's source had nodes already; `ids` are those, and nothing was written."""
    ids: list[int]
    """Every node of the episode, in order."""
    episode: list[int]
    """The utterances written."""
    verdichtungen: list[int]
    """The distilled memories written."""
    anschluss: int | None
    """The pair's earlier utterance of the same session the episode was linked to."""
    resonanz: list[int]
    """The older nodes the distilled memories were linked to (their curves restarted)."""
    abgeloest: list[int] = Field(default_factory=list)
    """The older nodes the episode marked superseded (`Episode.abloesungen`, those of the pair)."""
