"""A task the salience node delegated to the pixie, as the background queues it and the pixie
takes it: the queue's key and the task's shape, shared by both sides (actors/background.py
writes, actors/pixie.py reads)."""
from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field

DELEGATIONS = "delegationen"
"""The prefix of a pair's queue of delegated tasks: `delegationen:{user}:{character}`."""


class Delegation(BaseModel):
    """One delegated task as the background writes it."""

    model_config = ConfigDict(extra="ignore")
    aufgabe: str = Field(min_length=1)
    turn_id: str | None = None
    versuche: int = Field(default=0, ge=0)

    def schluessel(self) -> str:
        """The idempotency key of the delegation: its turn and its wording."""
        digest = hashlib.sha256(self.aufgabe.encode()).hexdigest()[:16]
        return f"delegation:{self.turn_id or '-'}:{digest}"
