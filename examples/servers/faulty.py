"""An MCP server that misbehaves on request, for fault-injection tests of a client.

    python -m examples.servers.faulty [--transport stdio|http] [--host 127.0.0.1] [--port 8766]
                                      [--exit-at-start] [--crash-after N]

Tools: echo, sleep (hangs), crash (the process dies mid-call), fail (is_error result), error_text
(a normal result that says "Error: ..."), big_output, image (a PNG block), resource_block (an
embedded resource), log_stderr (writes to stderr), and loose_schema (a hand-written input schema
with type arrays, no descriptions, a bare enum and an untyped array).
"""

import argparse
import os
import struct
import sys
import zlib
from typing import Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import EmbeddedResource, TextResourceContents, ToolAnnotations
from pydantic import Field

from examples.servers._common import add_transport_args, serve

SAFE = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
CRASH_EXIT_CODE = 3
START_EXIT_CODE = 2
MAX_OUTPUT_CHARS = 5_000_000

# A schema of the kind real servers publish and a client must still convert: `type` arrays,
# properties with no description and no type, an untyped array, additionalProperties false.
LOOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "value": {"type": ["string", "number", "null"]},
        "mode": {"enum": ["fast", "slow"]},
        "tags": {"type": "array"},
        "options": {"type": "object"},
    },
    "required": ["value"],
    "additionalProperties": False,
}


def tiny_png(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid PNG of one colour, built by hand so the server needs no imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _die(reason: str) -> None:
    # os._exit skips cleanup on purpose: the client must see a process that vanishes mid-call.
    print(f"faulty-example: {reason}", file=sys.stderr, flush=True)
    os._exit(CRASH_EXIT_CODE)


def build_server(crash_after: int | None = None, log_level: str = "WARNING") -> MCPServer:
    calls = 0

    def count_call() -> None:
        nonlocal calls
        calls += 1
        if crash_after is not None and calls >= crash_after:
            _die(f"crashing on call {calls} as asked by --crash-after {crash_after}")

    def loose_schema(value: Any = None, mode: Any = None, tags: Any = None, options: Any = None) -> str:
        count_call()
        return f"value={value!r} mode={mode!r} tags={tags!r} options={options!r}"

    # Built by hand so the published schema is the loose one above, not pydantic's; the function
    # accepts anything, so what reaches it is exactly what the client sent. No docstring on purpose.
    loose = Tool.from_function(loose_schema)
    loose.parameters = LOOSE_SCHEMA

    server = MCPServer(
        "faulty-example",
        tools=[loose],
        version="0.1.0",
        instructions="A test server whose tools fail in every way a real MCP server can.",
        log_level=log_level,  # type: ignore[arg-type]
    )

    @server.tool(annotations=SAFE)
    def echo(text: Annotated[str, Field(description="Text to send back")]) -> str:
        """Return the text unchanged."""
        count_call()
        return text

    @server.tool(annotations=SAFE)
    async def sleep(seconds: Annotated[float, Field(ge=0, description="How long to wait")]) -> str:
        """Wait this many seconds, then answer. Use it to test timeouts."""
        count_call()
        await anyio.sleep(seconds)
        return f"slept {seconds:g} s"

    # Not marked destructive, so a default safety policy keeps it callable in crash tests.
    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
    )
    def crash() -> str:
        """Kill the server process in the middle of this call."""
        count_call()
        _die("crash() was called, exiting without an answer")
        return "unreachable"

    @server.tool(annotations=SAFE)
    def fail(message: str = "the tool failed on purpose") -> str:
        """Fail: the result comes back with is_error set."""
        count_call()
        raise ToolError(message)

    @server.tool(annotations=SAFE, structured_output=False)
    def error_text() -> str:
        """Fail the way some servers do: a normal result whose text starts with 'Error:'."""
        count_call()
        return "Error: something went wrong"

    @server.tool(annotations=SAFE, structured_output=False)
    def big_output(n_chars: Annotated[int, Field(ge=0, le=MAX_OUTPUT_CHARS)] = 100_000) -> str:
        """Return exactly n_chars characters of numbered lines."""
        count_call()
        lines, size, n = [], 0, 0
        while size < n_chars:
            line = f"line {n:07d}: the quick brown fox jumps over the lazy dog\n"
            lines.append(line)
            size += len(line)
            n += 1
        return "".join(lines)[:n_chars]

    @server.tool(annotations=SAFE)
    def image() -> Image:
        """Return a small PNG image block."""
        count_call()
        return Image(data=tiny_png(), format="png")

    @server.tool(annotations=SAFE, structured_output=False)
    def resource_block() -> list[Any]:
        """Return a text block followed by an embedded text resource."""
        count_call()
        note = TextResourceContents(
            uri="faulty://notes/1", mime_type="text/plain", text="note one: remember the milk"
        )
        return ["Here is the note:", EmbeddedResource(type="resource", resource=note)]

    @server.tool(annotations=SAFE)
    def log_stderr(text: str, lines: int = 1) -> str:
        """Write text to the server's stderr `lines` times, then answer 'ok'."""
        count_call()
        for _ in range(lines):
            print(text, file=sys.stderr, flush=True)
        return "ok"

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m examples.servers.faulty", description=__doc__.split("\n")[0]
    )
    add_transport_args(parser, default_port=8766)
    parser.add_argument("--exit-at-start", action="store_true", help="Exit with an error before serving")
    parser.add_argument("--crash-after", type=int, metavar="N", help="Exit abruptly on the Nth tool call")
    args = parser.parse_args(argv)
    if args.exit_at_start:
        print("faulty-example: refusing to start (--exit-at-start)", file=sys.stderr, flush=True)
        sys.exit(START_EXIT_CODE)
    serve(build_server(crash_after=args.crash_after, log_level=args.log_level), args)


if __name__ == "__main__":
    main()
