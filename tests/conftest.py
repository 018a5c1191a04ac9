"""Test fixtures shared by the tiers: the real stores (once per session), and the helpers the
app and model tiers use to bring up Ray and Serve (once per tier: `tests/app` with the scripted
engine, `tests/model` with the real model; each tier's conftest says which)."""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "token")  # as the product runs
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def home():
    # short path: unix socket paths must stay under 108 bytes
    d = Path(tempfile.mkdtemp(prefix="nbt-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def stores(home):
    from memory.embedded import EmbeddedStores

    s = EmbeddedStores(home=home).start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def migrated(stores):
    """The schema, migrated with MiniLM's dimension (384) without loading the model."""
    from memory.migrate import apply_migrations

    apply_migrations(stores.database_url, 384)
    return stores


@pytest.fixture(scope="session")
def settings(home, stores):
    from core.settings import Settings

    return Settings(home=home, database_url=stores.database_url, redis_url=stores.redis_url,
                    http_port=_free_port(), node_max_tokens={"*": 24}, pair_idle_timeout_s=6.0,
                    outbox_claim_idle_ms=30000, outbox_block_ms=200, llm_ctx=4096,
                    # the tiny model never speaks the Thinker's protocol: two iterations show the path
                    thinker_max_iterations=2,
                    # every test talks from 127.0.0.1, and the fuzzing and auth tests are refused by design
                    # (the limits themselves: tests/unit/test_auth_limit.py, tests/unit/test_body_budget.py)
                    auth_failures_per_minute=1_000_000, body_bytes_per_key_per_minute=1 << 40,
                    body_bytes_per_address_per_minute=1 << 40)


RAY_STARTS = 2
"""Attempts at a tier's Ray. On two shared cores a new Ray in the same test process has now and
then not come up after the tier before it had shut its own down: its GCS ran and its raylet never
started ("The current node timed out during startup"), or its GCS did not write its port within
Ray's 30 s ("Timed out waiting for file …/gcs_server_port_…"). Only those failures are tried once
more, said on stderr with the tail of the failed start's own logs; any other fails the tier at once."""

STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")


def _startup_logs(error: Exception, lines: int = 20) -> str:
    """The end of the GCS's and the raylet's logs of the session that did not come up."""
    import re

    m = re.search(r"(/\S+/session_[^/\s]+)", str(error))
    if not m:
        return ""
    out = []
    for name in ("gcs_server.out", "gcs_server.err", "raylet.out", "raylet.err"):
        path = Path(m.group(1)) / "logs" / name
        if path.is_file():
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path}\n" + "\n".join(tail))
    return "\n".join(out)


def start_system(settings, engine=None):
    """Ray + Serve + outbox workers on the session's stores, with an injected engine or the real
    model; a generator for a tier's `system` fixture (taken down when the tier is done)."""
    import ray

    from cluster import runtime

    for attempt in range(1, RAY_STARTS + 1):
        try:
            rt = runtime.start(settings, engine=engine)
            break
        except Exception as e:
            if attempt == RAY_STARTS or not any(t in str(e) for t in STARTUP_TIMEOUTS):
                raise
            print(f"the tier's Ray did not start (attempt {attempt} of {RAY_STARTS}): {e}\n"
                  f"{_startup_logs(e)}", file=sys.stderr)
            ray.shutdown(wait_for_processes=True)
    try:
        yield rt
    finally:
        runtime.stop(rt, stop_stores=False)


def make_keys() -> dict[str, str]:
    from cluster import runtime

    return {
        "alice": runtime.create_key("alice"),
        "bob": runtime.create_key("bob"),
        "operator": runtime.create_key(None, operator=True),
    }


@pytest.fixture()
def client(system):
    import httpx

    with httpx.Client(base_url=system.url, timeout=180) as c:
        yield c


def auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def run(coro):
    return asyncio.run(coro)


async def _pg(database_url: str, fn, *args):
    from memory import pg

    pool = pg.open_pool(database_url, 1, 1)
    await pool.open(wait=True)
    try:
        return await fn(pool, *args)
    finally:
        await pool.close()


def pg_call(database_url: str, fn, *args):
    """Run one of memory.pg's queries from a test."""
    return asyncio.run(_pg(database_url, fn, *args))


async def _redis(url: str, fn, *args):
    from redis.asyncio import Redis

    r = Redis.from_url(url)
    try:
        return await fn(r, *args)
    finally:
        await r.aclose()


def redis_call(url: str, fn, *args):
    return asyncio.run(_redis(url, fn, *args))


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.25):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


DIM = 384


def unit(i: int):
    """The i-th basis vector of the embedding space."""
    import numpy as np

    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


def at_cosine(c: float, axis: int = 1, base: int = 0):
    """A unit vector whose cosine to unit(base) is exactly c (rotated towards unit(axis))."""
    import math

    return unit(base) * c + unit(axis) * math.sqrt(max(0.0, 1 - c * c))


@pytest.fixture()
def pool(migrated):
    """A fresh async pool per test (each test runs its own event loop)."""
    return migrated.database_url


def new_pair(prefix: str = "p") -> tuple[str, str]:
    import uuid

    return f"{prefix}-{uuid.uuid4().hex[:8]}", "nova"


async def with_pool(database_url: str, fn):
    from memory import pg

    p = pg.open_pool(database_url, 1, 2)
    await p.open(wait=True)
    try:
        return await fn(p)
    finally:
        await p.close()


@pytest.fixture(scope="session")
def minilm():
    """The real embedder model, loaded once (for import and retrieval tests)."""
    from serve.embedder import load_model

    return load_model(2)


def embed_with(model):
    from serve.embedder import encode

    return lambda texts: encode(model, texts)


@pytest.fixture()
def character(system, keys):
    """Make a fresh character through the API (the operator key) and return its id: a new pair
    for each test, since unknown characters get 404. Named Nova unless told otherwise."""
    import uuid

    import httpx

    def make(prefix: str = "ch", **fields) -> str:
        cid = f"{prefix}-{uuid.uuid4().hex[:6]}"
        r = httpx.post(f"{system.url}/v1/characters", json={"character_id": cid, "name": "Nova", **fields},
                       headers=auth(keys["operator"]), timeout=60)
        assert r.status_code == 201, r.text
        return cid

    return make
