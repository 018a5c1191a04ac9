"""Agents and plugins are declared like nodes (`AGENT = Agent(...)`, `PLUGIN = Plugin(...)`) and
listed by name in their package; the lists are checked when they are imported: a declaration that
lacks a part or names an unknown record, an entry that is no declaration, or a name twice is a
ConfigError. No module of the project finds code by its name: no `importlib`, no `pkgutil`, no
`__import__` (the one exception: the LLM backend asks whether the optional model package is
installed, `importlib.util.find_spec`)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.errors import ConfigError
from pipeline import agents, plugins
from pipeline.agents.agent import Agent, verzeichnis as agent_verzeichnis
from pipeline.plugins.plugin import Plugin, verzeichnis as plugin_verzeichnis

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("actors", "serve", "pipeline", "memory", "core", "cluster")
BY_NAME = ("importlib", "pkgutil")
ALLOWED: set[tuple[str, str]] = set()
"""(file, module) pairs that may still import by name, each with its reason: none."""


def code_by_name(root: Path = ROOT) -> set[tuple[str, str]]:
    """(file, what) for each import of `importlib`/`pkgutil` and each `__import__` call in the packages."""
    found = set()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
                if isinstance(node, ast.Import):
                    found |= {(rel, a.name) for a in node.names if a.name.split(".")[0] in BY_NAME}
                elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in BY_NAME:
                    found.add((rel, node.module))
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
                    found.add((rel, "__import__"))
    return found


def test_no_module_finds_code_by_its_name():
    assert code_by_name() - ALLOWED == set()


def test_the_scan_sees_every_form_of_it(tmp_path):
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "x.py").write_text(
        "import importlib\nfrom importlib import import_module\nimport pkgutil as p\n"
        "def f():\n    import importlib.util\n    return __import__('os')\n")
    assert code_by_name(tmp_path) == {("pipeline/x.py", "importlib"), ("pipeline/x.py", "pkgutil"),
                                      ("pipeline/x.py", "importlib.util"), ("pipeline/x.py", "__import__")}


def test_every_agent_folder_is_listed_and_each_name_is_its_folder():
    folders = {p.parent.name for p in (ROOT / "pipeline" / "agents").glob("*/dispatch.py")}
    assert set(agents.AGENTS) == folders == {"notizen", "timeline", "direktiven", "charakter", "wissen", "dateien"}
    for a in agents.DECLARED:
        assert a.dispatch.__module__ == f"pipeline.agents.{a.name}.dispatch"
    assert agents.registry() == {n: a.dispatch for n, a in agents.AGENTS.items()}
    timeline = agents.AGENTS["timeline"]
    assert agents.ergaenzung("timeline") is timeline.ergaenzen is not None and agents.ergaenzung("notizen") is None
    assert agents.bedarf("unbekannt") == agents.BEDARF_STANDARD


def test_every_plugin_module_is_listed():
    modules = {p.stem for p in (ROOT / "pipeline" / "plugins").glob("*.py")} - {"__init__", "plugin"}
    assert {p.name for p in plugins.PLUGINS} == modules == {"notizen", "timeline", "bibliothek"}
    assert {p.name: p.suchschluessel for p in plugins.PLUGINS} == {"bibliothek": True, "notizen": False,
                                                                   "timeline": False}


async def _dispatch(state, deps):
    return None


def _sync(state, deps):
    return None


@pytest.mark.parametrize("kwargs, why", [
    ({"name": "x", "dispatch": _sync}, "dispatch must be an async function"),
    ({"name": "x", "dispatch": None}, "dispatch must be an async function"),
    ({"name": "x", "dispatch": _dispatch, "bedarf": "plan"}, "bedarf must be a non-empty tuple"),
    ({"name": "x", "dispatch": _dispatch, "bedarf": ()}, "bedarf must be a non-empty tuple"),
    ({"name": "x", "dispatch": _dispatch, "bedarf": ("plan", "gedanken")}, "unknown records"),
    ({"name": "x", "dispatch": _dispatch, "ergaenzen": "timeline"}, "ergaenzen must be a function"),
    ({"name": "no name", "dispatch": _dispatch}, "must be a word"),
])
def test_an_agent_declaration_lacking_a_part_is_refused(kwargs, why):
    with pytest.raises(ConfigError, match=why):
        Agent(**kwargs)


def test_the_agent_list_refuses_a_name_twice_or_an_entry_that_is_no_declaration():
    a = Agent(name="x", dispatch=_dispatch)
    assert agent_verzeichnis([a]) == {"x": a}
    with pytest.raises(ConfigError, match="two agents named 'x'"):
        agent_verzeichnis([a, Agent(name="x", dispatch=_dispatch, bedarf=("plan", "memory"))])
    with pytest.raises(ConfigError, match="no Agent declaration"):
        agent_verzeichnis([a, _dispatch])


def test_a_plugin_declaration_lacking_a_part_or_listed_twice_is_refused():
    async def enrich(state, deps, such):
        return []

    with pytest.raises(ConfigError, match="enrich must be an async function"):
        Plugin(name="x", enrich=lambda state, deps, such: [])
    with pytest.raises(ConfigError, match="suchschluessel must be True or False"):
        Plugin(name="x", enrich=enrich, suchschluessel="nein")
    p = Plugin(name="x", enrich=enrich)
    assert plugin_verzeichnis([p]) == (p,)
    with pytest.raises(ConfigError, match="two plugins named 'x'"):
        plugin_verzeichnis([p, Plugin(name="x", enrich=enrich, suchschluessel=False)])
    with pytest.raises(ConfigError, match="no Plugin declaration"):
        plugin_verzeichnis([p, enrich])
