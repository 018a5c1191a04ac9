"""The store's operations as typed clients, one class per store module: `deps.store.lzg.add_nodes(…)`
runs `memory.lzg.add_nodes(pool, …)` in the store deployment, where the connections are pooled.

Each method here declares an operation's signature as the caller sees it (the implementation's,
without its first parameter, the pool); `op` sends its arguments, checked against that signature,
through the transport the client was built on (`pipeline.services.StoreClient`, batched to the
store deployment; `memory.ops.PoolStore`, in-process on a pool). The store deployment runs only
the operations declared here (`memory.ops.OPS` is built from them), and a test holds every
declaration to its implementation's signature. Long-term memory is read through
`lesepfad.erinnern` only (memory/lesepfad.py).

It imports nothing heavy: a pair actor holds these clients without loading a database driver.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Iterable, Sequence

if TYPE_CHECKING:
    from datetime import date, datetime

    from core.beziehung import (Anweisung, AnweisungsAenderung, AnweisungsLage, Beziehungsprofil, Direktive, Notiz,
                                NotizUebersicht, NovaEmotion, PaarZiel, ProfilGewachsen, ZielEreignis, Zielbildung)
    from core.bestand import (ApiKeyInfo, BibliothekBestand, BibliothekEintrag, BibliothekZerfall, Charakter, CharakterWissen, CharakterZeile, Datei,
                              DateienUmfang, DecisionRate, EpisodeReceipt, ErinnerungQuelle, ErinnerungsEintrag,
                              FensterTermin, Nachvergessen, NodeStats, PairTurn, RecentPair, StoredTurn, Swipe, Termin,
                              TurnStats, ZurueckgenommeneZeilen)
    from core.state import AktiviertesZiel, BibliothekTreffer, Dateisuche, Resonanz
    from core.wire import Episode
    from memory.beziehung import Beobachtung
    from memory.config import MemoryConfig

Transport = Callable[[str, tuple, dict], Awaitable[Any]]
"""Runs one operation, named `module.function`, with its arguments; returns its result."""


class StoreModule:
    """The operations of one store module (`MODULE`), over a transport."""

    MODULE: ClassVar[str]

    def __init__(self, transport: Transport):
        self._transport = transport

    @classmethod
    def ops(cls) -> tuple[str, ...]:
        """The names of the operations this class declares."""
        return tuple(n for n, v in vars(cls).items() if getattr(v, "store_op", False))


def op(declared: Callable) -> Callable:
    """An operation: the declared method's arguments go to the transport, bound to its signature
    first (a wrong argument fails here, in the caller, not in the store deployment)."""
    name = declared.__name__
    signature = inspect.signature(declared)

    @functools.wraps(declared)
    async def call(self: StoreModule, *args: Any, **kwargs: Any) -> Any:
        signature.bind(self, *args, **kwargs)
        return await self._transport(f"{self.MODULE}.{name}", args, kwargs)

    call.store_op = True  # type: ignore[attr-defined]
    return call


class Lzg(StoreModule):
    """memory/lzg.py"""

    MODULE = "lzg"

    @op
    async def episode_schreiben(self, user_id: str, character_id: str, ep: Episode) -> EpisodeReceipt:
        """The one write of long-term memory nodes (live turns and imports): the exchange's
        utterances verbatim and dated, linked `nachbar` in order and to the same session's previous
        utterance, the distilled memories linked `herkunft` to them and `praegung` to the older
        nodes in `ep.resonanz` (whose curves restart), in one transaction; once per `ep.quelle`."""

    @op
    async def knoten_der_quelle(self, user_id: str, character_id: str, quelle: str) -> list[int]:
        """The ids of the pair's nodes written from one source (a turn id), in order, forgotten ones
        included: what imprinting that turn left already."""

    @op
    async def add_synapses(self, edges: Iterable[tuple[int, int, float]], art: str = "assoziation") -> None:
        """Undirected association: each edge is stored in both directions; a repeated edge keeps the
        stronger weight."""

    @op
    async def has_nodes(self, user_id: str, character_id: str) -> bool: ...

    @op
    async def abloesen(self, user_id: str, character_id: str, alt_id: int, neu_id: int | None, turn_id: str | None, *,
                       seit: datetime | None = None) -> bool:
        """Mark the pair's node `alt_id` superseded by `neu_id` (None: ended): `gueltig_bis` =
        `seit` (default now) and a synapse `abgeloest_durch` from old to new, with their
        before-images under `turn_id` (a rewind removes the mark). Idempotent; False: nothing
        changed."""

    @op
    async def touch(self, ids: list[int], *, turn: tuple[str, str, str] | None = None) -> None:
        """Activation restarts a node's forgetting curve."""


