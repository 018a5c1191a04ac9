"""`novaberg outbox dead|replay` against the running system: a dead letter is listed with its
reason and pair, replayed once (a second replay is refused), and the workers then do the job."""
import json
import time
import uuid

import pytest
from redis import Redis

from cluster import cli
from memory import outbox, pg
from tests.app.conftest import cli_against
from tests.conftest import pg_call
from tests.stores.test_outbox import _job

pytestmark = pytest.mark.e2e


def test_dead_letters_are_listed_and_replayed_once(system, keys, settings, monkeypatch, capsys):
    cli_against(monkeypatch, system, keys["operator"])
    user = f"dl-{uuid.uuid4().hex[:8]}"
    r = Redis.from_url(settings.redis_url)
    dead_id = r.xadd(outbox.DEAD_STREAM, {"job": json.dumps(_job(user)), "from": "1-0",
                                          "reason": "OperationalError: the store was away (after 5 failures)"}).decode()
    assert cli.main(["outbox", "dead"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(dead_id))
    assert f"turn\t{user}/nova" in line and "the store was away" in line
    assert cli.main(["outbox", "replay", dead_id]) == 0
    assert "queued again" in capsys.readouterr().out
    assert cli.main(["outbox", "replay", dead_id]) == 1  # exactly once
    assert "no dead letter" in capsys.readouterr().err
    deadline = time.monotonic() + 60
    while pg_call(settings.database_url, pg.count_turn_records, user, "nova") == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert pg_call(settings.database_url, pg.count_turn_records, user, "nova") == 1
