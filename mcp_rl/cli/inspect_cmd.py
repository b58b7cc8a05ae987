"""`mcp-rl inspect`: what a server offers, and what the safety policy does with each tool."""

from __future__ import annotations

import json
from typing import Annotated, Any

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from mcp_rl.cli.app import app, console
from mcp_rl.cli.from_config import config_options
from mcp_rl.cli.options import ServerOptions
from mcp_rl.servers import ServerSession, ToolSpec, classify

_CLASS_STYLE = {"read": "green", "write": "yellow", "irreversible": "red"}


def _type_of(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "enum[" + "|".join(map(str, schema["enum"]))[:40] + "]"
    t = schema.get("type")
    if t == "array":
        return f"array[{_type_of(schema.get('items') or {})}]"
    if isinstance(t, list):
        t = "|".join(t)
    if t is None and ("anyOf" in schema or "oneOf" in schema):
        t = "|".join(_type_of(o) for o in schema.get("anyOf") or schema.get("oneOf") or [])
    return (str(t) if t else "any") + ("?" if schema.get("nullable") else "")


def _params(tool: ToolSpec) -> str:
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    if not props:
        return "(none)"
    return "\n".join(f"{name}{'*' if name in required else ''}: {_type_of(p)}" for name, p in props.items())


def _annotations(tool: ToolSpec) -> str:
    a = tool.annotations
    flags = [
        name
        for name, on in (
            ("read-only", a.read_only),
            ("destructive", a.destructive),
            ("idempotent", a.idempotent),
            ("open-world", a.open_world),
        )
        if on
    ]
    return ", ".join(flags) if flags else ("-" if a.given else "(none given)")


async def _inspect(session: ServerSession, as_json: bool) -> None:
    async with session as s:
        if as_json:
            print(json.dumps([t.openai() for t in s.tools], indent=2, ensure_ascii=False))
            return
        resources = await s.list_resources()
        prompts = await s.list_prompts()
        console.print(
            f"[bold]{s.server_name}[/] {s.server_version}  protocol {s.protocol_version}  "
            f"transport {s.spec.transport}: {s.spec.describe()}",
            highlight=False,
        )
        if s.instructions:
            console.print(f"[dim]{s.instructions.strip()[:500]}[/]")
        table = Table(title=f"Tools ({len(s.tools)} usable of {len(s.all_tools)})", show_lines=True)
        for col in ("tool", "parameters (* required)", "annotations", "class", "policy", "description"):
            table.add_column(col, overflow="fold")
        for t in s.all_tools:
            cls = classify(t)
            reason = s.excluded.get(t.name)
            if reason:
                policy = f"[red]excluded[/]: {escape(reason)}"
            elif s.policy.warning(t):
                policy = "[yellow]used, irreversible[/]: allowed by your flags"
            else:
                policy = "[green]used[/]"
            style = _CLASS_STYLE[cls.kind]
            table.add_row(
                t.name, _params(t), _annotations(t), f"[{style}]{cls.kind}[/]: {escape(cls.reason)}", policy,
                t.description[:200],
            )  # fmt: skip
        console.print(table)
        if resources:
            rt = Table(title=f"Resources ({len(resources)})")
            for col in ("uri", "name", "mime type", "description"):
                rt.add_column(col, overflow="fold")
            for r in resources:
                rt.add_row(str(r.uri), r.name or "", r.mime_type or "", (r.description or "")[:120])
            console.print(rt)
        if prompts:
            pt = Table(title=f"Prompts ({len(prompts)})")
            for col in ("name", "arguments", "description"):
                pt.add_column(col, overflow="fold")
            for p in prompts:
                args = ", ".join(a.name + ("*" if a.required else "") for a in (p.arguments or []))
                pt.add_row(p.name, args or "-", (p.description or "")[:120])
            console.print(pt)
        if s.excluded:
            console.print(
                f"[yellow]{len(s.excluded)} tool(s) excluded by the safety policy[/] "
                "(--allow-tools, --allow-destructive and --deny-tools change this)."
            )


@app.command("inspect")
@config_options
def inspect_command(
    servers: ServerOptions,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the tools as OpenAI function definitions.")
    ] = False,
) -> None:
    """List a server's tools (with parameters, annotations, each tool's class: read, write or
    irreversible, and why, and what the safety policy does with it), resources and prompts. --json prints the tools exactly as the model will see them."""
    session = ServerSession(servers.spec(), servers.policy())
    anyio.run(_inspect, session, as_json)