class Lesepfad(StoreModule):
    """memory/lesepfad.py"""

    MODULE = "lesepfad"

    @op
    async def erinnern(
        self,
        user_id: str,
        character_id: str,
        text: str,
        vector,
        cfg: MemoryConfig,
        *,
        k: int | None = None,
        ausbreiten: bool = True,
        cluster: str | None = None,
        nova_sektor: str | None = None,
        boden: bool = True,
    ) -> Resonanz:
        """What Nova recalls for `text` (its embedding `vector`): at most k (default
        `cfg.lesepfad_k`) memories best first, each with its path, channel scores and activation
        (the top anchor 1.0, the others by their share of its fused score).
        `ausbreiten=False` reads the anchors alone (the Thinker's memory_search: seed 000 §4.3).
        With `boden`, a read whose best anchor lies below `cfg.lesepfad_boden` returns nothing
        (`rahmen.kaltstart`, the named fallback `cold_start`)."""


class Ziele(StoreModule):
    """memory/ziele.py"""

    MODULE = "ziele"

    @op
    async def add_goal(
        self, character_id: str, user_id: str, inhalt: str, horizont: str, motivation: float, embedding
    ) -> int: ...

    @op
    async def load_goals(self, character_id: str, user_id: str) -> list[PaarZiel]:
        """The pair's active goals with their faded motivation (`motivation_basis` as stored,
        `behalten` the retention). Goals whose retention fell below VERGESSEN_SCHWELLE are forgotten
        here, on their own read, and are not returned."""

    @op
    async def verstaerken(self, aktivierte: list[AktiviertesZiel], *,
                          turn: tuple[str, str, str] | None = None) -> list[int]:
        """An activated medium-term goal restarts its forgetting curve; its anchor stays."""

    @op
    async def bilden(
        self,
        character_id: str,
        user_id: str,
        inhalt: str,
        horizont: str,
        motivation: float,
        embedding,
        quelle_turn: str | None = None,
    ) -> Zielbildung:
        """A new goal (`neu` True). With `quelle_turn` at most one goal per turn and pair: a
        second call for the same turn (a redelivered job) returns the first goal with `neu` False."""

    @op
    async def turn_ereignis(self, character_id: str, user_id: str, turn_id: str) -> ZielEreignis | None:
        """What this turn did to the pair's goals already (formed or reinforced one), or None."""

    @op
    async def wiederholung_verstaerken(self, ziel_id: int, turn_id: str, motivation: float) -> bool:
        """The human stated an active goal again: its forgetting curve restarts (the anchor stays),
        its motivation becomes the stronger of old and new, and the turn is remembered. False when
        this turn had reinforced it already (a redelivered job) or the goal is no longer active."""


class Bibliothek(StoreModule):
    """memory/bibliothek.py"""

    MODULE = "bibliothek"

    @op
    async def add(
        self,
        user_id: str,
        character_id: str,
        typ: str,
        titel: str,
        inhalt: str,
        thema_embedding,
        gewicht: float = 1.0,
        *,
        schluessel: str | None = None,
    ) -> int:
        """A library entry and its topic vector. With `schluessel` (the pixie's idempotency key of a
        delegation and type) at most once: a second write with the same key returns the first
        entry's id and changes nothing."""

    @op
    async def zerfall(self, cfg: MemoryConfig, schritt_tage: float = 1.0) -> BibliothekZerfall:
        """`gewicht_decay` (seed 001 §3.2a): the library's weights on the LZG nodes' forgetting
        curve, capped at `library_weight_cap`; how many decayed and the smallest weight now."""

    @op
    async def bestand(self, user_id: str, character_id: str) -> BibliothekBestand:
        """What the reading path can reach (`wissen` with a topic vector) next to everything active,
        and the character's own background knowledge (`charakter_wissen`, shared by all its pairs)."""

    @op
    async def suchen(
        self, user_id: str, character_id: str, vector, cfg: MemoryConfig, top_k: int | None = None
    ) -> list[BibliothekTreffer]:
        """The pair's `wissen` entries at or above the library's threshold, nearest first."""

    @op
    async def vorhanden(self, user_id: str, character_id: str, schluessel: str) -> bool:
        """Whether an entry with this idempotency key exists (active or not)."""

    @op
    async def eintraege(self, user_id: str, character_id: str) -> list[BibliothekEintrag]:
        """Every entry of the pair, both types, oldest first (inspection, dashboard, tests)."""


