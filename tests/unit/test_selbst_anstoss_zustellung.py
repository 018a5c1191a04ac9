"""A self-trigger's follow-up (seed 000 §3.5: the reply announced `nachricht_folgt`) whose turn fails
is not given up: its outbox job fails, so the outbox delivers it again (and dead-letters it after
its failures of its own; one that failed for an outage waits, uncounted); a follow-up the pair dropped (taken back, its limit reached) ends the job."""
import asyncio

import pytest

from actors import activation, background
from core.settings import Settings
from core.wire import EventDropped, TurnFailure, read_job

JOB = read_job({"kind": "selbst_anstoss", "turn": {"user_id": "u", "character_id": "nova", "turn_id": "t7"},
                "anstoss": {"user_prompt": "Und noch etwas: ...", "reiz_herkunft": "user", "turn_id": "t7",
                            "thinker_unsicher_retry": True}})


class _Pair:
    def __init__(self, out):
        self.out, self.requests = out, []

        class _Event:
            def remote(inner, request):
                self.requests.append(request)

                async def answer():
                    return self.out
                return answer()
        self.event = _Event()


def _deliver(monkeypatch, out):
    pair = _Pair(out)

    async def aktivieren(redis, settings, user_id, character_id):
        return pair

    monkeypatch.setattr(activation, "aktivieren", aktivieren)
    asyncio.run(background.deliver_self_trigger(None, Settings(), JOB))
    return pair


def test_a_failed_follow_up_fails_its_job_so_the_outbox_delivers_it_again(monkeypatch):
    from memory.outbox import is_outage

    with pytest.raises(background.FollowUpFailed, match="follow-up of turn t7 failed in responder") as e:
        _deliver(monkeypatch, TurnFailure(turn_id="t7-retry", node="responder", message="engine down"))
    assert not is_outage(e.value)  # a failure of its own: counted, dead-lettered in the end
    # failed because a store or a service was away: an outage to the outbox, it waits uncounted
    with pytest.raises(background.FollowUpWaits) as e:
        _deliver(monkeypatch, TurnFailure(turn_id="t7-retry", node="db_zugriff", message="pool timeout",
                                          ausfall=True))
    assert is_outage(e.value)


def test_a_dropped_follow_up_ends_its_job(monkeypatch):
    pair = _deliver(monkeypatch, EventDropped(reason="zurueckgenommen"))
    (request,) = pair.requests
    assert (request.kind, request.aus_turn, request.user_prompt) == ("continue", "t7", "Und noch etwas: ...")
