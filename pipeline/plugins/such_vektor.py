"""The turn's search key kept for its later readers (seed 001 §4: `such_vektor` — the services
`wissen` and `dateien` get it as their declared need). The enricher hands the key to every plugin
after the perception gravity shifted it; this one keeps it in the turn's memory record
(`memory.plugins["such_vektor"]`), where pipeline/dienste.py reads it. It adds no context: no
reader renders it."""
from pipeline.dienste import SUCHSCHLUESSEL

NAME = SUCHSCHLUESSEL


async def enrich(state, deps, such) -> list[dict]:
    if such is None:
        return []
    return [{"vektor": [float(x) for x in such]}]
