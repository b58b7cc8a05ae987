#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
# llama.cpp's Python bindings, to load GGUF exports in their target runtime (tests marked gguf). Built
# from source: a few minutes of compiling on 2 cores, once per environment.
python -c "import llama_cpp" 2>/dev/null || \
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL=2 python -m pip install -q -e ".[gguf]"
# Headless Chromium for the dashboard's browser tests (tests/test_dashboard.py; they skip without it).
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  (apt-get update -q && apt-get install -y -q chromium) >/dev/null || echo "no chromium: browser tests will skip"
fi
export MCP_RL_REQUIRE_LLAMA_CPP=1
ruff check .
exec python -m pytest "$@"
