"""BFCL backend classes as one stdio MCP server: the classes an entry involves, in the state the
entry starts them in, their tools from BFCL's function docs (minus the entry's excluded functions).

    mcp-rl bench server bfcl:GorillaFileSystem                      # BFCL's empty default state
    mcp-rl bench server bfcl:GorillaFileSystem+TwitterAPI --entry multi_turn_base_0
    python -m mcp_rl.bench.bfcl_server bfcl:TradingBot --state state.json --exclude get_stock_info

A call runs the backend method on the live instance, so state carries from call to call for the
life of the process (a stdio restart starts the entry over, as a reset should). A result is written
as BFCL's own executor writes it (a string as is, a dict as JSON, anything else `str()`), so what
the model reads is what BFCL's models read; an exception becomes an MCP error result.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from typing import Any

from mcp_rl.bench.bfcl_data import (
    backend_class,
    check_backend,
    find_entry,
    func_docs,
    new_backend,
)
from mcp_rl.errors import ConfigError

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "int": "integer", "bool": "boolean", "str": "string"}


def json_schema(param: dict[str, Any]) -> dict[str, Any]:
    """A BFCL parameter description (its own type names: dict, float, tuple, any) as JSON Schema."""
    out: dict[str, Any] = {}
    kind = param.get("type")
    if kind and kind != "any":
        out["type"] = _TYPES.get(kind, kind)
    for key in ("description", "enum", "default", "required"):
        if key in param:
            out[key] = param[key]
    if "properties" in param:
        out["properties"] = {k: json_schema(v) for k, v in param["properties"].items()}
    if "items" in param:
        out["items"] = json_schema(param["items"])
    return out


def tool_schemas(classes: list[str], excluded: list[str] | None = None) -> list[dict[str, Any]]:
    """name, description, inputSchema of every tool the classes offer, in BFCL's order."""
    skip = set(excluded or [])
    out = []
    for cls in classes:
        for doc in func_docs(cls):
            if doc["name"] in skip:
                continue
            schema = json_schema(doc.get("parameters") or {"type": "dict", "properties": {}})
            schema.setdefault("type", "object")
            schema.setdefault("properties", {})
            out.append({"name": doc["name"], "description": doc.get("description", ""), "inputSchema": schema, "class": cls})
    return out


def result_text(value: Any) -> str:
    """What BFCL's executor makes of a method's return value (`execute_multi_turn_func_call`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


class Backends:
    """The live instances of an entry's classes, and a call by tool name."""

    def __init__(self, classes: list[str], state: dict[str, Any], excluded: list[str], long_context: bool = False):
        self.tools = tool_schemas(classes, excluded)
        self.instances = {c: new_backend(c, state.get(c), long_context) for c in classes}
        self._owner = {t["name"]: t["class"] for t in self.tools}

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """(result text, is_error)."""
        cls = self._owner.get(name)
        if cls is None:
            return f"unknown tool {name!r}", True
        try:
            return result_text(getattr(self.instances[cls], name)(**arguments)), False
        except Exception as e:  # a backend's own failure is the model's to read, as in BFCL
            return f"Error during execution: {e}", True


def parse_target(target: str) -> list[str]:
    """'bfcl:GorillaFileSystem+MathAPI' (or without 'bfcl:') -> the class names, each checked."""
    name = target.removeprefix("bfcl:")
    classes = [c for c in name.replace(",", "+").split("+") if c]
    if not classes:
        raise ConfigError(f"no BFCL backend in {target!r}", hint="e.g. bfcl:GorillaFileSystem")
    return [check_backend(c) for c in classes]


def build_server(backends: Backends, name: str) -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"]) for t in backends.tools]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        text, error = backends.call(params.name, dict(params.arguments or {}))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)

    return Server(
        name,
        instructions="A BFCL multi-turn backend (" + ", ".join(backends.instances) + "): a simulated, stateful API.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def backends_from_args(target: str, entry_id: str | None, state_file: str | None, exclude: list[str]) -> Backends:
    classes = parse_target(target)
    state: dict[str, Any] = {}
    excluded = list(exclude)
    long_context = False
    if entry_id:
        entry = find_entry(entry_id)
        state = entry.initial_config
        excluded += entry.excluded_function
        long_context = "long_context" in entry.category
    if state_file:
        with open(state_file, encoding="utf-8") as f:
            state = json.load(f)
    return Backends(classes, state, excluded, long_context)


def serve_stdio(backends: Backends, name: str) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(backends, name)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="mcp_rl.bench.bfcl_server", description=__doc__.split("\n\n")[0])
    p.add_argument("target", help="bfcl:CLASS or bfcl:CLASS+CLASS")
    p.add_argument("--entry", help="start in this BFCL entry's state, with its excluded functions")
    p.add_argument("--state", help="a JSON file: {CLASS: initial_config} (BFCL's initial_config form)")
    p.add_argument("--exclude", action="append", default=[], help="a tool to leave out (repeatable)")
    args = p.parse_args(argv)
    try:
        backends = backends_from_args(args.target, args.entry, args.state, args.exclude)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    serve_stdio(backends, "bfcl-" + "-".join(backends.instances))


def positional_names(class_name: str, method: str) -> list[str]:
    """The parameter names of a backend method in order (BFCL's ground truth passes some positionally)."""
    fn = getattr(backend_class(class_name), method)
    return [n for n in inspect.signature(fn).parameters if n != "self"]


if __name__ == "__main__":
    main()
