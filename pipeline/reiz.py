"""The stimulus and its two producers: the delivery of a message or event, and the Thinker's retry
payload (seed 000 §3.5). Both go through this module, so a field added to the stimulus is carried
by both — a field the retry left out would pass unnoticed as "not present"."""
from __future__ import annotations

from typing import Any

from core.state import RetryNutzlast, Stimulus

RETRY_SUFFIX = "-retry"


def retry_nutzlast(stimulus: Stimulus) -> RetryNutzlast:
    """The full stimulus of a turn, for its self-triggered retry: exactly one of user_prompt /
    eigener_gedanke, where it came from, the arousal a thought brought, the turn, the marker."""
    return RetryNutzlast(reiz_herkunft=stimulus.reiz_herkunft or stimulus.herkunft,
                         gedanke_arousal=stimulus.gedanke_arousal, turn_id=stimulus.turn_id,
                         user_prompt=stimulus.user_prompt, eigener_gedanke=stimulus.eigener_gedanke,
                         person_name=stimulus.person_name,
                         received_at=stimulus.received_at if stimulus.datiert else None)


def stimulus_from_event(user_id: str, character_id: str, request: dict[str, Any], herkunft: str) -> Stimulus:
    """The stimulus of an event without a message of the human (`continue` or `impulse`). A retry
    runs under its own turn id (the original's stored result must not answer it) and names the
    turn it repeats."""
    retry = bool(request.get("thinker_unsicher_retry"))
    origin = request.get("turn_id")
    turn_id = request.get("retry_turn_id") or (f"{origin}{RETRY_SUFFIX}" if retry and origin else origin)
    datum = request.get("received_at")
    return Stimulus(user_id=user_id, character_id=character_id, turn_id=turn_id,
                    user_prompt=request.get("user_prompt"), eigener_gedanke=request.get("eigener_gedanke"),
                    herkunft=herkunft, reiz_herkunft=request.get("reiz_herkunft"),
                    gedanke_arousal=request.get("gedanke_arousal"), thinker_unsicher_retry=retry,
                    ursprung_turn_id=origin if retry else None, person_name=request.get("person_name"),
                    **({"received_at": datum, "datiert": True} if datum else {}))
