"""A command that starts the embedded stores (`novaberg memory search` with the system down)
stops what it started and nothing else: a second handle that found them running leaves them."""
from memory.embedded import EmbeddedStores, _redis_alive


def test_a_handle_stops_only_what_it_started(tmp_path):
    first = EmbeddedStores(home=tmp_path).start()
    try:
        assert first.started_postgres and first.started_redis
        second = EmbeddedStores(home=tmp_path).start()
        assert not second.started_postgres and not second.started_redis
        second.stop_started()  # found them running: leaves them
        assert (tmp_path / "pgdata" / "postmaster.pid").exists() and _redis_alive(tmp_path / "redis" / "redis.sock")
        first.stop_started()
        assert not (tmp_path / "pgdata" / "postmaster.pid").exists()
        assert not _redis_alive(tmp_path / "redis" / "redis.sock")
    finally:
        first.stop()
