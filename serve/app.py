"""The one builder that wires the Serve application: deployments get handles in their constructor."""
from __future__ import annotations

from core.errors import ConfigError
from core.settings import Settings, load_settings
from pipeline.node_config import check_budgets
from serve.embedder import EmbedderDeployment
from serve.ingress import Ingress
from serve.llm import LLMDeployment, router_config, vllm_server_app
from serve.nodes import NodeDeployment
from serve.store import StoreDeployment
from serve.web import WebDeployment


def build_app(settings: Settings, engine=None, *, hintergrund: bool = False):
    """The application. `engine`: a backend class (called with the settings) that takes the place
    of the configured one inside the LLM deployment, as Ray Serve LLM takes its engine; the tests
    inject a scripted engine this way. None: the backend the settings name. `hintergrund`: the
    ingress makes (or finds) the outbox workers and the pixie itself — for a deployment by Serve
    config, where no `novaberg up` does it. A node budget above `llm_max_tokens` stops it here
    (`check_budgets`)."""
    check_budgets(settings)
    # each deployment gets the typed settings it reads, pickled by Ray: a section of its own where
    # it reads one concern, the whole `Settings` where it reads many
    # the deployments the pair actors call dozens of times a turn write no access log line per
    # request (the ingress keeps its own): at 40 requests a turn it cost CPU and told nothing the
    # pipeline log does not
    quiet = {"logging_config": {"enable_access_log": False}}
    embedder = EmbedderDeployment.options(
        ray_actor_options={"num_cpus": settings.embedder_num_cpus}, num_replicas=1, **quiet).bind(settings.embedder)
    vllm = vllm_server_app(settings.llm) if settings.llm_backend == "vllm" and engine is None else None
    # llama.cpp serialises its calls on one thread per replica; requests wait in that replica's queue.
    # A pair's calls go to the replica that holds its prompt prefix (with vLLM, the LLMServer's router)
    router = router_config(settings.llm) if vllm is None else None
    llm = LLMDeployment.options(
        num_replicas=settings.llm_replicas, max_ongoing_requests=64, **quiet,
        **({"request_router_config": router} if router is not None else {}),
        ray_actor_options={"num_cpus": settings.llm_num_cpus if settings.llm_num_cpus is not None
                           else 0.5 if settings.llm_backend == "llamacpp" else 0},
    ).bind(settings.llm, vllm, engine)
    store = StoreDeployment.options(ray_actor_options={"num_cpus": settings.store_num_cpus}, **quiet).bind(
        settings, embedder)
    web = WebDeployment.options(ray_actor_options={"num_cpus": 0}, **quiet).bind(settings.web)
    ingress_kw = dict(num_replicas=settings.ingress_replicas, max_ongoing_requests=settings.ingress_max_ongoing,
                      ray_actor_options={"num_cpus": 0})
    nodes = (NodeDeployment.options(ray_actor_options={"num_cpus": 0}, **quiet).bind(settings)
             if settings.remote_nodes else None)
    return Ingress.options(**ingress_kw).bind(settings, store, llm, embedder, web, nodes, hintergrund=hintergrund)


def app_builder(args: dict | None = None):
    """The application of `cluster/serve_config.yaml` (`serve run` / `serve deploy`): the settings
    from the environment where it is built, `args` on top; stores by URL; a Redis that evicts keys
    stops it (`NOVABERG_REDIS_ALLOW_EVICTION`)."""
    settings = load_settings(**(args or {}))
    if not (settings.database_url and settings.redis_url):
        raise ConfigError("a Serve config deployment needs DATABASE_URL and REDIS_URL (no embedded stores)")
    from memory.embedded import check_redis

    check_redis(settings.redis_url, settings.redis_allow_eviction)  # as `novaberg up` does: refuses an evicting one
    return build_app(settings, hintergrund=True)
