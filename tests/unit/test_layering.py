"""The packages are floors of one house: a module imports only from its own floor and the floors
below it, and no two modules import each other, directly or around a loop.

The layering, lowest first (a lower package never imports a higher one):

    core       settings, names of the app and its deployments, the exceptions: imports nothing
               of the project, so every package may import it
    prompts    the prompt files and their library
    memory     the stores: Postgres and Redis, what they hold and how it is read
    pipeline   the turn: its state, its nodes and agents, the chain runner, the service clients
    actors  |  serve
               one floor: the Ray actors (pairs, outbox workers, the pixie) and the Serve
               deployments (ingress, LLM, embedder, store, web, nodes). Between the two, only
               `serve` imports `actors` (the ingress makes pair actors, workers and the pixie);
               an actor reaches a deployment through a handle found by its name (`core.names`),
               never by importing it. So the floor has no loop between its two packages either.
    cluster    the operator's side: the CLI, the daemon, the runtime that starts it all, the
               Serve config and the KubeRay manifest
    bench      the benchmarks, which drive the whole system

`tests` may import anything and are not checked.

Every `import` counts, wherever it stands: at module level, inside a function (a "late" import
is still an arrow), under `if TYPE_CHECKING`. A cycle is reported as the loop it runs through,
each arrow with its line. An exception to the rules would go into `ALLOWED`, with the reason;
there is none.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LAYERS: dict[str, int] = {
    "core": 0, "prompts": 1, "memory": 2, "pipeline": 3, "actors": 4, "serve": 4, "cluster": 5, "bench": 6,
}
"""The floor of each project package; a package may import its own floor and those below."""

SAME_FLOOR: set[tuple[str, str]] = {("serve", "actors")}
"""Imports allowed between two packages of one floor, (importer, imported): one direction only."""

ALLOWED: set[tuple[str, str]] = set()
"""Arrows (importing module, imported module) that break a rule and stay for a reason written
beside each entry. Empty: every arrow that ran up was moved down."""


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    line: int
    late: bool
    """Inside a function: runs when the function is called, not when the module is imported."""

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line}{', in a function' if self.late else ''})"


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project's packages by dotted name (a package by its `__init__`)."""
    out = {}
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an imported name lives in: the longest dotted prefix that is one."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def arrows(module: str, path: Path, modules: dict[str, Path]) -> list[Arrow]:
    """The imports of one module that land in the project, each with its line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Arrow] = []

    def visit(node: ast.AST, late: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = late or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    origin = ".".join(base + ([child.module] if child.module else []))
                else:
                    origin = child.module or ""
                # `from a import b`: the module a.b where b is one, else a itself
                names = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in child.names]
            for name in names:
                target = _owner(name, modules)
                if target is not None and target != module:
                    found.append(Arrow(module, target, child.lineno, late))
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


@lru_cache(maxsize=None)
def import_graph(root: Path = ROOT) -> tuple[Arrow, ...]:
    modules = project_modules(root)
    return tuple(a for m, p in modules.items() for a in arrows(m, p, modules))


def _package(module: str) -> str:
    return module.split(".")[0]


def rule_broken(arrow: Arrow) -> str | None:
    """Why this arrow breaks the layering, or None."""
    src, dst = _package(arrow.source), _package(arrow.target)
    if src == dst:
        return None
    if LAYERS[dst] > LAYERS[src]:
        return f"{src} (floor {LAYERS[src]}) imports {dst} (floor {LAYERS[dst]}), a floor above"
    if LAYERS[dst] == LAYERS[src] and (src, dst) not in SAME_FLOOR:
        return f"{src} imports {dst} on its own floor; only {sorted(SAME_FLOOR)} may"
    return None


def cycles(graph) -> list[list[Arrow]]:
    """One loop through each strongly connected group of modules (Tarjan), as its arrows."""
    out_of: dict[str, dict[str, Arrow]] = {}
    for a in graph:
        out_of.setdefault(a.source, {}).setdefault(a.target, a)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in out_of.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(out_of):
        if v not in index:
            connect(v)
    loops = []
    for group in groups:
        start = min(group)
        # the shortest way back to `start` inside the group (breadth first)
        came: dict[str, Arrow] = {}
        frontier = [start]
        while frontier and start not in came:
            nxt = []
            for v in frontier:
                for w, a in sorted(out_of.get(v, {}).items()):
                    if w in group and w not in came:
                        came[w] = a
                        nxt.append(w)
            frontier = nxt
        loop, v = [], start
        while True:
            a = came[v]
            loop.append(a)
            v = a.source
            if v == start:
                break
        loops.append(loop[::-1])
    return loops


def test_no_import_cycle_between_project_modules():
    graph = [a for a in import_graph() if (a.source, a.target) not in ALLOWED]
    loops = cycles(graph)
    assert not loops, "import cycles:\n" + "\n".join("  " + " ; ".join(map(str, loop)) for loop in loops)


def test_no_import_runs_up_the_layering():
    broken = [f"  {a}: {why}" for a in import_graph()
              if (why := rule_broken(a)) and (a.source, a.target) not in ALLOWED]
    assert not broken, "imports against the layering (module docstring):\n" + "\n".join(broken)


def test_core_imports_nothing_of_the_project():
    assert [str(a) for a in import_graph() if _package(a.source) == "core" and _package(a.target) != "core"] == []


def test_every_allowed_exception_is_still_needed():
    graph = {(a.source, a.target) for a in import_graph()}
    assert ALLOWED <= graph, f"no longer imported, remove from ALLOWED: {sorted(ALLOWED - graph)}"


def test_the_scan_sees_every_kind_of_import(tmp_path):
    """The checks above pass only if the scan finds the arrows: module-level and late imports, a
    submodule named in `from a import b`, relative imports; and they catch a loop and an upward one."""
    files = {
        "core/__init__.py": "",
        "core/base.py": "from pipeline import runner\n",                         # up from the ground floor
        "pipeline/__init__.py": "",
        "pipeline/runner.py": "import core.base\n\ndef f():\n    from . import contract\n",
        "pipeline/contract.py": "from pipeline.runner import load\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path)
    assert {str(a) for a in graph} == {
        "core.base -> pipeline.runner (line 1)", "pipeline.runner -> core.base (line 1)",
        "pipeline.runner -> pipeline.contract (line 4, in a function)",
        "pipeline.contract -> pipeline.runner (line 1)"}
    assert [rule_broken(a) for a in graph if rule_broken(a)] == [
        "core (floor 0) imports pipeline (floor 3), a floor above"]
    # one group of three modules, reported by its shortest loop
    assert [[str(a) for a in loop] for loop in cycles(graph)] == [
        ["core.base -> pipeline.runner (line 1)", "pipeline.runner -> core.base (line 1)"]]
    # and in the project itself: an arrow at module level, a late one, across the floors' one door
    real = {(a.source, a.target, a.late) for a in import_graph()}
    assert ("serve.ingress", "actors.activation", False) in real
    assert ("cluster.cli", "cluster.character_cli", True) in real
