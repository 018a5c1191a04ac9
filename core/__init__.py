"""The ground floor: what every package may import, and which imports nothing of the project.

- `core.settings`: all configuration (`Settings`, read from `NOVABERG_*`), in sections; its
  reference is docs/SETTINGS.md (`python -m core.settings_doc`).
- `core.names`: the names of the Serve application and its deployments.
- `core.errors`: the project's exception families.

The floors above it, and the test that holds them: tests/unit/test_layering.py.
"""
