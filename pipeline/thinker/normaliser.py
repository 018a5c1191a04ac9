"""§3.4 thinking normaliser, chosen by the model that actually answers (not a profile name):
models whose output may land only in the reasoning channel get the split normaliser, which asks a
follow-up with think=False carrying the reasoning as material (Nachfass, at most 2 per turn,
outside the iteration limit; the node does the call)."""
from __future__ import annotations

SPLIT_STEMS = ("gemma4", "qwen3.8", "qwen3-8b")
"""The default of `Settings.thinker_reasoning_models`: model names containing one of these (any
case) may answer in the reasoning channel alone. `gemma4` and `qwen3.8` are seed 000 §3.4's stems;
the seed rejects the shorter `qwen3`, which would take in `qwen36-cpu` and `qwen3-32b-cpu`, models
that do not split. `qwen3-8b` is this project's vLLM default (`Settings.vllm_model_source`
Qwen/Qwen3-8B): vLLM's `qwen3` reasoning parser moves a thought the token budget cut off into the
reasoning channel and leaves the content empty — the seed's symptom — and it names that one model,
not the family. The follow-up fires only on empty content beside a filled reasoning channel, so a
stem on a model that never splits costs nothing but is still not set."""
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

