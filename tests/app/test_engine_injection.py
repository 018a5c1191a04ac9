"""The app tier really runs the injected scripted engine inside the real LLM deployment: the
turn's model, the deployment's load and the streamed tokens all come from it."""
from tests.conftest import auth


def test_the_llm_deployment_runs_the_injected_engine(client, keys, character):
    ch = character("inject")
    r = client.post(f"/v1/pairs/alice/{ch}/turns", json={"text": "Hallo!"}, headers=auth(keys["alice"]))
    assert r.status_code == 200, r.text
    assert r.json()["model"] == "scripted-engine"
    assert r.json()["reply"] == "Schoen, dass du da bist. Erzaehl mir mehr davon."
    llm = client.get("/v1/operator/status", headers=auth(keys["operator"])).json()["llm"]
    assert llm["model"] == "scripted-engine" and llm["scripted_calls"] > 0
