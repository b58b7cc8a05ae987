"""Render an MCP tool result for a model: every content kind as text, cut to a budget."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

from mcp_rl.servers.results import CallStatus, ToolResult

# Some servers (sqlite, duckdb, word) report failure as a normal result whose text says so:
# "Error: ...", "Database error: ...", "Traceback (most recent call last)".
_ERROR_TEXT = re.compile(
    r"^\s*(?:(?:error|exception|traceback)\b[\s:(]|(?:[a-z_-]+\s+){1,2}(?:error|exception)\s*:)",
    re.IGNORECASE,
)



EMPTY_RESULT = "(the tool returned no content)"
"""What the model is shown for an OK call that returned nothing."""

def cut(text: str, budget: int) -> tuple[str, bool]:
    """Keep the head of `text` within `budget` characters, with a visible marker when cut."""
    if budget <= 0 or len(text) <= budget:
        return text, False
    marker = f"\n...[truncated: showing {budget} of {len(text)} characters]"
    return text[:budget] + marker, True


def _blob_size(data: str | None) -> int:
    if not data:
        return 0
    try:
        return len(base64.b64decode(data, validate=False))
    except (ValueError, TypeError):
        return len(data)


def render_block(block: Any) -> str:
    """One content block (text, image, audio, embedded resource, resource link) as text."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_blob_size(block.data)} bytes]"
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        if text is not None:
            return f"[resource {res.uri}]\n{text}"
        mime = getattr(res, "mime_type", None) or "binary"
        return f"[resource {res.uri}: {mime}, {_blob_size(getattr(res, 'blob', None))} bytes]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}" + (f" ({block.name})]" if getattr(block, "name", None) else "]")
    return f"[{kind or type(block).__name__} content]"


def normalize_call_result(
    result: Any, budget: int, latency_s: float = 0.0, redact: Callable[[str], str] | None = None
) -> ToolResult:
    """A `CallToolResult` as a ToolResult: failure recognized however the server reported it, and
    `redact` (the server's secrets out) applied to the whole text before it is cut to `budget`."""
    parts = [render_block(b) for b in (result.content or [])]
    if not any(p.strip() for p in parts) and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    text = "\n".join(parts)
    if redact is not None:
        text = redact(text)
    failed = bool(result.is_error) or bool(_ERROR_TEXT.match(text))
    text, truncated = cut(text, budget)
    return ToolResult(
        status=CallStatus.TOOL_ERROR if failed else CallStatus.OK,
        text=text if text.strip() else EMPTY_RESULT,
        latency_s=latency_s,
        truncated=truncated,
    )
