"""The chain's nodes, one module each (`pipeline.nodes.<name>`), each declaring itself with one
object, `NODE = Node(...)` (pipeline/node.py), and binding its `run` with `@NODE.runs`. The chains
(`pipeline/chains.py`) import them and list their `NODE`s."""
