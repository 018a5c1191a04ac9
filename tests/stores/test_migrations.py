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


def test_upgrade_keeps_the_pairs_of_characters_nobody_created(migrated, monkeypatch):
    """Before characters were resources any id got a partner; after the upgrade those pairs still
    have their character (named from the id, as before), and Nova is there."""
    import uuid

    from memory import migrate

    db = f"upgrade_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(migrated.database_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
    url = psycopg.conninfo.make_conninfo(migrated.database_url, dbname=db)
    every = migrate.migration_files()
    monkeypatch.setattr(migrate, "migration_files", lambda: [m for m in every if m[0] < 4])
    apply_migrations(url, 384)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO pair_profiles (user_id, character_id, nova_kern) VALUES ('u', 'alter_freund', 'x')")
    monkeypatch.setattr(migrate, "migration_files", lambda: every)
    assert apply_migrations(url, 384) == [m[0] for m in every if m[0] >= 4]
    with psycopg.connect(url) as conn:
        names = dict(conn.execute("SELECT character_id, name FROM characters").fetchall())
    assert names == {"alter_freund": "Alter Freund", "nova": "Nova"}
