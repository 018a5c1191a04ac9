"""The cluster path (issue #14): `novaberg up` deploys onto a Ray cluster that was already there,
with the stores by URL, and `down` removes only what it deployed — the cluster stays."""
import httpx
import pytest
import ray
from ray import cloudpickle

from core.errors import ConfigError
from tests import scripted_engine
from tests.cluster.conftest import local_cluster
from tests.conftest import auth

pytestmark = pytest.mark.e2e

cloudpickle.register_pickle_by_value(scripted_engine)


def test_attach_to_a_running_cluster_and_leave_it_running(settings, migrated):
    from cluster import runtime

    assert not ray.is_initialized()
    cluster = local_cluster(num_cpus=2)
    try:
        attached = settings.model_copy(update={"ray_address": cluster.address})
        with pytest.raises(ConfigError, match="needs external stores"):
            runtime.start(attached.model_copy(update={"redis_url": None}))
        rt = runtime.start(attached, engine=scripted_engine.ScriptedEngine.with_script(latency_s=0.05))
        try:
            assert ray.get_runtime_context().gcs_address == cluster.address  # joined, not started
            key = runtime.create_key("attach")
            r = httpx.post(f"{rt.url}/v1/pairs/attach/nova/turns", json={"text": "Hallo"}, headers=auth(key),
                           timeout=120)
            assert r.status_code == 200 and r.json()["reply"]
            from actors.activation import pair_actor

            assert ray.get(pair_actor(attached, "attach", "nova").status.remote())["user_id"] == "attach"
        finally:
            runtime.stop(rt, stop_stores=False)
        # the cluster is still there, without the app, its pairs and its workers
        ray.init(address=cluster.address)
        try:
            left = {(a["namespace"], a["name"]) for a in ray.util.list_named_actors(all_namespaces=True)}
            assert not [n for ns, n in left if ns == settings.namespace], left
            from ray import serve

            assert "novaberg" not in serve.status().applications
        finally:
            ray.shutdown()
    finally:
        cluster.shutdown()