class Aufzeichnungen(StoreModule):
    """memory/aufzeichnungen.py"""

    MODULE = "aufzeichnungen"

    @op
    async def add(
        self, user_id: str, character_id: str, pfad: str, titel: str, stichworte: str, inhalt: str, embedding
    ) -> int: ...

    @op
    async def suchen(self, user_id: str, character_id: str, text: str, vector, cfg: MemoryConfig) -> Dateisuche:
        """The pair's files for a question: `text` for the keyword channel, `vector` for the dense
        one. At most `files_cap` hits, one per file: the keyword channel's first (by rank), then the
        dense channel's (by cosine)."""

    @op
    async def bestand(self, user_id: str, character_id: str) -> int:
        """How many files (a row without a file counts as one) the pair's index holds."""


class Dateien(StoreModule):
    """memory/dateien.py"""

    MODULE = "dateien"

    @op
    async def finden(self, user_id: str, character_id: str, inhalt_hash: str) -> Datei | None:
        """The pair's file with this content, or None."""

    @op
    async def speichern(
        self, user_id: str, character_id: str, datei: dict[str, Any], abschnitte: list[dict[str, Any]]
    ) -> tuple[Datei, bool]:
        """The file and its chunks (`inhalt`, `embedding` each) in one transaction: (the file,
        True). A file with the same content arrived first (another upload at the same time): (that
        file, False), and nothing is written."""

    @op
    async def umfang(self, user_id: str, character_id: str) -> DateienUmfang:
        """What a pair and its user hold already: the pair's files (`dateien_paar`), the user's
        bytes over all pairs (`bytes_user`)."""

    @op
    async def liste(self, user_id: str, character_id: str) -> list[Datei]:
        """The pair's files, newest first."""

    @op
    async def loeschen(self, user_id: str, character_id: str, datei_id: int) -> bool:
        """Remove one of the pair's files with its chunks; False when the pair has no such file."""


class Timeline(StoreModule):
    """memory/timeline.py"""

    MODULE = "timeline"

    @op
    async def add(
        self,
        user_id: str,
        character_id: str,
        titel: str,
        beginn: datetime,
        tz: str,
        *,
        personen: list[str] | None = None,
        ende: datetime | None = None,
        typ: str = "termin",
        turn_id: str | None = None,
        schritt: str | None = None,
    ) -> int:
        """A new entry. With `turn_id` and `schritt` (the step of the turn that writes it) the write
        happens once: the same step of the same turn again returns the entry it wrote the first
        time."""

    @op
    async def move(self, user_id: str, character_id: str, entry_id: int, beginn: datetime, tz: str, *,
                   turn_id: str | None = None) -> bool: ...

    @op
    async def delete(self, user_id: str, character_id: str, entry_id: int, *, turn_id: str | None = None) -> bool: ...

    @op
    async def find_by_date_range(
        self,
        user_id: str,
        character_id: str,
        von: date,
        bis: date,
        tz: str,
        *,
        limit: int = 50,
        include_anchors: bool = False,
    ) -> list[Termin]:
        """Entries whose start lies on a local day from `von` to `bis` (inclusive)."""

    @op
    async def find_by_keyword(
        self, user_id: str, character_id: str, keyword: str, tz: str, *, limit: int = 5, now: datetime | None = None
    ) -> list[Termin]:
        """Titles and persons, in both directions of time (nearest to now first), anchors excluded
        in the query, before the limit."""

    @op
    async def proaktives_fenster(
        self,
        user_id: str,
        character_id: str,
        tz: str,
        *,
        back_days: int = 3,
        ahead_days: int = 14,
        now: datetime | None = None,
    ) -> list[FensterTermin]:
        """Appointments from `back_days` ago to `ahead_days` ahead (local days), each with its
        German weekday and its relation to today."""


