"""What the store's reads and writes of a pair's relationship return (its `Beziehungsprofil`, seed
004: directives, the character's instructions, both sides' profiles, Nova's emotion state), and
of the pair's goals and the user's notes: one model per shape, returned by `memory/beziehung.py`,
`memory/ziele.py` and `memory/notizen.py` and read by attribute where they arrive.

These shapes cross the store deployment's process seam, so they live here, on the ground floor:
like everything in `core/`, this module imports nothing of the project.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Eintrag(BaseModel):
    """A stored entry as a read returns it. Unknown keys are ignored (an entry a newer store wrote
    still reads). Read by attribute only: `e["text"]` is a TypeError and `e.get(...)` an
    AttributeError, so no reader agrees on the entry's shape by string keys."""

    model_config = ConfigDict(extra="ignore")

    def __contains__(self, key: object) -> bool:
        """Refused: an optional field is always there (None when the store lacked it), so
        `"k" in e` would say nothing; read the field."""
        raise TypeError(f"{type(self).__name__}: read the field {key!r} instead of testing for it")


class Direktive(_Eintrag):
    """An active directive of the human for the pair (an absolute instruction, seed 004)."""

    id: int
    text: str


class Anweisung(_Eintrag):
    """One of the character's instructions (seed 004: at most three active)."""

    id: int
    text: str


class AnweisungsSchritt(_Eintrag):
    """What one step of a turn (`turn_id`, `schritt`) changed of the instructions already, as the
    change answered it then."""

    status: Literal["erledigt", "voll"]
    """`erledigt`: it lifted and added; `voll`: it met the limit and kept `vorgemerkt` aside."""
    neu: list[Anweisung] = Field(default_factory=list)
    """The instructions it added."""
    aufgehoben: list[Anweisung] = Field(default_factory=list)
    """The instructions it lifted."""
    vorgemerkt: Anweisung | None = None
    """The instruction it kept aside (`voll`), else None."""


class AnweisungsLage(_Eintrag):
    """What the character agent decides on (`beziehung.anweisungen_lage`)."""

    aktiv: list[Anweisung] = Field(default_factory=list)
    """The pair's active instructions, oldest first."""
    vorgemerkt: Anweisung | None = None
    """The instruction kept aside at the limit that still waits for the human's answer, else None."""
    schritt: AnweisungsSchritt | None = None
    """What the step asked about changed already; None: nothing (or no step named)."""


class AnweisungsAenderung(_Eintrag):
    """The answer to one change of the pair's instructions (`beziehung.anweisungen_aendern`)."""

    status: Literal["erledigt", "voll", "nicht_aktiv", "vorhanden"]
    """`erledigt`: lifted and added; `voll`: more than the limit would be active, nothing changed
    (a single new text may be kept aside, `vorgemerkt`); `nicht_aktiv`: an instruction to lift is
    not active (any more), nothing changed; `vorhanden`: every new text is active already and
    nothing is to be lifted, nothing changed."""
    aktiv: list[Anweisung] = Field(default_factory=list)
    """The pair's active instructions afterwards, oldest first."""
    neu: list[Anweisung] = Field(default_factory=list)
    """The instructions added."""
    aufgehoben: list[Anweisung] = Field(default_factory=list)
    """The instructions lifted."""
    vorgemerkt: Anweisung | None = None
    """The instruction kept aside at the limit, else None."""
    wiederholt: bool = False
    """True: the step had changed the instructions already; this is its first answer, nothing changed."""


class Beziehungsprofil(_Eintrag):
    """Both sides' profiles of a pair: each field its sentences, one a line, newest last; "" for a
    field never grown (and for a pair without a profile)."""

    nova_kern: str = ""
    nova_adaptiv: str = ""
    nova_emotions: str = ""
    nova_intentionen: str = ""
    nova_beziehung: str = ""
    mensch_kern: str = ""
    mensch_beziehung: str = ""
    mensch_themen: str = ""


class ProfilGewachsen(_Eintrag):
    """What one step (`{node}:{turn_id}`) did to the pair's profiles (`beziehung.profil_wachsen`)."""

    neu: bool
    """False: the step had grown the profiles already; nothing changed (and the rest is empty)."""
    gewachsen: list[str] = Field(default_factory=list)
    """The fields that took a new sentence."""
    wie_oft: dict[str, int] = Field(default_factory=dict)
    """Per observed field: how often its value of this step stands in the field's tally."""


class NovaEmotion(_Eintrag):
    """Nova's emotion state as Postgres holds it for the pair (the last committed turn's)."""

    emotion: str
    arousal: float
    vektor: str | None = None
    verlauf: list[dict[str, Any]] = Field(default_factory=list)
    """Her emotion history as the turn's commit wrote it: free-form, as `NovaZustandRecord.verlauf`."""


class PaarZiel(_Eintrag):
    """An active goal of the pair as the store reads it (`ziele.load_goals`), its motivation faded
    by the goal's forgetting curve."""

    id: int
    inhalt: str
    horizont: str
    """`kurz`, `mittel` or `lang`."""
    motivation: float
    """The motivation as it stands now: `motivation_basis` × `behalten`."""
    motivation_basis: float
    """The motivation as stored."""
    behalten: float
    """The retention, 0–1, since the goal's curve last restarted."""
    embedding: list[float] | None
    """The goal's vector (None: a goal stored without one, which never activates)."""
    anker: str
    """When the goal was formed, ISO 8601."""
    verstaerkt_am: str
    """When its forgetting curve last restarted, ISO 8601."""


class Zielbildung(_Eintrag):
    """A goal formed (`ziele.bilden`)."""

    id: int
    neu: bool
    """False: the turn (`quelle_turn`) had formed this goal already (a redelivered job)."""


class ZielEreignis(_Eintrag):
    """What a turn did to the pair's goals already (`ziele.turn_ereignis`)."""

    id: int
    art: Literal["gebildet", "verstaerkt"]
    """`gebildet`: the turn formed the goal; `verstaerkt`: it stated the goal again."""


class Notiz(_Eintrag):
    """A note of the user as a search returns it (`notizen.find_by_keyword`, `find_fulltext`)."""

    id: int
    name: str
    inhalt: str = ""
    zusammenfassung: str = ""
    themen: list[str] = Field(default_factory=list)
    aktiv: bool = True
    updated_at: str
    """When it last changed, ISO 8601 with its offset, as Postgres gave it."""


class NotizUebersicht(_Eintrag):
    """A note of the user as the proactive listing shows it: name, summary and topics."""

    name: str
    zusammenfassung: str = ""
    themen: list[str] = Field(default_factory=list)
