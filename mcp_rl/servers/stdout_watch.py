"""What a stdio server wrote on stdout that is not MCP.

The MCP spec says a stdio server writes nothing but JSON-RPC messages on stdout. A server that
prints a banner or its logs there instead makes the SDK log a parse traceback per line and, when
no real message ever comes, the handshake simply times out. This watch sits between the transport
and the client: it passes every item through, and keeps the first line that was not a message,
so the session can say in one sentence what went wrong (`ServerSession._connect`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

# The SDK logs a full traceback for every line it cannot parse; the session reports the first one
# itself, in one message, so those records are dropped here.
_PARSE_FAILED = "Failed to parse JSONRPC message from server"

GRACE_S = 10.0
"""After the first line that is not MCP, how long the handshake may still finish (a server that
printed one banner line and then speaks MCP keeps working, as with the SDK's lenient client)."""


class _DropParseTracebacks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _PARSE_FAILED


logging.getLogger("mcp.client.stdio").addFilter(_DropParseTracebacks())


class StdoutWatch:
    """The first non-MCP line a server wrote on stdout, and when."""

    def __init__(self) -> None:
        self.first_line: str | None = None
        self.first_at: float | None = None
        self.lines = 0
        self.messages = 0

    def seen(self, item: Any) -> None:
        if not isinstance(item, Exception):
            self.messages += 1
            return
        self.lines += 1
        if self.first_line is None:
            self.first_line = _offending_text(item)
            self.first_at = time.monotonic()

    def gave_up(self, now: float) -> bool:
        """Whether the garbage came before any message and its grace is over."""
        return self.first_at is not None and self.messages == 0 and now - self.first_at >= GRACE_S

    def describe(self) -> str:
        line = (self.first_line or "").strip()
        shown = line if len(line) <= 120 else line[:117] + "..."
        more = f" ({self.lines} such lines)" if self.lines > 1 else ""
        return f"its stdout is not MCP: it printed {shown!r}{more} where JSON-RPC messages were expected"


def _offending_text(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            for err in errors():
                if isinstance(err.get("input"), str):
                    return err["input"]
        except Exception:  # a parse error of another shape: fall back to its text
            pass
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class _WatchedRead:
    """A read stream that shows each item to a `StdoutWatch` on its way to the client."""

    def __init__(self, inner: Any, watch: StdoutWatch) -> None:
        self._inner = inner
        self._watch = watch

    async def receive(self) -> Any:
        item = await self._inner.receive()
        self._watch.seen(item)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        item = await self._inner.__anext__()
        self._watch.seen(item)
        return item

    async def __aenter__(self) -> _WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._inner.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:  # e.g. `last_context`, read by the SDK when present
        return getattr(self._inner, name)


@asynccontextmanager
async def watched(transport: Any, watch: StdoutWatch) -> AsyncIterator[tuple[Any, Any]]:
    """`transport` (an async context manager of (read, write) streams) with its reads watched."""
    async with transport as (read, write):
        yield _WatchedRead(read, watch), write
