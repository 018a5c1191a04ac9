"""No function of the project runs over `MAX_LINES` lines: a longer one is split into functions
that each say what they do. The length is a function's whole extent in the source (decorators
left out, its docstring and nested functions counted), as the AST gives it.

Every package of the project is checked but `bench` (the benchmarks) and `tests`. A function that
stays longer goes into `ALLOWED`, with the reason beside it; at most `MAX_ALLOWED` of them.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = ("core", "prompts", "memory", "pipeline", "actors", "serve", "cluster")
MAX_LINES = 60
MAX_ALLOWED = 2

ALLOWED: dict[str, str] = {}
"""Functions over `MAX_LINES` lines ("path:qualified name") that stay for the reason given."""


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, line, length) of every function and method, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            yield name, node.lineno, node.end_lineno - node.lineno + 1
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def long_functions(root: Path = ROOT) -> dict[str, str]:
    """"path:qualified name" → "line N: L lines" for each function over `MAX_LINES` lines."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for name, line, length in _functions(ast.parse(path.read_text(encoding="utf-8"), rel)):
                if length > MAX_LINES:
                    found[f"{rel}:{name}"] = f"line {line}: {length} lines"
    return found


def test_no_function_runs_over_the_limit_but_the_allowed_ones():
    over = {k: v for k, v in long_functions().items() if k not in ALLOWED}
    assert not over, f"functions over {MAX_LINES} lines (split them, or allow one with its reason): {over}"


def test_the_allowlist_is_short_and_every_entry_gives_its_reason():
    assert len(ALLOWED) <= MAX_ALLOWED
    assert all(reason.strip() for reason in ALLOWED.values())
    stale = set(ALLOWED) - set(long_functions())
    assert not stale, f"entries of ALLOWED no longer over {MAX_LINES} lines: {stale}"


def test_the_check_finds_a_long_function_and_a_long_method(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "lang.py").write_text(
        f"def kurz():\n    return 1\n\n\ndef lang():\n{body}\n\n\nclass K:\n    async def lang(self):\n"
        f"    {body.replace(chr(10), chr(10) + '    ')}\n", encoding="utf-8")
    assert set(long_functions(tmp_path)) == {"core/lang.py:lang", "core/lang.py:K.lang"}
