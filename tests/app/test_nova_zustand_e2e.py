"""Through the running system: after each turn Nova's emotion state is in the turn's commit, the
outbox job puts the same state in Postgres, and the next turn's db_zugriff starts from it."""
from datetime import datetime

from memory import pg, session
from tests.conftest import auth, pg_call, redis_call, wait_for


def test_each_turns_state_is_committed_and_reaches_postgres(system, client, keys, settings, character):
    ch = character("zustand")
    states = []
    for text in ("Hallo, wie geht es dir?", "Ich hatte einen schoenen Tag im Garten."):
        r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": text}, headers=auth(keys["alice"]))
        assert r.status_code == 200, r.text
        z = redis_call(settings.redis_url, session.load_zustand, "alice", ch)
        assert z is not None and 0.0 <= z["arousal"] <= 1.0
        states.append(z)
    assert datetime.fromisoformat(states[1]["stand"]) > datetime.fromisoformat(states[0]["stand"])

    def in_postgres():
        row = pg_call(settings.database_url, pg.load_pair, "alice", ch)
        return row if row["emotion_stand"] and datetime.fromisoformat(row["emotion_stand"]) == \
            datetime.fromisoformat(states[1]["stand"]) else None

    row = wait_for(in_postgres, timeout=60)
    assert (row["nova_emotion"], row["nova_arousal"]) == (states[1]["emotion"], states[1]["arousal"])
