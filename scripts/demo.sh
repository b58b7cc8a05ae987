#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the main job on the offline default against a real MCP server:
# tasks written by the local 1.5B model, the 0.5B policy trained with GRPO on a LoRA, RULER judged by
# the local 1.5B model. A short run (3 steps) so it ends in well under an hour on a 2-core CPU; drop
# the flags for the full defaults. Extra arguments go to `mcp-rl train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec mcp-rl train --server "uvx mcp-server-time" --n-tasks 12 --max-steps 3 --eval-every 3 "$@"
