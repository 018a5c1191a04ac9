"""The result of a turn, one model for every place it goes: the pair actor returns it
(`core/wire.py` hands it on), the dispatcher writes it (`DispatchRecord.result`), Redis stores it
under its turn_id, the turn's record in Postgres carries it, and the HTTP response reuses it
(`serve/schemas.TurnResponse`).

Like everything in `core/`, it imports nothing of the project.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class TurnUsage(BaseModel):
    model_config = ConfigDict(extra="allow")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0


class TurnCheck(BaseModel):
    """How the Thinker checked the reply (the result's `pruefung`)."""

    model_config = ConfigDict(extra="allow")

    status: str
    """The Thinker's outcome: `durchlauf` (no reasoning needed), else its decision entry
    `thinker.ergebnis` (ok, korrektur, korrektur_ohne_text, max_iterationen, self_trigger,
    nachfass_erschoepft_im_retry, aufruf_gescheitert)."""
    iterationen: int
    werkzeuge: list[str]


class TurnTimings(BaseModel):
    """Where a turn's time went, as the pair actor measured it (pipeline/trace.py `TurnTrace.timings`):
    the whole turn, its waits at the LLM and the embedder, its model calls and tokens, and per node
    its time, its start (since the turn began) and its time waiting for its model calls. A key a
    stored result holds beyond these is kept (`extra`)."""

    model_config = ConfigDict(extra="allow")

    total_ms: float = 0.0
    llm_ms: float = 0.0
    embed_ms: float = 0.0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    nodes_ms: dict[str, float] = Field(default_factory=dict)
    nodes_start_ms: dict[str, float] = Field(default_factory=dict)
    nodes_llm_ms: dict[str, float] = Field(default_factory=dict)


class TurnResult(BaseModel):
    """A committed turn as the pair actor returns it (and as it is stored under its turn_id: a
    repeated turn_id returns it with `replayed`). The fields in the order the dispatcher writes
    them; a field a stored result holds beyond these is kept (`extra`), so the result goes back to
    a client with the keys it was stored with: `model_dump(exclude_unset=True)`."""

    model_config = ConfigDict(extra="allow")

    turn_id: str
    user_id: str
    character_id: str
    character_name: str
    reply: str
    herkunft: str
    eigener_gedanke: str | None = None
    model: str
    usage: TurnUsage
    emotion: str | None = None
    arousal: float | None = None
    emotions_vektor: str | None = None
    emotions_verlauf: list[str] | None = None
    sprach_stil: str | None = None
    beziehungs_dynamik: str | None = None
    intent: str | None = None
    tone: str | None = None
    gespraechs_modus: str | None = None
    user_intentionen: list[str] | None = None
    momentum: str | None = None
    needs_web: bool | None = None
    nachricht_folgt: bool = False
    """The Thinker could not decide: a second message follows as its own turn (the events route
    pushes it; the history has it too)."""
    pruefung: TurnCheck | None = None
    """How the Thinker checked the reply."""
    ursprung_turn_id: str | None = None
    """On that second message: the turn it continues."""
    name: str | None = None
    """The person's name as the turn's request gave it (`TurnRequest.name`); absent when none came."""
    zeitpunkt: str | None = None
    """The message's date as an operator gave it (`TurnRequest.zeitpunkt`); absent when none came."""
    created_at: str
    timings: TurnTimings = Field(default_factory=TurnTimings)
    replayed: bool = False
    """True when this turn_id had run before and the stored result is returned."""

    def body(self) -> dict[str, Any]:
        """The result as a JSON body: the keys it was made (or stored) with."""
        return self.model_dump(exclude_unset=True)
