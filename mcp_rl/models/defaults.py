"""The default model names, declared once: every command, config and hint imports them from here.

All three are built-in offline models (builtin.py), so a fresh install runs with no key and no network.
"""

from __future__ import annotations

DEFAULT_POLICY_MODEL = "qwen2.5-coder-0.5b-instruct"
"""The model trained, rolled out and served when none is named."""
DEFAULT_WRITER_MODEL = "qwen2.5-coder-1.5b-instruct"
"""The task writer of `mcp-rl generate` and of a training run without a --tasks file."""
DEFAULT_JUDGE_MODEL = DEFAULT_WRITER_MODEL
"""The RULER judge. The same model as the writer, so a run loads one helper model, not two."""
