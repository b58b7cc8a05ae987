#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the main job on the offline default against a real MCP server:
# 24 tasks written by the local 1.5B model (half held out), the 0.5B policy trained with GRPO on a LoRA,
# groups without a reference answer judged by RULER with the local 1.5B model, grounded ones by the
# checks. A short run (4 steps of 4 tasks x 4 episodes) so it ends in well under an hour on a 2-core CPU;
# drop the flags for the full defaults. Extra arguments go to `mcp-rl train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec mcp-rl train --server "uvx mcp-server-time" --n-tasks 24 --val-fraction 0.5 --tasks-per-step 4 \
  --max-steps 4 --eval-every 4 "$@"
