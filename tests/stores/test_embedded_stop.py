"""A command that starts the embedded stores (`novaberg memory search` with the system down)
stops what it started and nothing else: a second handle that found them running leaves them.
Shown with the embedded Redis (a second embedded Postgres beside the tier's would only test the
machine's shared memory); Postgres follows the same flags by its postmaster.pid."""
from memory.embedded import EmbeddedStores, _redis_alive


def test_a_handle_stops_only_what_it_started(tmp_path):
    sock = tmp_path / "redis" / "redis.sock"
    first = EmbeddedStores(home=tmp_path).start(postgres=False)
    try:
        assert first.started_redis and not first.started_postgres
        second = EmbeddedStores(home=tmp_path).start(postgres=False)
        assert not second.started_redis
        second.stop_started()  # found it running: leaves it
        assert _redis_alive(sock)
        first.stop_started()
        assert not _redis_alive(sock)
    finally:
        first.stop(postgres=False)
