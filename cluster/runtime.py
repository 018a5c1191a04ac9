"""Bring the whole system up in this process (stores, Ray, the Serve app, the outbox workers)
and take it down again. Used by the CLI's daemon and by the test session."""
from __future__ import annotations

import logging
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigError
from core.names import APP_NAME, STORE_DEPLOYMENT
from core.settings import CONTROLLER_ENV, WORKER_ENV, Settings, direct_front_env
from memory.embedded import EmbeddedStores, resolve_store_urls
from pipeline.node_config import check_budgets

log = logging.getLogger("novaberg.runtime")


@dataclass
class Runtime:
    settings: Settings
    stores: EmbeddedStores
    front: str = "proxy"
    """Who answers the HTTP port: `direct` (the ingress replica) or `proxy` (Serve's proxy)."""

    @property
    def url(self) -> str:
        return self.settings.url


def attached(settings: Settings) -> bool:
    """Deployed onto a cluster that was there before (`ray_address` other than `local`)."""
    return settings.ray_address != "local"


@contextmanager
def _environment(extra: dict[str, str]):
    """`extra` in this process's environment for the block, the environment as it was afterwards."""
    before = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def http_front(settings: Settings, ray_started: bool) -> str:
    """The HTTP front this start gets (Settings.http_front); a `direct` front it cannot have falls
    back to Serve's proxy, by name, with the reason."""
    if settings.http_front == "proxy":
        return "proxy"
    why = ("the cluster is attached: its Serve controller and proxies are the operator's" if attached(settings)
           else f"{settings.ingress_replicas} ingress replicas: one port is answered by one replica"
           if settings.ingress_replicas != 1
           else "Ray was started before: its Serve controller does not know the front" if ray_started else None)
    if why is None:
        return "direct"
    log.warning("fallback http_front_proxy: Serve's proxy answers port %d (%s)", settings.http_port, why)
    return "proxy"


def _free_port(host: str, port: int = 0) -> int:
    """`port` on `host` if it is free (0: any free port); OSError when it is taken. A port whose
    last connections linger in TIME_WAIT (a system stopped a moment ago) is free: the ingress
    replica binds it with SO_REUSEADDR too (serve/direct_front.py); a listening socket is not."""
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        return s.getsockname()[1]


def _ray_init(settings: Settings, ray_tmp: Path, env: dict[str, str]) -> None:
    import ray

    if attached(settings):
        # the cluster is the operator's: its raylets do not know our environment, so it travels in
        # the job's runtime_env (every process of the job but this driver); its object store and
        # session folders are theirs
        ray.init(address=settings.ray_address, namespace=settings.namespace, log_to_driver=False,
                 runtime_env={"env_vars": dict(WORKER_ENV)})
        return
    # A local raylet starts here and hands its environment to every worker it starts: WORKER_ENV
    # goes there instead of into a runtime_env. Ray starts a worker of a job with a runtime_env
    # through its runtime-env agent and prestarts none for it — a pair actor's process took 0.62 s
    # to come up instead of 0.35 s (README, "A new pair's first turn"). This driver keeps its own
    # environment: Serve read its constants when `start` imported it.
    with _environment(env):
        ray.init(address="local", namespace=settings.namespace, include_dashboard=False,
                 object_store_memory=settings.object_store_mb * 1024 * 1024, _temp_dir=str(ray_tmp),
                 log_to_driver=False)


