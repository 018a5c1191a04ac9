"""Keys are bound to users: a key reaches only its own user's pairs; operator keys reach all."""
import pytest

from tests.conftest import auth

pytestmark = pytest.mark.e2e


def test_missing_or_unknown_key_is_401(client):
    assert client.get("/v1/pairs/alice/nova/turns").status_code == 401
    r = client.get("/v1/pairs/alice/nova/turns", headers=auth("nbk_not-a-key"))
    assert r.status_code == 401 and "unknown" in r.json()["error"]["message"]


def test_second_users_key_gets_403_on_the_first_users_pair(client, keys):
    h = auth(keys["bob"])
    r = client.post("/v1/pairs/alice/nova/turns", json={"text": "hi"}, headers=h)
    assert r.status_code == 403
    assert client.get("/v1/pairs/alice/nova/turns", headers=h).status_code == 403
    assert client.get("/v1/pairs/bob/nova/turns", headers=h).status_code == 200


def test_operator_endpoints_need_the_operator_key(client, keys):
    assert client.get("/v1/operator/status", headers=auth(keys["alice"])).status_code == 403
    st = client.get("/v1/operator/status", headers=auth(keys["operator"]))
    assert st.status_code == 200 and "outbox" in st.json()
    made = client.post("/v1/operator/keys", json={"user_id": "carol"}, headers=auth(keys["operator"]))
    assert made.status_code == 200
    carol = made.json()["api_key"]
    assert client.get("/v1/pairs/carol/nova/turns", headers=auth(carol)).status_code == 200
    assert client.get("/v1/pairs/alice/nova/turns", headers=auth(carol)).status_code == 403


def test_ray_itself_refuses_a_driver_without_the_token(client, keys, settings, tmp_path):
    """Past the API: a process that reaches Ray's GCS but holds no token cannot join the cluster,
    so it cannot call a pair actor's history (Ray token authentication is on)."""
    import os
    import subprocess
    import sys

    import ray

    from actors.activation import pair_actor

    assert client.post("/v1/pairs/alice/nova/turns", json={"text": "Geheim: mein Hund heisst Bello."},
                       headers=auth(keys["alice"])).status_code == 200
    aktor = ray.get(pair_actor(settings, "alice", "nova").status.remote())["process"]
    gcs = ray.get_runtime_context().gcs_address
    namespace = ray.get_runtime_context().namespace
    code = (f"import ray; ray.init(address={gcs!r}, namespace={namespace!r}); "
            f"print(ray.get(ray.get_actor({aktor!r}).history.remote()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_TOKEN")}
    for mode in ("disabled", "token"):  # claiming auth is off changes nothing; having no token is the point
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**env, "HOME": str(tmp_path), "RAY_AUTH_MODE": mode})
        assert r.returncode != 0 and "Bello" not in r.stdout, (mode, r.stdout[-500:])
        assert "AuthenticationError" in r.stderr, (mode, r.stderr[-800:])
    # with the token the same address is joined: the refusal is the token's, not a wrong address
    join = f"import ray; ray.init(address={gcs!r}, namespace={namespace!r}); print('joined')"
    ok = subprocess.run([sys.executable, "-c", join], capture_output=True, text=True, timeout=120,
                        env={**os.environ, "RAY_AUTH_MODE": "token"})
    assert ok.returncode == 0 and "joined" in ok.stdout, ok.stderr[-800:]
