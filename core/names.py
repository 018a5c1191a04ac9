"""The names of the Serve application and its deployments: the builder deploys under them
(`serve.app`, the `@serve.deployment` of each), and every client finds them by them
(`serve.get_deployment_handle(LLM_DEPLOYMENT, app_name=APP_NAME)`), so a handle never needs the
deployment's module."""
from __future__ import annotations

APP_NAME = "novaberg"
"""The Serve application (`novaberg up`, the Serve config)."""
INGRESS_DEPLOYMENT = "Ingress"
"""The HTTP API (serve/ingress.py)."""
LLM_DEPLOYMENT = "LLM"
"""The model engine (serve/llm.py)."""
EMBEDDER_DEPLOYMENT = "Embedder"
"""The embedding model (serve/embedder.py)."""
STORE_DEPLOYMENT = "Store"
"""Postgres and Redis behind one handle (serve/store.py)."""
NODES_DEPLOYMENT = "Nodes"
"""The stateless node deployment (serve/nodes.py, `Settings.remote_nodes`)."""
WEB_DEPLOYMENT = "Web"
"""The guarded web layer: search and fetch (serve/web.py)."""

REPLICA_HEADER = "X-Novaberg-Replica"
"""The header naming the LLM replica a call comes from (the OpenAI-compatible backend sends it; a
server that models a prefix cache per replica, `bench/standin.py`, keeps one per name)."""
CALLER_HEADER = "X-Novaberg-Caller"
"""The header naming the node that asks (`ChatRequest.caller`; the stand-in counts tokens per node)."""
PAIR_HEADER = "X-Novaberg-Pair"
"""The header naming the pair a call belongs to (`ChatRequest.pair`; the stand-in measures affinity)."""
