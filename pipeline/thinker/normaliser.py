"""§3.4 thinking normaliser, chosen by the model that actually answers (not a profile name):
models whose output may land only in the reasoning channel get the split normaliser, which asks a
follow-up with think=False carrying the reasoning as material (Nachfass, at most 2 per turn,
outside the iteration limit; the node does the call)."""
from __future__ import annotations

SPLIT_STEMS = ("gemma4", "qwen3")
"""The default of `Settings.thinker_reasoning_models`: model names containing one of these (any
case) may answer in the reasoning channel alone — `qwen3` covers Qwen/Qwen3-8B and its kin."""
NACHFASS_MAX = 2


class ThinkingNormalizer:
    """No-op: the content is always usable."""

    name = "basis"

    def needs_follow_up(self, content: str, reasoning: str | None) -> bool:
        return False


class ThinkSplitNormalizer(ThinkingNormalizer):
    name = "split"

    def needs_follow_up(self, content: str, reasoning: str | None) -> bool:
        return not content.strip() and bool((reasoning or "").strip())


def normaliser_for(model: str, stems: tuple[str, ...] | list[str] = SPLIT_STEMS) -> ThinkingNormalizer:
    m = model.lower()
    return ThinkSplitNormalizer() if any(stem.lower() in m for stem in stems) else ThinkingNormalizer()

