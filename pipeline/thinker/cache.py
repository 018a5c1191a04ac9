"""§3.3 per-turn tool cache: stage 1 caches every tool by its arguments, stage 2 recognises a
memory_search whose hits (node ids) were seen before. FIFO-bounded; created per think() and never
shared between turns or pairs."""
from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any

BOUND = 20
HINWEIS_ARGUMENTE = "Dieses Werkzeug lief mit denselben Argumenten bereits in diesem Turn; das Ergebnis steht oben."
HINWEIS_TREFFER = "Diese Suche lieferte dieselben Erinnerungen wie eine fruehere in diesem Turn; sie stehen oben."


class ToolCache:
    def __init__(self, bound: int = BOUND):
        self.bound = bound
        self._args: OrderedDict[str, str] = OrderedDict()
        self._results: OrderedDict[str, None] = OrderedDict()
        self.hits_stage1 = 0
        self.hits_stage2 = 0

    @staticmethod
    def key(tool: str, args: dict[str, Any]) -> str:
        return f"{tool}::{json.dumps(args, sort_keys=True, default=str)}"

    def seen_args(self, tool: str, args: dict[str, Any]) -> bool:
        hit = self.key(tool, args) in self._args
        self.hits_stage1 += hit
        return hit

    def remember_args(self, tool: str, args: dict[str, Any], output: str) -> None:
        self._args[self.key(tool, args)] = output
        while len(self._args) > self.bound:
            self._args.popitem(last=False)

    def seen_result(self, node_ids: list[int]) -> bool:
        """Stage 2 (memory_search only): the same set of hits, whatever the wording of the query."""
        h = hashlib.sha256(json.dumps(sorted(node_ids)).encode()).hexdigest()
        if h in self._results:
            self.hits_stage2 += 1
            return True
        self._results[h] = None
        while len(self._results) > self.bound:
            self._results.popitem(last=False)
        return False
