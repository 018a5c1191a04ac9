#!/usr/bin/env bash
# Install everything, start Novaberg on the embedded defaults and talk to Nova.
set -euo pipefail
cd "$(dirname "$0")"
cluster/install.sh
. .venv/bin/activate
novaberg up
exec novaberg chat --user "${USER_ID:-local}" --character nova "$@"
