"""The parser processes (serve/parse_worker.py): a job runs in a warm worker process and what it
returns or raises comes back; a job past its time has its process killed, the slot is free at
once and a fresh process replaces the killed one; with every slot busy a job waits its bounded
time and is refused; a worker that dies answers ParseFailed and is replaced. A pool runs only the
jobs it was declared with (`JOBS` for the product's parsers)."""
import asyncio
import codecs
import os
import time

import pytest

from core.errors import ConfigError
from serve import charakterkarte, dateien, parse_worker

SLOW = ("a" * 400_000 + "-" + "b" * 400_000).encode()
"""Punycode that Python's quadratic decoder works on for minutes: a real parser that hangs."""


PROBEN = {"datei_lesen": dateien.lesen, "pid": os.getpid, "zahl": int, "dekodieren": codecs.decode, "laenge": len,
          "beenden": os._exit}
"""Jobs that probe the pool itself: its process, a parser error, a hang, a crash."""


@pytest.fixture
def pool():
    p = parse_worker.ParsePool(1, 0.3, jobs=PROBEN)
    yield p
    p.schliessen()


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_job_runs_in_a_worker_process_and_its_errors_come_back_as_themselves(pool):
    async def go():
        pid = await pool.run(os.getpid, timeout_s=30)
        assert pid != os.getpid()
        dok = await pool.run(dateien.lesen, "Grüße".encode("cp1252"), "text/plain; charset=cp1252", "a.txt", 1000,
                             timeout_s=30)
        assert dok.text == "Grüße" and dok.name == "a.txt"
        with pytest.raises(dateien.DateiFehler) as e:
            await pool.run(dateien.lesen, b"x", "text/plain; charset=punycode", None, 1000, timeout_s=30)
        assert e.value.status == 422 and "utf-8" in str(e.value)
        with pytest.raises(parse_worker.ParseFailed, match="ValueError"):  # not a project error: named
            await pool.run(int, "not a number", timeout_s=30)
        assert await pool.run(os.getpid, timeout_s=30) == pid  # the same warm process served them all
    asyncio.run(go())


def test_a_job_past_its_time_is_killed_its_slot_freed_at_once_and_its_process_replaced(pool):
    async def go():
        pid = await pool.run(os.getpid, timeout_s=30)
        started = time.monotonic()
        with pytest.raises(parse_worker.ParseTimeout):
            await pool.run(codecs.decode, SLOW, "punycode", timeout_s=1.0)
        assert time.monotonic() - started < 10
        # the one slot is free at once: the next job does not wait for the slow one
        assert await pool.run(len, b"abc", timeout_s=30) == 3
        assert _gone(pid), "the timed-out worker process still runs"
        assert await pool.run(os.getpid, timeout_s=30) not in (pid, os.getpid())
    asyncio.run(go())


def test_with_every_slot_busy_a_job_waits_its_bounded_time_then_is_refused(pool):
    async def go():
        slow = asyncio.create_task(pool.run(codecs.decode, SLOW, "punycode", timeout_s=3.0))
        await asyncio.sleep(0.1)
        with pytest.raises(parse_worker.ParserBusy):
            await pool.run(len, b"abc", timeout_s=30)
        with pytest.raises(parse_worker.ParseTimeout):
            await slow
        assert await pool.run(len, b"abc", timeout_s=30) == 3
    asyncio.run(go())


def test_a_waiting_job_gets_the_slot_as_soon_as_it_is_free():
    p = parse_worker.ParsePool(1, 30.0, jobs=PROBEN)

    async def go():
        first = asyncio.create_task(p.run(codecs.decode, SLOW, "punycode", timeout_s=1.0))
        await asyncio.sleep(0.1)
        assert await p.run(len, b"abcd", timeout_s=30) == 4
        with pytest.raises(parse_worker.ParseTimeout):
            await first
    try:
        asyncio.run(go())
    finally:
        p.schliessen()


def test_a_worker_that_dies_answers_parse_failed_and_is_replaced(pool):
    async def go():
        pid = await pool.run(os.getpid, timeout_s=30)
        with pytest.raises(parse_worker.ParseFailed, match="exit code 3"):
            await pool.run(os._exit, 3, timeout_s=30)
        assert await pool.run(os.getpid, timeout_s=30) != pid
    asyncio.run(go())


def test_a_cancelled_job_takes_its_worker_along_so_the_next_job_gets_its_own_answer(pool):
    async def go():
        slow = asyncio.create_task(pool.run(codecs.decode, SLOW, "punycode", timeout_s=60))
        await asyncio.sleep(0.3)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert await pool.run(len, b"abcde", timeout_s=30) == 5
    asyncio.run(go())


def test_the_product_runs_its_declared_parsers_and_nothing_else():
    """`JOBS` lists the product's parsers by name; a pool refuses a function it does not list before
    a worker sees it, and a list naming one function twice, or a name that is no word, is refused
    when the pool is built."""
    assert dict(parse_worker.JOBS) == {"datei_lesen": dateien.lesen, "karte_lesen": charakterkarte.lesen}
    p = parse_worker.ParsePool(1, 0.3)
    try:
        with pytest.raises(ConfigError, match="no parse job of this pool"):
            asyncio.run(p.run(os.getpid, timeout_s=30))
        assert p._frei[0].arbeiter is None  # refused before a worker process was started
        dok = asyncio.run(p.run(dateien.lesen, b"Hallo", "text/plain", "a.txt", 1000, timeout_s=30))
        assert dok.text == "Hallo"
    finally:
        p.schliessen()
    with pytest.raises(ConfigError, match="the same function"):
        parse_worker.ParsePool(1, 0.3, jobs={"lesen": dateien.lesen, "auch_lesen": dateien.lesen})
    with pytest.raises(ConfigError, match="no function"):
        parse_worker.ParsePool(1, 0.3, jobs={"lesen": "serve.dateien.lesen"})
    with pytest.raises(ConfigError, match="must be a word"):
        parse_worker.ParsePool(1, 0.3, jobs={"serve.dateien.lesen": dateien.lesen})
