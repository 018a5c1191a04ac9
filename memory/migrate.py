"""Versioned plain-SQL migrations (`memory/migrations/NNNN_name.sql`), applied at start.

Idempotent: each version is applied once, recorded in `schema_migrations`, under an advisory
lock so that concurrent starters do not race. The embedding dimension is part of the schema and
is checked against the stored one: a different model needs a migration, not a silent mismatch.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

import psycopg

from core.errors import StoreError

log = logging.getLogger("novaberg.migrate")

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_LOCK_ID = 7_424_011  # advisory lock key for migrations
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class SchemaMismatch(StoreError, RuntimeError):
    """The stored schema was made for another embedding dimension."""


def migration_files() -> list[tuple[int, str, Path]]:
    out = []
    for p in sorted(MIGRATIONS_DIR.glob("*.sql")):
        m = _NAME.match(p.name)
        if not m:
            raise ValueError(f"migration file name not NNNN_name.sql: {p.name}")
        out.append((int(m.group(1)), m.group(2), p))
    return out


def apply_migrations(database_url: str, embed_dim: int) -> list[int]:
    """Apply pending migrations; return the versions applied now."""
    applied_now: list[int] = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            for version, name, path in migration_files():
                if version in done:
                    continue
                sql = path.read_text().replace("{{EMBED_DIM}}", str(int(embed_dim)))
                with conn.transaction():
                    conn.execute(sql)
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
                    )
                    if version == 1:
                        conn.execute(
                            "INSERT INTO meta (key, value) VALUES ('embed_dim', %s)"
                            " ON CONFLICT (key) DO NOTHING",
                            (str(embed_dim),),
                        )
                applied_now.append(version)
                log.info("migration %04d_%s applied", version, name)
            row = conn.execute("SELECT value FROM meta WHERE key = 'embed_dim'").fetchone()
            if row and int(row[0]) != int(embed_dim):
                raise SchemaMismatch(
                    f"schema was built for embedding dimension {row[0]}, the embedder gives {embed_dim}"
                )
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))
    return applied_now
