"""One normalized outcome for every tool call, whatever the server did."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel


class CallStatus(StrEnum):
    OK = "ok"
    TOOL_ERROR = "tool_error"
    """The tool ran and reported failure (is_error, or a text result that says 'Error: ...')."""
    PROTOCOL_ERROR = "protocol_error"
    """The server rejected the request (MCPError: unknown tool, bad params, ...)."""
    TIMEOUT = "timeout"
    CRASH = "crash"
    """The server died or the connection closed."""
    INVALID = "invalid"
    """Never sent: the call broke the tool's schema, named an unknown or excluded tool, or did not parse."""


class ToolResult(BaseModel):
    status: CallStatus
    text: str
    """What the model is shown: content rendered to text and cut to the budget, or the error message."""
    latency_s: float = 0.0
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.status is CallStatus.OK
