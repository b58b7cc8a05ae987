#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the main job on the offline default against a real server.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec mcp-rl inspect --server "uvx mcp-server-time"
