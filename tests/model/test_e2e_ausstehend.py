"""The pending order with the real tiny model, through the API: an appointment without its time,
then the time, then turns that do not concern it. What the model writes into the order is its
own; the test holds the state machine's invariants (memory/ausstehender_auftrag.py): every human
turn writes the pending state once, under its own turn_id; a pending order is never older than
`VERFALL_NACH_TURNS` human turns and expires by its named fallback; at most one appointment
comes of it; and an order that waits for nothing but its time is completed by "morgen um 15 Uhr"
at 15:00 tomorrow in the pair's time zone (the agent's rule reads the answer, no model)."""
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from memory import ausstehender_auftrag as ausstehend
from memory import pg
from pipeline.timefmt import local_now
from tests.conftest import auth, pg_call, redis_call, wait_for

pytestmark = pytest.mark.e2e

WEITER = ("Wie war dein Tag?", "Erzaehl mir etwas Schoenes.", "Was liest du gerade?", "Magst du Regen?",
          "Ich koche gleich Suppe.", "Gute Nacht.")
"""Messages that concern no order (no time, no management words): each advances the counter."""


def _post(client, key, user, character, text):
    r = client.post(f"/v1/pairs/{user}/{character}/turns", json={"text": text}, headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()


async def _termine(pool, user, character):
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT titel, beginn FROM timeline WHERE user_id=%s AND character_id=%s"
                                 " AND typ <> 'erinnerungs_anker' ORDER BY id", (user, character))
        return await cur.fetchall()


def _decisions(settings, user, character, turn_id):
    rows = wait_for(lambda: pg_call(settings.database_url, pg.pipeline_rows, user, character, turn_id))
    return [(x["entscheidung"], x["outcome"]) for x in rows if x["art"] == "switch"]


def test_an_appointment_without_its_time_completes_or_expires_by_name(client, keys, settings, character):
    ch = character("ausstehend")
    stand = lambda: redis_call(settings.redis_url, ausstehend.laden, "alice", ch)  # noqa: E731
    termine = lambda: pg_call(settings.database_url, _termine, "alice", ch)  # noqa: E731
    turns = [_post(client, keys["alice"], "alice", ch, "Trag einen Termin ein: Zahnarzt")["turn_id"]]
    s = stand()
    erst = s.auftrag if s is not None else None
    if erst is not None:  # the order asked back: it waits, written by the turn that asked
        assert (s.turn_id, s.ausgang, erst.turn_id, erst.turns) == (turns[0], "neu", turns[0], 0)
        assert erst.fehlt and redis_call(settings.redis_url, ausstehend.offen, "alice", ch)
    assert len(termine()) <= 1

    texte = ["morgen um 15 Uhr", *WEITER]
    while s is not None and s.auftrag is not None and texte:
        vorher = s.auftrag
        turns.append(_post(client, keys["alice"], "alice", ch, texte.pop(0))["turn_id"])
        s = stand()
        assert s.turn_id == turns[-1], (s, turns)  # each human turn wrote it, under its own id
        d = _decisions(settings, "alice", ch, turns[-1])
        assert ("planner.ausstehend_stand", s.ausgang if s.ausgang != "abgelaufen" else "ausstehend_abgelaufen") in d, d
        if s.ausgang == "unberuehrt":
            assert s.auftrag.turns == vorher.turns + 1 < ausstehend.VERFALL_NACH_TURNS
        if s.auftrag is not None:  # never older than the limit
            assert s.auftrag.turns < ausstehend.VERFALL_NACH_TURNS
            assert s.auftrag.turn_id in turns[-ausstehend.VERFALL_NACH_TURNS:], (s, turns)
        if s.ausgang == "abgelaufen":
            assert s.auftrag is None and s.vorher is not None
        assert len(termine()) <= 1, termine()
        if len(turns) == 2 and erst is not None and erst.fehlt == ["wann"]:
            # it waited for its time only: the answer completes it, by the agent's rule (a later
            # order of the same turn that asks back would be pending now: `neu`)
            assert s.ausgang in ("erledigt", "neu") and s.ergebnis["status"] == "abgeschlossen", s
            assert ("planner.ausstehend", "ergaenzt") in d
            (titel, beginn), = termine()
            heute = local_now(settings.timezone).date()
            assert beginn in {datetime.combine(heute + timedelta(days=n), time(15), tzinfo=ZoneInfo(settings.timezone))
                              for n in (1, 2)}, beginn
    assert s is None or s.auftrag is None, f"still pending after {len(turns)} turns: {s}"
    assert not redis_call(settings.redis_url, ausstehend.offen, "alice", ch)
