#!/usr/bin/env bash
# Install Novaberg into ./.venv on a fresh machine. Usage: cluster/install.sh [extras]
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# llama.cpp builds from source: a portable CPU build, because the native build's AMX kernels
# crash (SIGSEGV in ggml_backend_amx_mul_mat) on CPUs that report AMX. No cached wheel is
# reused, since a cache may hold a native build.
if ! python -c "import llama_cpp" 2>/dev/null; then
  echo "building llama-cpp-python (takes 5-9 minutes on 2 cores)..."
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
    python -m pip install -q --no-cache-dir "llama-cpp-python==0.3.36"
fi
if [ -n "$extras" ]; then
  python -m pip install -q -e ".[$extras]"
else
  python -m pip install -q -e .
fi