class Notizen(StoreModule):
    """memory/notizen.py"""

    MODULE = "notizen"

    @op
    async def create(
        self,
        user_id: str,
        name: str,
        inhalt: str = "",
        zusammenfassung: str = "",
        themen: list[str] | None = None,
        *,
        turn_id: str | None = None,
        schritt: str | None = None,
    ) -> int:
        """A new note; with `turn_id` and `schritt` at most once per step of a turn (see
        timeline.add)."""

    @op
    async def update(self, user_id: str, note_id: int, *, turn: tuple[str, str] | None = None,
                     **fields: Any) -> bool: ...

    @op
    async def delete(self, user_id: str, note_id: int, *, turn: tuple[str, str] | None = None) -> bool: ...

    @op
    async def find_by_keyword(self, user_id: str, keyword: str, limit: int = 10) -> list[Notiz]:
        """Name or topics contain the keyword (case-insensitive)."""

    @op
    async def find_fulltext(self, user_id: str, text: str, limit: int = 10) -> list[Notiz]: ...

    @op
    async def proactive_listing(self, user_id: str) -> list[NotizUebersicht]:
        """Name, summary and topics of the user's active notes, newest first."""


class Beziehung(StoreModule):
    """memory/beziehung.py"""

    MODULE = "beziehung"

    @op
    async def add_directive(
        self, user_id: str, character_id: str, text: str, *, turn_id: str | None = None, schritt: str | None = None
    ) -> int:
        """A directive; with `turn_id` and `schritt` at most once per step of a turn."""

    @op
    async def directives(self, user_id: str, character_id: str) -> list[Direktive]: ...

    @op
    async def set_directive_active(self, user_id: str, character_id: str, directive_id: int, aktiv: bool, *,
                                   turn_id: str | None = None) -> bool: ...

    @op
    async def deactivate_instruction(self, user_id: str, character_id: str, instruction_id: int) -> bool: ...

    @op
    async def add_instruction(
        self,
        user_id: str,
        character_id: str,
        text: str,
        max_active: int = 3,
        *,
        turn_id: str | None = None,
        schritt: str | None = None,
    ) -> int:
        """An instruction; with `turn_id` and `schritt` at most once per step of a turn (a repeat
        returns the first one's id, and is not counted against the limit)."""

    @op
    async def instructions(self, user_id: str, character_id: str) -> list[Anweisung]: ...

    @op
    async def anweisungen_lage(
        self,
        user_id: str,
        character_id: str,
        vormerk_frist_s: int = 3600,
        *,
        turn_id: str | None = None,
        schritt: str | None = None,
    ) -> AnweisungsLage:
        """What the character agent decides on: the pair's active instructions (`aktiv`, oldest
        first), the instruction kept aside at the limit that still waits for the human's answer
        (`vorgemerkt`: kept within the last `vormerk_frist_s` seconds, else None), and what the step
        (`turn_id`, `schritt`) changed already (`schritt`, see `_schritt_stand`; None: nothing)."""

    @op
    async def anweisungen_aendern(
        self,
        user_id: str,
        character_id: str,
        *,
        neu: Sequence[str] = (),
        aufheben: Sequence[int] = (),
        max_active: int = 3,
        vormerken: bool = False,
        vormerkung_schliessen: bool = False,
        turn_id: str | None = None,
        schritt: str | None = None,
    ) -> AnweisungsAenderung:
        """One change of the pair's instructions, in one transaction under the pair's lock: lift the
        active instructions `aufheben`, then add the texts `neu` — add, lift, replace (one lifted,
        one added) and merge (several lifted, one added) are the same operation. A new text that is
        active already (the same sentence, `_gleich`) is not added twice."""

    @op
    async def set_profile(self, user_id: str, character_id: str, **fields: str) -> None: ...

    @op
    async def profile(self, user_id: str, character_id: str) -> Beziehungsprofil:
        """Both sides' profiles of the pair; every field "" for a pair without one."""

    @op
    async def profil_wachsen(
        self,
        user_id: str,
        character_id: str,
        schritt: str,
        saetze: dict[str, str],
        grenzen: dict[str, int],
        *,
        beobachtet: dict[str, Beobachtung] | None = None,
        abgeloest: list[str] | None = None,
    ) -> ProfilGewachsen:
        """Slow growth, once per step: each field's new sentence joins its last ones, the oldest
        dropped beyond the field's limit (`grenzen`, sentences); a sentence the field holds already
        is not added again. `abgeloest`: the texts of memories the step supersedes; the person's
        sentences that repeat one leave the profile (the step's own new sentence stays). `beobachtet` counts a value per field (`profil_zaehlung`); a value that
        recurs in its window grows the field by its sentence. The step (`{node}:{turn_id}`) is
        recorded with the profile and the tally in the same transaction, under the row's lock: a
        second delivery of the step changes nothing. Returns `neu` False for a step done already,
        else `neu` True, the fields grown (`gewachsen`) and how often each observed value stands in
        its tally (`wie_oft`)."""

    @op
    async def profil_schritt_erledigt(self, user_id: str, character_id: str, schritt: str) -> bool:
        """Whether the step (`{node}:{turn_id}`) has grown the pair's profiles already."""

    @op
    async def save_emotion(
        self,
        user_id: str,
        character_id: str,
        emotion: str,
        arousal: float,
        vektor: str | None = None,
        verlauf: list[dict] | None = None,
    ) -> None: ...

    @op
    async def load_emotion(self, user_id: str, character_id: str) -> NovaEmotion | None: ...


