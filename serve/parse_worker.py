"""Parsing a client's bytes (an uploaded file's text, a PDF's text, a card's PNG) in worker
processes that a timeout can kill.

A parser fed hostile bytes may run for minutes (Python's punycode decoder is quadratic, a PDF's
pages may share one huge content stream). In a thread it could not be stopped; here it runs in one
of a bounded set of warm worker processes. A worker is a fresh interpreter (`python -c`, jobs and
outcomes pickled through multiprocessing's `Connection` over two pipes): no fork of the replica's
process with its threads and event loop, and nothing imported but the parsers (multiprocessing's
spawn and forkserver contexts run the parent's `__main__` again in every child, under Ray the
worker's whole bootstrap). A worker takes one to three seconds to start on two busy cores (its
imports alone about 0.4 s), too long to start one per parse: workers are kept warm. A job past its
time has its process killed at once, its slot is free again at once, and a fresh process takes the
killed one's place in the background. A request that finds every slot busy waits a bounded time,
then is refused with `ParserBusy` (the route answers 503 with Retry-After).

A job is one of the pool's declared parse functions and its arguments: `JOBS` lists the product's
parsers by name, the one place that says what may run in a parser process. A worker receives its
pool's list when it starts and runs a job by its name; a function the list does not hold is refused
before it reaches a worker (ConfigError). What a job raises comes back and is raised here (a project
error as itself, anything else as `ParseFailed`)."""
from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from types import MappingProxyType
from typing import Any, Callable, Mapping

from core.errors import ConfigError, InputError, NovabergError, RefusedError
from serve import charakterkarte, dateien

log = logging.getLogger("novaberg.parse_worker")


def verzeichnis(jobs: Mapping[str, Callable]) -> Mapping[str, Callable]:
    """The jobs checked: each a function under a name (a word), no function under two names.
    Raises ConfigError naming what is wrong."""
    seen: dict[Callable, str] = {}
    for name, fn in jobs.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(f"parse job {name!r}: its name must be a word (letters, digits, _)")
        if not callable(fn):
            raise ConfigError(f"parse job {name!r}: {fn!r} is no function")
        if fn in seen:
            raise ConfigError(f"parse jobs {seen[fn]!r} and {name!r} name the same function {fn!r}")
        seen[fn] = name
    return MappingProxyType(dict(jobs))


JOBS: Mapping[str, Callable] = verzeichnis({
    "datei_lesen": dateien.lesen,
    "karte_lesen": charakterkarte.lesen,
})
"""The parsers the product runs in a worker process, by name: an uploaded file's text (plain,
Markdown, PDF) and a character card (JSON or PNG)."""

_STOP = None
_BEREIT = "ready"


class ParseTimeout(InputError, TimeoutError):
    """A parse ran past its time; its process was killed."""


class ParseFailed(InputError, ValueError):
    """The parser failed on the bytes in a way no parser error names (its process died, or it raised
    something unexpected); the message says how."""


class ParserBusy(RefusedError, RuntimeError):
    """Every worker slot stayed busy for as long as a request may wait for one."""


# ------------------------------------------------------------------ the worker process
def _dienen(fd_in: int, fd_out: int) -> None:
    """A worker's life: its pool's jobs received, the parsers' libraries loaded, `ready` said,
    then a job in and its outcome out, until the pipe closes or says stop."""
    eingang, ausgang = Connection(fd_in, writable=False), Connection(fd_out, readable=False)
    jobs = eingang.recv()
    _vorladen()
    ausgang.send(_BEREIT)
    while True:
        try:
            job = eingang.recv()
        except (EOFError, OSError):
            return
        if job is _STOP:
            return
        ausgang.send(_ausfuehren(jobs, *job))


def _vorladen() -> None:
    """What the parsers load on their first file (pypdf, Pillow's PNG reader), loaded before the
    worker says it is ready: a job's time is the parse's alone."""
    import PIL.PngImagePlugin  # noqa: F401
    import pypdf  # noqa: F401


def _ausfuehren(jobs: Mapping[str, Callable], name: str, args: tuple) -> tuple[str, Any]:
    """The job's result, or its error: a project error as itself, anything else (a parser's
    unforeseen failure on the bytes, a MemoryError) as ParseFailed naming it."""
    try:
        return "ok", _pickle_probe(jobs[name](*args))
    except NovabergError as e:
        return "err", _transportabel(e)
    except BaseException as e:  # noqa: BLE001 - every outcome goes back to the caller
        return "err", ParseFailed(f"{type(e).__name__}: {e}")


