"""The chain's nodes, one module each (`pipeline.nodes.<name>`) with its NAME, READS, WRITES and
`run`. `node_module` imports one by its name: the runner (`pipeline.runner.load_node`, which also
checks the declarations) and the contract check (`pipeline.contract`) both load nodes through it."""
from __future__ import annotations

import importlib
from types import ModuleType


def node_module(name: str) -> ModuleType:
    """The module of the node `name`, imported as it is (its declarations unchecked)."""
    return importlib.import_module(f"{__name__}.{name}")
