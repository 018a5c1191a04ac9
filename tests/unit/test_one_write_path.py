"""Long-term memory has one write (issue: "one write path"): live turns and imports write their
nodes through `memory.lzg.episode_schreiben`. This test fails when another module inserts LZG
nodes: an INSERT into `lzg_knoten` anywhere but memory/lzg.py, or a call of the raw insertion
(`add_nodes`, `_insert_nodes`) from the product's code."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("actors", "serve", "pipeline", "memory", "cluster", "core", "bench", "prompts")
ROH = {"add_nodes", "_insert_nodes", "add_nodes_einmal"}
SYNTHETISCH = {"bench/memory_latency.py"}
"""Builds a synthetic 10,000-node graph of random vectors to time the read path: no memory of Nova's."""


def _module():
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in (".py", ".sql") and ".venv" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), path


def _called(path: Path) -> set[str]:
    return {ast.unparse(n.func).rsplit(".", 1)[-1] for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call)}


def test_only_memory_lzg_inserts_long_term_memory_nodes():
    inserting = [rel for rel, path in _module() if "insert into lzg_knoten" in " ".join(path.read_text().lower().split())]
    assert inserting == ["memory/lzg.py"]


def test_nothing_but_the_one_write_calls_the_raw_insertion():
    raw = {rel: sorted(_called(path) & ROH) for rel, path in _module() if path.suffix == ".py"}
    raw = {rel: names for rel, names in raw.items() if names and rel not in SYNTHETISCH}
    # inside memory/lzg.py the raw insertion runs only for the one write
    assert raw == {"memory/lzg.py": ["_insert_nodes"]}
    tree = ast.parse((ROOT / "memory/lzg.py").read_text())
    callers = {f.name for f in ast.walk(tree) if isinstance(f, ast.AsyncFunctionDef)
               and any(isinstance(n, ast.Call) and ast.unparse(n.func) == "_insert_nodes" for n in ast.walk(f))}
    assert callers == {"episode_schreiben", "add_nodes"}
    # and the store offers the product no raw insertion: only the one write
    from memory.ops import OPS

    assert "lzg.episode_schreiben" in OPS and not {f"lzg.{n}" for n in ROH} & set(OPS)


def test_a_memory_the_model_calls_gespraech_is_kept_as_an_experience():
    """`gespraech` is the utterances' own dimension (the session's chain links to its newest one):
    a distilled memory the model names so cannot enter that chain."""
    from pipeline.nodes.praegung import _dimension

    assert _dimension("gespraech") == "erlebnis" and _dimension(" wissen ") == "wissen" and _dimension("") == "erlebnis"
