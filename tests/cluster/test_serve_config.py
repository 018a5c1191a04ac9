"""The Serve config (issue #14): `cluster/serve_config.yaml` is what the builder makes (it cannot
drift), and `serve run` of it brings up a working system — turns answered by the real model, the
background chain done by the workers the ingress made."""
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
import yaml

from cluster import serve_config
from tests.conftest import auth

pytestmark = pytest.mark.e2e


def test_the_file_is_what_the_builder_makes():
    assert serve_config.PATH.read_text(encoding="utf-8") == serve_config.render(), \
        "run `python -m cluster.serve_config > cluster/serve_config.yaml`"
    app = yaml.safe_load(serve_config.PATH.read_text())["applications"][0]
    assert app["import_path"] == "serve.app:app_builder"
    names = [d["name"] for d in app["deployments"]]
    assert names == ["Embedder", "Store", "LLM", "Web", "Ingress"]
    assert all("max_ongoing_requests" in d and "ray_actor_options" in d for d in app["deployments"])


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "serve run ended early"
        try:
            if httpx.get(f"{url}/healthz", timeout=3).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise AssertionError(f"not healthy within {timeout}s")


def test_serve_run_of_the_file_brings_up_a_working_system(settings, migrated, tmp_path):
    import ray

    assert not ray.is_initialized()
    port = _port()
    cfg = yaml.safe_load(serve_config.PATH.read_text())
    cfg["http_options"] = {"host": "127.0.0.1", "port": port}  # a free port; the rest as generated
    path = tmp_path / "serve_config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "DATABASE_URL": settings.database_url, "REDIS_URL": settings.redis_url,
           "NOVABERG_HOME": str(tmp_path / "home"), "NOVABERG_NODE_MAX_TOKENS": '{"*": 24}',
           "NOVABERG_THINKER_MAX_ITERATIONS": "2", "NOVABERG_NAMESPACE": "novaberg-config",
           "RAY_AUTH_MODE": "token"}
    serve_bin = os.path.join(os.path.dirname(sys.executable), "serve")
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen([serve_bin, "run", str(path)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            cwd=serve_config.PATH.parents[1], start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, 420)
        boot = subprocess.run([os.path.join(os.path.dirname(sys.executable), "novaberg"), "key", "bootstrap"],
                              env=env, capture_output=True, text=True, timeout=60)
        op = boot.stdout.strip().splitlines()[-1]
        made = httpx.post(f"{url}/v1/operator/keys", json={"user_id": "cfg"}, headers=auth(op), timeout=30)
        assert op.startswith("nbo_") and made.status_code == 200, (boot.stderr[-500:], made.text)
        key = made.json()["api_key"]
        r = httpx.post(f"{url}/v1/pairs/cfg/nova/turns", json={"text": "Hallo, ich bin neu hier."},
                       headers=auth(key), timeout=300)
        assert r.status_code == 200 and r.json()["reply"], r.text
        # the workers the ingress made take the background job
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            ob = httpx.get(f"{url}/v1/operator/status", headers=auth(op), timeout=30).json()["outbox"]
            if not ob.get("pending") and not ob.get("undelivered"):
                break
            time.sleep(2)
        assert not ob.get("pending") and not ob.get("undelivered"), ob
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # serve run takes its own local Ray down
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
