"""Prompt files: `prompts/default/{node}.{part}.txt`, with model-level override folders.

A folder named after the answering model (`prompts/{model_slug}/`) overrides single files of
`default/` (seed 004 §3.3). Rendering takes explicit variables and fails on a missing or an unused
one, so a prompt and its node cannot drift apart silently.
"""
from __future__ import annotations

import re
import string
from functools import lru_cache
from pathlib import Path

from core.errors import ConfigError

PROMPTS_DIR = Path(__file__).parent
DEFAULT = "default"


class PromptError(ConfigError, ValueError):
    pass


def model_slug(model: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "_", model.lower()).strip("_")


@lru_cache(maxsize=512)
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@lru_cache(maxsize=512)
def fields_of(text: str) -> frozenset[str]:
    return frozenset(f for _, f, _, _ in string.Formatter().parse(text) if f)


@lru_cache(maxsize=2048)
def _resolve(root: Path, name: str, folder: str | None) -> tuple[Path, str] | None:
    """Where a prompt file lies (read once per process: the prompts ship with the code)."""
    if folder:
        p = root / folder / name
        if p.is_file():
            return p, folder
    p = root / DEFAULT / name
    return (p, DEFAULT) if p.is_file() else None


class PromptLibrary:
    def __init__(self, root: Path = PROMPTS_DIR):
        self.root = root

    def path(self, node: str, part: str, model: str | None = None) -> tuple[Path, str]:
        """The file for (node, part) and the folder it came from."""
        name = f"{node}.{part}.txt"
        found = _resolve(self.root, name, model_slug(model) if model else None)
        if found is None:
            raise PromptError(f"no prompt file {DEFAULT}/{name}")
        return found

    def render(self, node: str, part: str, model: str | None = None, **variables: object) -> str:
        path, _ = self.path(node, part, model)
        text = _read(path)
        wanted = fields_of(text)
        missing = wanted - variables.keys()
        unused = variables.keys() - wanted
        if missing or unused:
            raise PromptError(
                f"{path.relative_to(self.root)}: missing variables {sorted(missing)}, unused {sorted(unused)}"
            )
        return text.format(**variables).strip()

    def render_parts(self, node: str, parts: tuple[str, ...], model: str | None, variables: dict) -> list[str]:
        """Render several parts of one node from one set of variables: each file gets the
        variables it names; a missing one fails, and so does one that no part uses."""
        out, used = [], set()
        for part in parts:
            path, _ = self.path(node, part, model)
            wanted = fields_of(_read(path))
            missing = wanted - variables.keys()
            if missing:
                raise PromptError(f"{path.relative_to(self.root)}: missing variables {sorted(missing)}")
            used |= wanted
            out.append(_read(path).format(**{k: variables[k] for k in wanted}).strip())
        unused = variables.keys() - used
        if unused:
            raise PromptError(f"{node}.{{{','.join(parts)}}}: unused variables {sorted(unused)}")
        return out

    def variant(self, node: str, part: str, model: str | None) -> str:
        return self.path(node, part, model)[1]

    def all_files(self) -> list[Path]:
        return sorted(self.root.glob("*/*.*.txt"))