def _pickle_probe(value: Any) -> Any:
    import pickle

    pickle.dumps(value)
    return value


def _transportabel(e: BaseException) -> BaseException:
    """The exception itself if it survives pickling, else a ParseFailed that names it."""
    import pickle

    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001 - an exception class with an odd constructor
        return ParseFailed(f"{type(e).__name__}: {e}")


# ------------------------------------------------------------------ the replica's side
class _Arbeiter:
    """One warm worker process and the parent's ends of its two pipes; the process runs `jobs`."""

    def __init__(self, jobs: Mapping[str, Callable], start_timeout_s: float = 60.0):
        von_kind, zum_kind = os.pipe(), os.pipe()
        fds = (zum_kind[0], von_kind[1])
        code = (f"import sys; sys.path[:0] = {sys.path!r}; from serve.parse_worker import _dienen; "
                f"_dienen({fds[0]}, {fds[1]})")
        started = time.monotonic()
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=fds, stdin=subprocess.DEVNULL)
        finally:
            for fd in fds:
                os.close(fd)
        self.conn = Connection(von_kind[0], writable=False)
        self.auftraege = Connection(zum_kind[1], readable=False)
        try:
            self.auftraege.send(dict(jobs))
            bereit = self.conn.poll(start_timeout_s) and self.conn.recv() == _BEREIT
        except (EOFError, OSError):  # it ended before it was ready
            bereit = False
        if not bereit:
            self.toeten()
            raise ParseFailed(f"a parser process did not start within {start_timeout_s:g} s "
                              f"(exit code {self.proc.returncode})")
        self.start_s = time.monotonic() - started

    @property
    def pid(self) -> int:
        return self.proc.pid

    def lebt(self) -> bool:
        return self.proc.poll() is None

    def toeten(self) -> None:
        """SIGKILL, then reaped (blocking briefly: call it off the event loop)."""
        try:
            self.proc.kill()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for c in (self.conn, self.auftraege):
            c.close()


class _Platz:
    """A slot: at most one worker process, started when first needed or replaced after a kill."""

    def __init__(self, jobs: Mapping[str, Callable]):
        self.jobs = jobs
        self.lock = threading.Lock()
        self.arbeiter: _Arbeiter | None = None

    def bereit(self) -> _Arbeiter:
        """The slot's live worker, started if there is none (blocking: call it off the event loop)."""
        with self.lock:
            if self.arbeiter is not None and not self.arbeiter.lebt():
                self.arbeiter.toeten()
                self.arbeiter = None
            if self.arbeiter is None:
                self.arbeiter = _Arbeiter(self.jobs)
                log.info("parse_worker: worker process %s started in %.0f ms", self.arbeiter.pid,
                         self.arbeiter.start_s * 1000)
            return self.arbeiter

    def ersetzen(self, alt: _Arbeiter) -> None:
        """The killed worker reaped and a fresh one started in its place (in a thread of its own)."""
        def run():
            alt.toeten()
            try:
                self.bereit()
            except Exception as e:  # noqa: BLE001 - the next job starts one itself
                log.warning("parse_worker: replacing a worker failed (%s: %s); the next job starts one "
                            "(fallback worker_beim_naechsten_auftrag)", type(e).__name__, e)
        threading.Thread(target=run, name="novaberg-parse-replace", daemon=True).start()


