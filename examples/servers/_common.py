"""What the example servers share: command-line flags for the transport, and running it.

Logs go to stderr only: on stdio, stdout carries the protocol and any stray byte breaks it.
"""

import argparse
import sys

from mcp.server import MCPServer

DEFAULT_HOST = "127.0.0.1"
HTTP_PATH = "/mcp"


def add_transport_args(parser: argparse.ArgumentParser, default_port: int) -> None:
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    # Loopback by default: an example server has no business listening on other interfaces.
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
    )


def serve(server: MCPServer, args: argparse.Namespace) -> None:
    """Run `server` on the transport the flags chose."""
    if args.transport == "stdio":
        server.run(transport="stdio")
        return
    # One line on stderr so a person (or a test's log) can see where it listens.
    print(
        f"{server.name}: listening on http://{args.host}:{args.port}{HTTP_PATH}", file=sys.stderr, flush=True
    )
    server.run(transport="streamable-http", host=args.host, port=args.port, streamable_http_path=HTTP_PATH)
