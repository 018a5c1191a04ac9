"""The local raylet gets WORKER_ENV in its environment for the time of `ray.init`; the driver's
environment is as it was afterwards — values it had come back, values it lacked are gone."""
import os

import pytest

from cluster import runtime


def test_the_environment_is_extended_for_the_block_and_restored_after(monkeypatch):
    monkeypatch.setenv("NB_TEST_HAD", "alt")
    monkeypatch.delenv("NB_TEST_NEW", raising=False)
    with runtime._environment({"NB_TEST_HAD": "neu", "NB_TEST_NEW": "1"}):
        assert os.environ["NB_TEST_HAD"] == "neu" and os.environ["NB_TEST_NEW"] == "1"
    assert os.environ["NB_TEST_HAD"] == "alt" and "NB_TEST_NEW" not in os.environ


def test_the_environment_is_restored_when_the_block_fails(monkeypatch):
    monkeypatch.delenv("NB_TEST_NEW", raising=False)
    with pytest.raises(RuntimeError):
        with runtime._environment({"NB_TEST_NEW": "1"}):
            raise RuntimeError("ray.init failed")
    assert "NB_TEST_NEW" not in os.environ


def _settings(**kw):
    from core.settings import Settings

    return Settings(http_port=8123, **kw)


def test_a_local_ray_with_one_ingress_replica_gets_the_direct_front(caplog):
    with caplog.at_level("WARNING", logger="novaberg.runtime"):
        assert runtime.http_front(_settings(), ray_started=False) == "direct"
    assert "fallback" not in caplog.text


@pytest.mark.parametrize("kw, started, reason", [
    ({"ray_address": "auto"}, False, "the cluster is attached"),
    ({"ingress_replicas": 2}, False, "2 ingress replicas"),
    ({}, True, "Ray was started before"),
])
def test_a_direct_front_it_cannot_have_falls_back_to_the_proxy_by_name(caplog, kw, started, reason):
    with caplog.at_level("WARNING", logger="novaberg.runtime"):
        assert runtime.http_front(_settings(**kw), ray_started=started) == "proxy"
    assert "fallback http_front_proxy: Serve's proxy answers port 8123" in caplog.text and reason in caplog.text


def test_the_proxy_front_is_taken_as_asked_without_a_fallback(caplog):
    with caplog.at_level("WARNING", logger="novaberg.runtime"):
        assert runtime.http_front(_settings(http_front="proxy", ingress_replicas=3), ray_started=False) == "proxy"
    assert "fallback" not in caplog.text


def test_the_direct_front_environment_gives_the_first_ingress_replica_the_http_port():
    from core.settings import DIRECT_FRONT_PORTS, direct_front_env

    env = direct_front_env(8123)
    assert env["RAY_SERVE_ENABLE_DIRECT_INGRESS"] == "1"
    # Serve allocates the lowest free port of range(min, max): ours first, another app's after it
    ports = range(int(env["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"]), int(env["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"]))
    assert ports[0] == 8123 and len(ports) == DIRECT_FRONT_PORTS
    # no drain for a load balancer and no quarantine: a replaced replica gets the port back at once
    assert env["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] == "0" and env["RAY_SERVE_PORT_QUARANTINE_S"] == "0"


def test_a_taken_http_port_is_refused_by_name_before_anything_starts(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        from core.settings import Settings

        settings = Settings(home=tmp_path, http_port=port, database_url="postgresql://x@127.0.0.1:1/x",
                            redis_url="redis://127.0.0.1:1")
        from core.errors import ConfigError

        with pytest.raises(ConfigError, match=f"the HTTP port 127.0.0.1:{port} is taken"):
            runtime.start(settings)


def test_a_port_whose_connections_linger_after_a_stop_is_free():
    # a system stopped a moment ago: its server closed a connection first, which lingers in
    # TIME_WAIT on the port; the next start may bind it (the ingress replica binds with reuse too)
    import socket

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the ingress replica binds
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    conn, _ = srv.accept()
    conn.close()  # the server's side closes first: its end goes to TIME_WAIT
    cli.recv(1)
    cli.close()
    srv.close()
    with socket.socket() as plain:  # what the check did before: refused while the connection lingers
        with pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))
    assert runtime._free_port("127.0.0.1", port) == port
