"""Migrations apply once, under a lock, and guard the embedding dimension."""
import psycopg
import pytest

from memory.migrate import SchemaMismatch, apply_migrations, migration_files


def test_migrations_are_idempotent(migrated):
    assert apply_migrations(migrated.database_url, 384) == []
    with psycopg.connect(migrated.database_url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
        dim = conn.execute("SELECT value FROM meta WHERE key = 'embed_dim'").fetchone()[0]
        ext = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert versions == [v for v, _, _ in migration_files()]
    assert dim == "384"
    assert ext is not None


def test_another_dimension_is_refused(migrated):
    with pytest.raises(SchemaMismatch, match="384"):
        apply_migrations(migrated.database_url, 768)
