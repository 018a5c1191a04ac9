"""Typed messages across the process seams. Each seam's models live in its own section:

- the ingress ↔ the pair actor (a turn, an event, the stream's events, a failed turn as an object);
- the chain runner ↔ the node deployment;
- the LLM client ↔ the LLM deployment ↔ its backends (`LLMEngine`, the protocol every engine
  implements, the scripted one of the tests too);
- the store's operations: declared in `memory/client.py`, one class per store module.

Like everything in `core/`, it imports nothing of the project.
"""
from __future__ import annotations

# ---------------------------------------------------------------------------- ingress ↔ pair actor

# ---------------------------------------------------------------------------- runner ↔ node deployment

# ---------------------------------------------------------------------------- LLM client ↔ deployment ↔ engine
