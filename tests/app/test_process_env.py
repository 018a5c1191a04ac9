"""The environment the system's processes run with arrives where it is read: the Serve
controller gets CONTROLLER_ENV (its reconcile interval), every replica and pair actor WORKER_ENV."""
import psutil

from cluster.settings import CONTROLLER_ENV, WORKER_ENV
from tests.conftest import auth


def _environ(title: str) -> list[dict[str, str]]:
    out = []
    for p in psutil.process_iter():
        try:
            cmd = p.cmdline()
            if cmd and cmd[0].startswith(title):
                out.append(p.environ())
        except psutil.Error:
            continue
    return out


def test_the_controller_and_the_workers_run_with_their_environment(system, client, keys, character):
    r = client.post(f"/v1/pairs/alice/{character('umgebung')}/turns", json={"text": "Hallo!"}, headers=auth(keys["alice"]))
    assert r.status_code == 200, r.text  # a pair actor is alive now
    (controller,) = _environ("ray::ServeController")
    assert {k: controller.get(k) for k in CONTROLLER_ENV} == CONTROLLER_ENV
    for title in ("ray::ServeReplica:novaberg:LLM", "ray::ServeReplica:novaberg:Store", "ray::PairActor"):
        envs = _environ(title)
        assert envs and all({k: e.get(k) for k in WORKER_ENV} == WORKER_ENV for e in envs), title
