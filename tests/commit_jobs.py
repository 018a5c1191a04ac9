"""Typed commit-path shapes for tests: a turn's result, its session entries, its outbox jobs and
its commit, as the dispatcher makes them (core/wire.py), with what a test does not care about
filled in."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from core.state import SessionTurn
from core.wire import TurnCommit, TurnJob, TurnRecordJob, TurnResult


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


def result(user: str = "u", ch: str = "nova", turn_id: str = "t", reply: str = "", **extra: Any) -> TurnResult:
    """A turn's result; `extra` sets or adds fields (character_name, herkunft, zeitpunkt, …)."""
    base = {"turn_id": turn_id, "user_id": user, "character_id": ch, "character_name": "Nova", "reply": reply,
            "herkunft": "user", "model": "scripted", "usage": {}, "created_at": now()}
    return TurnResult(**{**base, **extra})


def entry(inhalt: str, turn_id: str = "t", rolle: str = "user", **extra: Any) -> SessionTurn:
    """A session entry."""
    sprecher = "Person B" if rolle == "user" else "Nova"
    return SessionTurn(**{"rolle": rolle, "sprecher": sprecher, "inhalt": inhalt, "turn_id": turn_id,
                          "time": now(), **extra})


def turn_job(user: str, ch: str, turn_id: str, text: str, reply: str, *, created_at: str | None = None,
             embedding: list[float] | None = None, nova_zustand: dict | None = None, log: list[dict] | None = None,
             **result_extra: Any) -> TurnJob:
    """The job that writes a turn's record (and its log rows) to Postgres."""
    at = created_at or now()
    res = result(user, ch, turn_id, reply, created_at=at, **result_extra)
    return TurnJob(turn=TurnRecordJob(user_id=user, character_id=ch, turn_id=turn_id,
                                      mensch=entry(text, turn_id, time=at), reply=reply, user_embedding=embedding,
                                      result=res, created_at=at, nova_zustand=nova_zustand), log=log or [])


def commit(user: str, ch: str, turn_id: str, *, reply: str = "a", text: str | None = "q", keep_turns: int = 50,
           ttl_s: int = 3600, result_extra: dict | None = None, **kw: Any) -> TurnCommit:
    """A turn's commit: its result, the human's entry (None without `text`), Nova's entry; `kw`
    sets the rest (jobs, push, zustand, zaun, …)."""
    return TurnCommit(result=result(user, ch, turn_id, reply, **(result_extra or {})),
                      mensch=entry(text, turn_id) if text is not None else None,
                      nova=entry(reply, turn_id, rolle="assistant"), keep_turns=keep_turns, ttl_s=ttl_s, **kw)


def result_dict(user: str = "u", ch: str = "nova", turn_id: str = "t", reply: str = "", **extra: Any) -> dict:
    """A turn's result as a job of the release before `v` carried it (a plain dict)."""
    return result(user, ch, turn_id, reply, **extra).model_dump(mode="json", exclude_unset=True)
