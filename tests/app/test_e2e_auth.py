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
