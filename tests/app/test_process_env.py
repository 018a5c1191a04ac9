"""The environment the system's processes run with arrives where it is read: the Serve
controller gets CONTROLLER_ENV (its reconcile interval), every replica and pair actor WORKER_ENV."""
import psutil

from core.settings import CONTROLLER_ENV, WORKER_ENV
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


def _listeners(port: int) -> set[int]:
    """The processes that listen on `port` here."""
    return {c.pid for c in psutil.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN and c.laddr.port == port}


def _listener(port: int) -> str:
    """The process title of whoever listens on `port` here."""
    (pid,) = _listeners(port)
    return psutil.Process(pid).cmdline()[0]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_ingress_replica_answers_the_http_port_itself(system, client, keys, character):
    """The direct front (Settings.http_front): the port is the ingress replica's, and every route
    answers there — a turn, a streamed turn and the health check; Serve's proxy listens elsewhere."""
    assert system.front == "direct"
    assert _listener(system.settings.http_port).startswith("ray::ServeReplica:novaberg:Ingress")
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and isinstance(health["agenten"], list)
    cid = character("vorne")
    r = client.post(f"/v1/pairs/alice/{cid}/turns", json={"text": "Hallo!"}, headers=auth(keys["alice"]))
    assert r.status_code == 200 and r.json()["reply"], r.text
    with client.stream("POST", f"/v1/pairs/alice/{cid}/turns?stream=true", json={"text": "Und jetzt?"},
                       headers=auth(keys["alice"])) as s:
        events = [line.split(":", 1)[1].strip() for line in s.iter_lines() if line.startswith("event:")]
    assert s.status_code == 200 and events[-1] == "final" and "node_started" in events


def test_the_http_port_survives_its_ingress_replica(system, keys, character):
    """An ingress replica that dies leaves its connections in TIME_WAIT on the port; its replacement
    binds the port again (serve/direct_front.py) and answers there, not on another one."""
    import time

    import httpx
    import ray

    port = system.settings.http_port
    (old_pid,) = _listeners(port)
    with httpx.Client(base_url=system.url, timeout=60) as c:  # connections the dying replica holds
        for _ in range(3):
            assert c.get("/healthz").status_code == 200
        (old,) = [a for a in ray.util.list_named_actors(all_namespaces=True)
                  if a["name"].startswith("SERVE_REPLICA::") and "#Ingress#" in a["name"]]
        ray.kill(ray.get_actor(old["name"], namespace=old["namespace"]), no_restart=True)
    deadline = time.monotonic() + 30
    while not _gone(old_pid):  # ray.kill returns at once: until it is gone the old replica still answers
        assert time.monotonic() < deadline, "the killed ingress replica did not exit"
        time.sleep(0.2)

    def answers():
        try:
            return httpx.get(f"{system.url}/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    deadline = time.monotonic() + 90
    while not answers():
        assert time.monotonic() < deadline, "the API did not come back on its port"
        time.sleep(0.5)
    assert old_pid not in _listeners(port)
    assert _listener(port).startswith("ray::ServeReplica:novaberg:Ingress")
    r = httpx.post(f"{system.url}/v1/pairs/alice/{character('zurueck')}/turns", json={"text": "Bist du wieder da?"},
                   headers=auth(keys["alice"]), timeout=120)
    assert r.status_code == 200, r.text
