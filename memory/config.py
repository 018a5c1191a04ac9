"""Memory thresholds and limits. Where seed 001 / seed 000 give a number, it is the default here.

Thresholds belong to an embedding model and a corpus (seed 001: 0.40 meant 1.4 % in one corpus
and 35.6 % in another). The seeds' values were calibrated on nomic-embed-text-v2-moe (768 dims);
`for_model` returns the values measured for the default model, all-MiniLM-L6-v2 — see
`memory/THRESHOLDS.md` for the measurement.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    session_max_turns: int = Field(default=20, ge=8)
    """SESSION_MAX_TURNS: the session window the chain reads, a ceiling from a block's start
    (memory/session.fenster_start): at least one block (8 entries)."""
    kzg_threshold: float = Field(default=0.72, ge=-1, le=1)
    """KZG_RETRIEVAL_SCHWELLE: absolute cosine floor of the short-term memory KNN."""
    kzg_top_k: int = Field(default=10, ge=1)
    lzg_anchor_count: int = Field(default=3, ge=1)
    """How many of the strongest anchors the spreading starts from."""
    lesepfad_k: int = Field(default=10, ge=1, le=100)
    """The memory read path's bound: at most this many memories, each with its path (memory/lesepfad.py)."""
    lesepfad_bm25_k1: float = Field(default=1.2, gt=0)
    lesepfad_bm25_b: float = Field(default=0.75, ge=0, le=1)
    lesepfad_gewicht_dicht: float = Field(default=1.0, ge=0)
    """Weight of the dense channel's z-score in the fused score."""
    lesepfad_gewicht_stichwort: float = Field(default=1.0, ge=0)
    """Weight of the keyword channel's (BM25) z-score in the fused score."""
    lesepfad_boden: float = Field(default=0.40, ge=-1, le=1)
    """The read's floor (seed 001 §3.3: "Cold Start ist bei ankerlosen Prompts die richtige
    Antwort"): a read whose best anchor's cosine to the question stays below it returns nothing.
    The seed's anchor floor 0.40; measured for MiniLM on the anchorless set (memory/LESEPFAD.md,
    "A floor"). -1 switches it off."""
    lesepfad_thema_kosinus: float = Field(default=0.45, ge=-1, le=1)
    """For a question that asks about the present state (memory/lesart.py: no past marker), two recalled
    memories are of the same subject when their embeddings' cosine reaches this: then, near-equal and
    neither marked superseded, the newer one ranks first — each memory in one such pair at most, the
    most alike first (`lesepfad.paarweise`); a question about a past event keeps the read's relevance
    order whatever this is (memory/LESEPFAD.md, "Knowledge that changes"). A value of 1 leaves only
    identical vectors: in effect off."""
    lesepfad_gleichauf: float = Field(default=1.0, ge=0, le=1)
    """Near-equal, for a question about the present state: the newer memory's activation is at most
    this below the older one's (activation: 1.0 the read's top memory). 0 lets recency break exact
    ties only, 1 lets it decide between any two recalled memories of one subject."""
    thinker_top_k: int = Field(default=20, ge=1)
    """The Thinker's memory_search: the read path's top 20 (seed 000), no floor."""
    spreading_depth: int = Field(default=2, ge=0, le=5)
    spreading_decay: float = Field(default=0.5, gt=0, le=1)
    spreading_min_activation: float = Field(default=0.05, ge=0, le=1)
    spreading_sector_damping: float = Field(default=0.1, ge=0, le=0.25)
    """How much less activation a spreading step carries per step of distance on Plutchik's wheel
    between Nova's sector and the memory's emotion (0–4 steps: 1.0 to 0.6 at 0.1; 0 switches it
    off; memory/lzg.py `sektor_faktor`)."""
    lzg_decay_per_day: float = Field(default=0.01, ge=0, le=1)
    """Weight decay of LZG nodes per day without activation."""
    goal_threshold: float = Field(default=0.40, ge=0, le=1)
    """Goal activation = similarity × motivation; activated at or above this."""
    library_threshold: float = Field(default=0.50, ge=-1, le=1)
    library_top_k: int = Field(default=3, ge=1)
    library_weight_cap: float = Field(default=10.0, gt=0)
    lorebook_scan_depth: int = Field(default=2, ge=0, le=1000)
    """The messages a lorebook entry's keys are looked for in, newest first, the current one included
    (SillyTavern's default); a card's book (`scan_depth`) and an entry's own depth stand before it."""
    lorebook_token_budget: int = Field(default=512, ge=1)
    """The most tokens of activated lorebook entries one turn takes (a card's `token_budget` stands
    before it); the entries of lowest insertion order are left out first."""
    files_dense_floor: float = Field(default=0.30, ge=-1, le=1)
    files_cap: int = Field(default=3, ge=1)
    files_excerpt_chars: int = Field(default=300, ge=20)
    timeline_keyword_limit: int = Field(default=5, ge=1)
    timeline_window_back_days: int = Field(default=3, ge=0)
    timeline_window_ahead_days: int = Field(default=14, ge=0)
    max_active_instructions: int = Field(default=3, ge=1)
    """Character instructions active at once (seed 004): a further one asks to consolidate first."""
    instruction_pending_s: int = Field(default=3600, ge=0)
    """How long an instruction that met `max_active_instructions` waits, kept aside, for the answer
    to the consolidation question (seconds; 0: it is not kept, the human says it again)."""
    cluster_gravitation: dict[str, float] = Field(default_factory=lambda: dict(CLUSTER_GRAVITATION_FAKTOR))


# Landscape clusters and their perception-gravity factor f (0.05–0.30), one place in the code.
CLUSTER_GRAVITATION_FAKTOR: dict[str, float] = {
    "kissenschlacht": 0.25, "feuerwerk": 0.30, "schlachtfeld": 0.05, "paradox": 0.15,
    "lagerfeuer": 0.20, "werkstatt": 0.10, "bibliothek": 0.10, "hafen": 0.20, "gipfel": 0.25,
    "nebelwald": 0.15, "tanzflaeche": 0.25, "krankenzimmer": 0.05, "labyrinth": 0.10, "garten": 0.20,
}

# Measured for all-MiniLM-L6-v2 (memory/THRESHOLDS.md); unknown models keep the seeds' values.
_PER_MODEL: dict[str, dict[str, float]] = {
    "all-minilm-l6-v2": {
        "kzg_threshold": 0.60,
        "library_threshold": 0.55,
        "files_dense_floor": 0.45,
    },
}


def for_model(embedding_model: str, **overrides) -> MemoryConfig:
    base = dict(_PER_MODEL.get(embedding_model.lower(), {}))
    base.update(overrides)
    return MemoryConfig(**base)
