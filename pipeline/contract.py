"""The chain contract: every loop closes.

A read has an upstream writer — an earlier node, the stimulus, or (for the background chain) the
records the dispatcher copies into its job; a written record is read later — by a node, by the
pair actor (the committed result, the self-trigger) or by the background worker (the pending
writes). Per field, a written field is read (by attribute) in the source of a node that reads
its record, of the modules those nodes use, or of the actor that takes the record. `gaps` lists
what is not; the runner refuses a chain with a record-level gap when it is built, and the test
suite runs the field-level check over the three chains.

The field check reads source code: a field counts as read where its name is accessed as an
attribute (or through `getattr` with a constant) in a reading module. It is therefore lenient
with common names, and strict where it matters: a field nobody names is never read.
"""
from __future__ import annotations

import ast
import inspect
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from pipeline.node import Node
from core.state import RECORDS, TurnState

CONSUMERS: dict[str, tuple[str, ...]] = {
    "dispatch": ("actors.pair",),
    "pruefung": ("actors.pair",),
    "hintergrund": ("actors.background",),
    "urteil": ("pipeline.chains",),
    "plan": ("pipeline.chains",),
    "nova_zustand": ("memory.pg",),
}
"""Records read outside the chains: the pair actor takes the committed result and the
self-trigger; the background worker routes the pending writes; the loops' conditions
(`pipeline/chains.py`) read the verdict and the planned agent; Nova's state after the turn is
committed whole and written to Postgres field by field (`memory/pg.py`)."""

LOG_ONLY: dict[str, str] = {
    "PerzeptionRecord.fallback": "named fallback of the turn, for the pipeline log",
    "RouteRecord.fallback": "named fallback of the turn, for the pipeline log",
    "DraftRecord.prompt_variant": "which prompt variant answered, for the pipeline log",
}
"""Fields that go only to the log or the API response, on purpose."""
_LOG_ONLY_KEYS = tuple(LOG_ONLY)


@dataclass(frozen=True)
class Gap:
    kind: str
    """`ungeschrieben` (read, never written) or `ungelesen` (written, never read)."""
    where: str
    """`record` or `Record.field`."""
    node: str

    def __str__(self) -> str:
        verb = "reads" if self.kind == "ungeschrieben" else "writes"
        what = "never written upstream" if self.kind == "ungeschrieben" else "never read downstream"
        return f"{self.node} {verb} {self.where}: {what}"


def _flat(chain: Sequence) -> list[tuple[Node, int]]:
    """(node, loop id or -1) in the order the chain first runs them."""
    out = []
    for i, step in enumerate(chain):
        if isinstance(step, Node):
            out.append((step, -1))
        else:
            out.extend((n, i) for n in step.nodes())
    return out


def record_gaps(chain: Sequence, *, given: Iterable[str] = ("stimulus",), later_reads: Iterable[str] = (),
                optional: bool = False) -> list[Gap]:
    """Record-level gaps of one chain: a read with no writer before it (or in its loop), a write
    no later node, loop member, consumer or `later_reads` takes. With `optional`, a node's
    `optional_reads` (each with its reason) may stay unwritten on this chain."""
    flat = _flat(chain)
    gaps, written = [], set(given)
    loop_writes = {}
    for m, loop in flat:
        if loop >= 0:
            loop_writes.setdefault(loop, set()).update(m.writes)
    for i, (m, loop) in enumerate(flat):
        skip = set(m.optional_reads) if optional else set()
        for r in m.reads:
            if r not in written and r not in m.writes and r not in loop_writes.get(loop, ()) and r not in skip:
                gaps.append(Gap("ungeschrieben", r, m.name))
        written.update(m.writes)
        readers = {r for k, (o, ol) in enumerate(flat) if k > i or (loop >= 0 and ol == loop) for r in o.reads}
        for r in m.writes:
            if r not in readers and r not in CONSUMERS and r not in later_reads:
                gaps.append(Gap("ungelesen", r, m.name))
    return gaps


_NOT_READERS = ("core.state", "pipeline.runner", "pipeline.contract", "pipeline.chains")
"""Modules a node imports that read no record's fields for it."""

_ROOT = Path(__file__).resolve().parents[1]


def _source(module_name: str) -> str:
    """A module's source: the loaded module's, else its file under the project's root (read, not
    imported: the check runs no module's code)."""
    mod = sys.modules.get(module_name)
    if mod is not None:
        return inspect.getsource(mod)
    path = _ROOT.joinpath(*module_name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    raise FileNotFoundError(f"no source for module {module_name} under {_ROOT}")


@lru_cache(maxsize=None)
def _names_read(module_name: str) -> frozenset[str]:
    """Attribute names accessed in a module and in the pipeline modules it imports (transitively)."""
    seen, names = set(), set()
    todo = [module_name]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse(_source(name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                names.add(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                  and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)):
                names.add(node.args[1].value)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pipeline.") \
                    and node.module not in _NOT_READERS:
                todo.append(node.module)
    return frozenset(names)


def field_gaps(chains: Sequence[Sequence]) -> list[Gap]:
    """Fields written by a chain's node that no module reading their record names."""
    flat = [n for chain in chains for n, _ in _flat(chain)]
    readers: dict[str, set[str]] = {}
    for n in flat:
        for r in n.reads:
            readers.setdefault(r, set()).add(n.module)
    for r, consumers in CONSUMERS.items():
        readers.setdefault(r, set()).update(consumers)
    gaps = []
    for r in RECORDS:
        writers = [n.name for n in dict.fromkeys(flat) if r in n.writes]
        if not writers:
            continue
        names = set().union(*(_names_read(m) for m in readers.get(r, ())))
        model = TurnState.model_fields[r].annotation.__args__[0]
        for f in model.model_fields:
            key = f"{model.__name__}.{f}"
            if f not in names and key not in LOG_ONLY:
                gaps.append(Gap("ungelesen", key, "/".join(writers)))
    return gaps


def record_check(human: Sequence, character: Sequence, background: Sequence, carried: Iterable[str]) -> list[Gap]:
    """The record-level part of `check`: cheap (declarations only), run when a chain is built."""
    return [g for g in check(human, character, background, carried, fields=False)]


def check(human: Sequence, character: Sequence, background: Sequence, carried: Iterable[str],
          fields: bool = True) -> list[Gap]:
    """All gaps of the three chains: the human chain feeds the character chain, whose dispatcher
    carries `carried` into the background chain. Only the human chain may leave a node's
    `optional_reads` unwritten: the character chain, which every turn runs, must write them."""
    bg_reads = {r for n, _ in _flat(background) for r in n.reads}
    char_reads = {r for n, _ in _flat(character) for r in n.reads}
    human_writes = {r for n, _ in _flat(human) for r in n.writes}
    gaps = record_gaps(human, later_reads=char_reads | bg_reads, optional=True)
    gaps += record_gaps(character, given={"stimulus", *human_writes}, later_reads=bg_reads)
    gaps += record_gaps(background, given=set(carried))
    return gaps + (field_gaps([human, character, background]) if fields else [])