class ParsePool:
    """`slots` worker processes at most, running `jobs` (checked here: `verzeichnis`); a job
    waits at most `wait_s` for a free one."""

    def __init__(self, slots: int, wait_s: float, jobs: Mapping[str, Callable] = JOBS):
        self.slots = slots
        self.wait_s = wait_s
        self.jobs = verzeichnis(jobs)
        self._namen = {fn: name for name, fn in self.jobs.items()}
        self._frei = [_Platz(self.jobs) for _ in range(slots)]
        self._warten: list[asyncio.Future] = []

    async def run(self, fn: Callable, *args, timeout_s: float) -> Any:
        """`fn(*args)` in a worker process within `timeout_s` (not counting the wait for a slot):
        its result, or what it raised; `ParseTimeout` past the time, `ParserBusy` with no slot.
        `fn` must be one of the pool's jobs (ConfigError otherwise)."""
        if fn not in self._namen:
            raise ConfigError(f"{getattr(fn, '__qualname__', fn)!r} is no parse job of this pool "
                              f"({', '.join(sorted(self.jobs))}); the parsers are declared in serve.parse_worker.JOBS")
        platz = await self._nehmen()
        try:
            return await self._im_prozess(platz, fn, args, timeout_s)
        finally:
            self._geben(platz)

    async def _nehmen(self) -> _Platz:
        loop, deadline = asyncio.get_running_loop(), time.monotonic() + self.wait_s
        while not self._frei:
            rest = deadline - time.monotonic()
            fut = loop.create_future()
            self._warten.append(fut)
            try:
                if rest <= 0:
                    raise TimeoutError
                await asyncio.wait_for(fut, rest)
            except TimeoutError:
                log.warning("parse_worker: all %d parser slots stayed busy for %.1f s; refused "
                            "(fallback parser_belegt)", self.slots, self.wait_s)
                raise ParserBusy(f"all {self.slots} parsers stayed busy for {self.wait_s:.0f} s") from None
            finally:
                if fut in self._warten:
                    self._warten.remove(fut)
        return self._frei.pop()

    def _geben(self, platz: _Platz) -> None:
        self._frei.append(platz)
        while self._warten:
            fut = self._warten.pop(0)
            if not fut.done():
                fut.set_result(None)
                return

    async def _im_prozess(self, platz: _Platz, fn: Callable, args: tuple, timeout_s: float) -> Any:
        try:
            arbeiter = await asyncio.to_thread(platz.bereit)
        except (ParseFailed, OSError) as e:
            log.warning("parse_worker: no parser process could be started (%s: %s); refused "
                        "(fallback parser_startet_nicht)", type(e).__name__, e)
            raise ParserBusy(f"no parser process could be started ({e})") from None
        try:
            kind, value = await asyncio.wait_for(self._auftrag(arbeiter, fn, args), timeout_s)
        except asyncio.CancelledError:  # the request went away: its job may still run, the worker goes too
            platz.arbeiter = None
            arbeiter.proc.kill()
            platz.ersetzen(arbeiter)
            raise
        except TimeoutError:
            platz.arbeiter = None
            arbeiter.proc.kill()  # at once; reaped and replaced off the loop
            platz.ersetzen(arbeiter)
            log.warning("parse_worker: %s ran past %.1f s; its process %s killed and replaced "
                        "(fallback parser_zeitlimit)", fn.__name__, timeout_s, arbeiter.pid)
            raise ParseTimeout(f"not parsed within {timeout_s:g} s") from None
        except (EOFError, OSError, BrokenPipeError) as e:
            platz.arbeiter = None
            code = await asyncio.to_thread(_exitcode, arbeiter.proc)
            platz.ersetzen(arbeiter)
            log.warning("parse_worker: the process of %s ended without an answer (%s, exit code %s); "
                        "replaced (fallback parser_abgestuerzt)", fn.__name__, type(e).__name__, code)
            raise ParseFailed(f"the parser's process ended without an answer (exit code {code})") from None
        if kind == "ok":
            return value
        raise value

    async def _auftrag(self, arbeiter: _Arbeiter, fn: Callable, args: tuple) -> tuple[str, Any]:
        """The job sent and its outcome received; the pipe's blocking ends run in threads, which
        end as soon as the process does (a kill closes its end)."""
        job = (self._namen[fn], args)
        await asyncio.to_thread(arbeiter.auftraege.send, job)
        await _lesbar(arbeiter.conn.fileno())
        return await asyncio.to_thread(arbeiter.conn.recv)

    def schliessen(self) -> None:
        """Every worker process stopped (blocking)."""
        for platz in self._frei:
            with platz.lock:
                if platz.arbeiter is not None:
                    platz.arbeiter.toeten()
                    platz.arbeiter = None


def _exitcode(proc: subprocess.Popen) -> int | None:
    try:
        return proc.wait(2)
    except subprocess.TimeoutExpired:
        return None


async def _lesbar(fd: int) -> None:
    """Until `fd` has something to read (or its other end closed)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def ready():
        if not fut.done():
            fut.set_result(None)
    loop.add_reader(fd, ready)
    try:
        await fut
    finally:
        loop.remove_reader(fd)


_POOLS: dict[tuple[int, float], ParsePool] = {}
"""The replica's pool, by its settings."""


def pool(slots: int, wait_s: float) -> ParsePool:
    """The process's pool of parsers for these settings (created on first use)."""
    key = (slots, wait_s)
    if key not in _POOLS:
        _POOLS[key] = ParsePool(slots, wait_s)
    return _POOLS[key]