def start(settings: Settings, *, engine=None) -> Runtime:
    """`engine`: an engine class injected into the LLM deployment (see serve.app.build_app)."""
    check_budgets(settings)  # before anything starts: a node budget above llm_max_tokens stops the start
    # token authentication: Ray's GCS listens on every interface, and without a token anyone who
    # reaches its port could call a pair actor past every API check. A local start writes the token
    # to ~/.ray/auth_token; on a cluster every node gets it (README, Ray's own door). Ray reads the
    # mode when it is first imported: set it before that.
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray
    from ray import serve

    from actors.worker import start_workers
    from serve.app import build_app

    t0 = time.monotonic()
    if attached(settings) and not (settings.database_url and settings.redis_url):
        raise ConfigError(f"deploying onto the cluster at {settings.ray_address!r} needs external stores: set "
                         "DATABASE_URL and REDIS_URL (embedded ones would live on this machine only)")
    front = http_front(settings, ray.is_initialized())
    if front == "direct":
        try:  # Serve would hand a taken port's replica the next one of its range: say it here instead
            _free_port(settings.http_host, settings.http_port)
        except OSError as e:
            raise ConfigError(f"the HTTP port {settings.http_host}:{settings.http_port} is taken ({e}): "
                              "set NOVABERG_HTTP_PORT to a free one") from e
    stores = resolve_store_urls(settings.home, settings.database_url, settings.redis_url)
    if settings.redis_url:
        from memory.embedded import check_redis

        for warnung in check_redis(settings.redis_url, settings.redis_allow_eviction):
            print(f"warning: the external Redis {warnung}", file=sys.stderr)
    settings = settings.model_copy(update={"database_url": stores.database_url, "redis_url": stores.redis_url})
    ray_tmp = Path("/tmp") / f"nbray-{os.getuid()}-{abs(hash(str(settings.home))) % 10**8}"
    # Ray's session folders are never deleted; keep them in one place per home and short enough
    # for unix socket paths
    if not ray.is_initialized():
        _ray_init(settings, ray_tmp, {**WORKER_ENV, **(direct_front_env(settings.http_port) if front == "direct" else {})})
    # a direct front: the ingress replica answers http_port, Serve's proxy a free port beside it
    proxy_port = _free_port(settings.http_host) if front == "direct" else settings.http_port
    serve.start(http_options={"host": settings.http_host, "port": proxy_port},
                proxy_location=settings.proxy_location,
                controller_options={"runtime_env": {"env_vars": dict(CONTROLLER_ENV)}})
    serve.run(build_app(settings, engine), name=APP_NAME, route_prefix="/", blocking=False)
    serve.get_deployment_handle(STORE_DEPLOYMENT, app_name=APP_NAME).ready.remote().result(timeout_s=120)
    start_workers(settings)
    from actors.pixie import start_pixie

    start_pixie(settings)
    log.info("novaberg up in %.1fs at %s (HTTP front: %s)", time.monotonic() - t0, settings.url, front)
    return Runtime(settings=settings, stores=stores, front=front)


def stop(rt: Runtime, *, stop_stores: bool = True) -> None:
    import ray

    from actors.worker import stop_workers

    if ray.is_initialized():
        try:
            from actors.pixie import stop_pixie

            stop_workers(rt.settings)
            stop_pixie(rt.settings)
        except Exception:
            log.warning("stopping outbox workers or the pixie failed", exc_info=True)
        if attached(rt.settings):
            # the cluster stays: remove only what `start` deployed, then disconnect
            from ray import serve

            try:
                serve.delete(APP_NAME)
            except Exception:
                log.warning("removing the Serve app %s failed", APP_NAME, exc_info=True)
            _kill_pairs(rt.settings)
            ray.shutdown()
        else:
            _kill_pairs(rt.settings)  # the registry's keys go with them: a restart finds none stale
            # our own local Ray: this stops Serve and every actor; return when its raylet and GCS
            # have exited, so that a Ray started next (the next test tier, a restarted daemon)
            # does not come up beside a cluster still going down
            ray.shutdown(wait_for_processes=True)
    if stop_stores:
        rt.stores.stop()


def _kill_pairs(settings: Settings) -> None:
    """The pair processes this deployment made (detached, `pairhost:…` in its namespace) and the
    registry's keys: their state is in the stores, so they go with the deployment."""
    from actors.activation import alle_stoppen

    alle_stoppen(settings)


def create_key(user_id: str | None, *, operator: bool = False, label: str = "") -> str:
    from ray import serve

    store = serve.get_deployment_handle(STORE_DEPLOYMENT, app_name=APP_NAME)
    return store.create_api_key.remote(user_id, operator, label).result(timeout_s=30)
