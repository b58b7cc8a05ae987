#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the main job on the offline default against a real MCP server:
# 48 tasks written by the local 1.5B model, split into train / val / test with no call or entity shared
# across splits; the 0.5B policy trained with GRPO on a LoRA; groups without a reference answer judged by
# RULER with the local 1.5B model, grounded ones by the checks. A short run (2 steps of 4 tasks x 4
# episodes) so it ends in under an hour on a 2-core CPU; drop the flags for the full defaults (96 tasks,
# up to 20 steps). It ends with base vs best checked success on the test split, with 95% intervals.
# Extra arguments go to `mcp-rl train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec mcp-rl train --server "uvx mcp-server-time" --n-tasks 48 --val-fraction 0.25 --test-fraction 0.35 \
  --tasks-per-step 4 --max-steps 2 --eval-every 2 "$@"
