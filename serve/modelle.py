"""Models named by their hub reference, as llama.cpp, Ollama and vLLM users name them.

For llama.cpp: `owner/repo:QUANT` (`bartowski/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M`), or
`owner/repo:file-pattern` (`…:*q4_k_m.gguf`), optionally written `hf.co/owner/repo:…`. The GGUF is
fetched once with the hub's own client into its cache and then used from there without asking the
hub again. For vLLM the reference is the model id itself.
"""
from __future__ import annotations

import fnmatch
import logging
import re
from pathlib import Path

from core.errors import ConfigError

log = logging.getLogger("novaberg.llm")

_REF = re.compile(r"^(?:hf\.co/|huggingface\.co/)?(?P<repo>[A-Za-z0-9][\w.\-]*/[\w.\-]+)(?::(?P<pattern>[^\s]+))?$")


class ModellFehler(ConfigError, RuntimeError):
    """A model reference that names nothing loadable; the message says what to set."""


def ist_hub_referenz(name: str) -> bool:
    return _REF.match(name) is not None


def _muster(pattern: str | None) -> str:
    if not pattern:
        return "*.gguf"
    if "*" in pattern or pattern.lower().endswith(".gguf"):
        return pattern
    return f"*{pattern}*.gguf"  # a quantisation tag, as Ollama writes it


def gguf_aus_hub(ref: str, cache_dir: Path | None = None) -> Path:
    """The local path of the GGUF a reference names: from the hub cache, fetched into it when it
    is not there yet (unless the hub client is offline)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    m = _REF.match(ref)
    if m is None:
        raise ModellFehler(f"{ref!r} is no hub reference (owner/repo:QUANT or owner/repo:file-pattern)")
    repo, muster = m.group("repo"), _muster(m.group("pattern"))
    kw = dict(repo_id=repo, allow_patterns=[muster, muster.lower(), muster.upper()],
              cache_dir=str(cache_dir) if cache_dir else None)
    try:
        folder = snapshot_download(local_files_only=True, **kw)
        woher = "cache"
    except LocalEntryNotFoundError:
        log.info("llm: %s is not in the hub cache yet: fetching %s", repo, muster)
        try:
            folder = snapshot_download(**kw)
        except Exception as e:  # offline, unknown repository, no access
            raise ModellFehler(f"cannot fetch {repo} ({muster}): {type(e).__name__}: {e}") from e
        woher = "hub"
    treffer = sorted(p for p in Path(folder).rglob("*") if p.is_file() and fnmatch.fnmatch(p.name.lower(), muster.lower()))
    if not treffer:
        raise ModellFehler(f"{repo} holds no file matching {muster!r}")
    erste = [p for p in treffer if re.search(r"-0*1-of-\d+\.gguf$", p.name)]  # split GGUFs load from part 1
    path = (erste or treffer)[0]
    log.info("llm: %s resolved to %s (from the %s)", ref, path, woher)
    return path