class Charaktere(StoreModule):
    """memory/charaktere.py"""

    MODULE = "charaktere"

    @op
    async def create(
        self,
        character_id: str,
        fields: dict[str, Any],
        wissen: list[dict[str, Any]] | None = None,
        *,
        replace: bool = False,
    ) -> Charakter:
        """Insert a character (and its knowledge entries, each with its `embedding`) in one
        transaction. `replace`: an existing character with that id is overwritten, its knowledge
        replaced."""

    @op
    async def get(self, character_id: str) -> Charakter | None: ...

    @op
    async def exists(self, character_id: str) -> bool: ...

    @op
    async def list_all(self, limit: int = 500) -> list[CharakterZeile]: ...

    @op
    async def update(self, character_id: str, fields: dict[str, Any]) -> Charakter | None:
        """Set the given fields; None when there is no such character."""

    @op
    async def delete(self, character_id: str) -> bool:
        """Remove the character and its knowledge; the pairs' own memories stay (they are the
        users')."""

    @op
    async def wissen(self, character_id: str) -> list[CharakterWissen]:
        """The character's knowledge entries, in the order they were added (for export and review)."""

    @op
    async def wissen_suchen(
        self, character_id: str, vector, nachrichten: Sequence[str] | str | None, cfg: MemoryConfig,
        top_k: int | None = None
    ) -> list[BibliothekTreffer]:
        """The character's knowledge for one turn: the lorebook's activated entries (`constant`,
        or their keys in the newest messages, memory/wissen_schluessel.py) within the token budget,
        in placement order, then the entries whose topic lies within the library threshold of the
        search vector. Weights on the library's 0–1 scale."""


class Pg(StoreModule):
    """memory/pg.py"""

    MODULE = "pg"

    @op
    async def decision_rates(self, since: datetime | None = None) -> list[DecisionRate]:
        """How often each branching node took each outcome (art = switch), since a point in time."""

    @op
    async def revoke_api_keys(self, key: str | None = None, user_id: str | None = None,
                              key_id: int | None = None) -> int:
        """Revoke one key (in plain text, or by its id, an operator's too) or every active key of a
        user; how many were revoked."""

    @op
    async def list_api_keys(self) -> list[ApiKeyInfo]:
        """Every key without its secret, newest first, with its expiry and whether it works now."""

    @op
    async def recent_turn_records(self, user_id: str, character_id: str, limit: int) -> list[StoredTurn]:
        """The pair's last `limit` stored turns, oldest first: what the session history is rebuilt
        from."""


class Dashboard(StoreModule):
    """memory/dashboard.py"""

    MODULE = "dashboard"

    @op
    async def turn_stats(self, since: datetime) -> TurnStats:
        """Finished turns since `since`: count and latency percentiles (the turn's own total)."""

    @op
    async def node_stats(self, since: datetime) -> list[NodeStats]:
        """Per node: runs and duration percentiles since `since` (reply chains and background)."""

    @op
    async def recent_pairs(self, since: datetime, limit: int = 50) -> list[RecentPair]: ...

    @op
    async def pair_turns(self, user_id: str, character_id: str, limit: int = 10) -> list[PairTurn]:
        """The pair's last turns, newest first, each with its node durations and decisions."""


