"""The typed turn state: one record per producer.

Nodes declare the records they read and write; the runner assigns what a node returns with
validation, so a key that no record declares cannot appear (seed 000 §3.5: an undeclared key was
once dropped silently at a node boundary and the self-trigger was lost for months).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Herkunft = Literal["user", "eigener_impuls", "self_trigger"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Stimulus(_Record):
    """The input of the turn: exactly one of `user_prompt` / `eigener_gedanke` is set."""

    user_id: str
    character_id: str
    turn_id: str
    user_prompt: str | None = None
    eigener_gedanke: str | None = None
    herkunft: Herkunft = "user"
    received_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

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
    nova_kern: str = ""
    nova_adaptiv: str = ""
    nova_emotions: str = ""
    nova_intentionen: str = ""
    nova_beziehung: str = ""
    mensch_kern: str = ""


class SessionTurn(_Record):
    """One stored turn of the Redis session; the speaker is named on every turn."""

    rolle: Literal["user", "assistant"]
    sprecher: str
    inhalt: str
    turn_id: str
    herkunft: Herkunft = "user"
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


class MemoryRecord(_Record):
    """Written by the enricher."""

    session_turns: list[SessionTurn] = Field(default_factory=list)
    query_embedding: list[float] | None = None


class DraftRecord(_Record):
    """Written by the responder."""

    reply: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning: str | None = None
    prompt_variant: str = "default"


class DispatchRecord(_Record):
    """Written by the dispatcher."""

    committed: bool
    """False when the same turn_id had been committed already (nothing written twice)."""
    outbox_job: str
    result: dict
    """What the client receives, and what a repeated turn_id returns."""


class TurnState(_Record):
    stimulus: Stimulus
    pair: PairRecord | None = None
    memory: MemoryRecord | None = None
    draft: DraftRecord | None = None
    dispatch: DispatchRecord | None = None


RECORDS = tuple(n for n in TurnState.model_fields if n != "stimulus")
