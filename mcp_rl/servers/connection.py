"""How long to wait for a server and how much of a tool result to keep: declared once, here.

`ServerSession` and `SessionPool` read these from `ServerSpec.connection`, and every server command's
`--connect-timeout` / `--call-timeout` is built from these fields (mcp_rl/cli/from_config.py), so the
defaults and bounds below are the only ones.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ConnectionSettings(BaseModel):
    # nan or inf would turn every wait into no wait or an endless one
    model_config = ConfigDict(use_attribute_docstrings=True, allow_inf_nan=False, frozen=True)

    connect_timeout: float = Field(default=60.0, gt=0.0, json_schema_extra={"cli": True})
    """Seconds to wait for the server to start."""
    call_timeout: float = Field(default=30.0, gt=0.0, json_schema_extra={"cli": True})
    """Seconds to wait for each tool call."""
    result_budget: int = Field(default=4000, ge=1)
    """Characters of a tool result the model sees; the rest is cut (with a note saying so)."""
