"""No node, agent or plugin touches Redis directly: they reach it through the typed clients on
`Deps` (`deps.session`, `deps.auftrag`, `deps.quoten`, `deps.landschaft`, `deps.kzg`,
`deps.impulse`; memory/session_store.py), whose methods return the stored shapes as models."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("pipeline/nodes", "pipeline/agents", "pipeline/plugins")

ALLOWED: dict[str, str] = {}
"""Modules that still reach Redis directly, each with what it moves to."""


def _starts_at_deps(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "deps"


def raw_redis_uses(source: str) -> list[int]:
    """The lines that read `.redis` of something reached from `deps` (`deps.redis`,
    `deps.services.redis`)."""
    return sorted(n.lineno for n in ast.walk(ast.parse(source))
                  if isinstance(n, ast.Attribute) and n.attr == "redis" and _starts_at_deps(n.value))


def test_the_check_finds_a_raw_redis_use():
    assert raw_redis_uses("async def f(deps):\n    await deps.redis.get('k')\n") == [2]
    assert raw_redis_uses("async def f(deps):\n    r = deps.services.redis\n") == [2]
    assert raw_redis_uses("async def f(deps):\n    await deps.session.load_window('u', 'c', 8)\n") == []


def test_no_node_agent_or_plugin_reaches_redis_but_through_the_typed_clients():
    found = {}
    for folder in CHECKED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            lines = raw_redis_uses(path.read_text())
            if lines and rel not in ALLOWED:
                found[rel] = lines
    assert not found, f"modules that use deps.redis (use the clients on Deps instead): {found}"


def test_every_allowed_module_still_needs_its_entry():
    stale = [rel for rel in ALLOWED if not raw_redis_uses((ROOT / rel).read_text())]
    assert not stale, f"entries of ALLOWED whose module no longer reaches Redis directly: {stale}"
