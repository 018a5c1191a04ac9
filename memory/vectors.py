"""Vector helpers shared by the stores: float32 packing for Redis, cosine similarity."""
from __future__ import annotations

import numpy as np


def pack(vec) -> bytes:
    return np.asarray(vec, dtype=np.float32).tobytes()


def unpack(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype=np.float32)


def normalise(v) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    n = float(np.linalg.norm(a))
    return a / n if n > 0 else a


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def to_list(v) -> list[float] | None:
    """A vector as read from Postgres (pgvector's Vector, numpy or text) as a list of floats."""
    if v is None:
        return None
    if hasattr(v, "to_list"):
        return [float(x) for x in v.to_list()]
    return [float(x) for x in v]
