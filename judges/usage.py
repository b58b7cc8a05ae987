"""`Usage` lives in `mcp_rl.usage` now: the ask-and-repair loop in `mcp_rl.structured` counts it,
and `mcp_rl` never imports `judges`.

This name stays only for `judges/pipeline.py` and `judges/success.py`, which import it from here and
are being edited elsewhere; once they import `mcp_rl.usage`, delete this file.
"""

from mcp_rl.usage import Usage

__all__ = ["Usage"]