class Erasure(StoreModule):
    """memory/erasure.py (its Postgres part; the Redis part runs where the Redis client is)"""

    MODULE = "erasure"

    @op
    async def count_rows(self, user_id: str | None = None, character_id: str | None = None) -> dict[str, int]:
        """Rows per table in the scope (a user, or every pair of a character): a map by table name
        (the tables are data here, `memory.erasure.TABLES`, merged with the Redis part's counts),
        each a count."""

    @op
    async def erase_rows(self, user_id: str | None = None, character_id: str | None = None) -> dict[str, int]:
        """Delete the scope's rows in one transaction; returns the rows deleted per table (a map by
        table name, as `count_rows`)."""

    @op
    async def markieren(self, user_id: str, frist_s: float) -> None:
        """The user's erasure mark in Postgres (`geloeschte_user`), committed before anything is deleted."""

    @op
    async def export_table(self, user_id: str, table: str) -> list[dict[str, Any]]:
        """A user's rows of one table (`memory.erasure.EXPORT_TABLES`), each a JSON object of its
        columns: free-form on purpose, since each table has its own columns and the export hands
        them to the user as the database holds them; nothing reads them by key."""

    @op
    async def bekannte_paare(self, user_id: str) -> dict[str, list[str]]:
        """The user's pairs in Postgres, each with its turns' ids (where the Redis part looks besides
        its index): a map from character id to turn ids."""


class Ruecknahme(StoreModule):
    """memory/ruecknahme.py (its Postgres part; the Redis part runs in the pair actor)"""

    MODULE = "ruecknahme"

    @op
    async def zuruecknehmen(self, user_id: str, character_id: str, turn_ids: list[str], *,
                            varianten_an: str | None = None, verworfen: dict[str, str] | None = None,
                            varianten_max: tuple[int, int] | None = None) -> ZurueckgenommeneZeilen:
        """Take the turns back in Postgres in one transaction (before-images put back, their rows
        deleted, recorded as retracted, swipes moved to `varianten_an`, the newest `varianten_max`
        (per turn, per pair) kept); rows changed per table."""

    @op
    async def varianten(self, user_id: str, character_id: str, turn_id: str) -> list[Swipe]:
        """The replies a turn replaced (its swipes), oldest first."""


class Erinnerungen(StoreModule):
    """memory/erinnerungen.py"""

    MODULE = "erinnerungen"

    @op
    async def auflisten(self, user_id: str, character_id: str, q: str | None = None,
                        limit: int = 200) -> list[ErinnerungsEintrag]:
        """What Nova remembers about the person, newest first, each with its turn and message."""

    @op
    async def vergessen(self, user_id: str, character_id: str, item_id: str) -> bool:
        """Forget one item and drop it from the before-images; False: no such item of the pair."""

    @op
    async def beschreiben(self, user_id: str, character_id: str, item_id: str) -> ErinnerungQuelle | None:
        """An item's text and turn ({inhalt, turn_id}), read before it is forgotten; None: no such item."""

    @op
    async def nachvergessen(self, user_id: str, character_id: str, texte: list[str], turn_ids: list[str],
                            mindestens: int = 2) -> Nachvergessen:
        """The profile's sentences that repeat a forgotten item and the library's entries of its
        turn, gone (before-images too); what went, by kind."""


MODULES: tuple[type[StoreModule], ...] = (
    Lzg,
    Lesepfad,
    Ziele,
    Bibliothek,
    Aufzeichnungen,
    Dateien,
    Timeline,
    Notizen,
    Beziehung,
    Charaktere,
    Pg,
    Dashboard,
    Erasure,
    Ruecknahme,
    Erinnerungen,
)


class StoreOps:
    """Every store module's operations over one transport, one attribute per module."""

    def __init__(self, transport: Transport):
        self.lzg = Lzg(transport)
        self.lesepfad = Lesepfad(transport)
        self.ziele = Ziele(transport)
        self.bibliothek = Bibliothek(transport)
        self.aufzeichnungen = Aufzeichnungen(transport)
        self.dateien = Dateien(transport)
        self.timeline = Timeline(transport)
        self.notizen = Notizen(transport)
        self.beziehung = Beziehung(transport)
        self.charaktere = Charaktere(transport)
        self.pg = Pg(transport)
        self.dashboard = Dashboard(transport)
        self.erasure = Erasure(transport)
        self.ruecknahme = Ruecknahme(transport)
        self.erinnerungen = Erinnerungen(transport)
