"""`mcp-rl chat`: talk to a (tuned) model that works a live MCP server, from the terminal.

Answers go to stdout; tool calls, their clipped results and status lines go to stderr, so
`mcp-rl chat ... --message TEXT > answer.txt` keeps only the answer.
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Annotated

import anyio
import anyio.to_thread
import typer
from rich.text import Text

from mcp_rl.cli.app import app, console, err_console, print_error
from mcp_rl.cli.from_config import checked, config_options, range_help
from mcp_rl.cli.options import ROLLOUT_FLAGS, BaseUrlOpt, ServerOptions
from mcp_rl.errors import ConfigError, McpRlError
from mcp_rl.models.registry import check_base_url, check_model_name
from mcp_rl.rollout import RolloutConfig
from mcp_rl.servers.results import CallStatus
from mcp_rl.trajectory import ToolCallRecord

_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_END = {
    "max_turns": "no answer within {turns} turns (raise --max-turns, or ask again)",
    "context": "the conversation no longer fits the context: type /reset to start over",
    "server_error": "the server crashed and could not be restarted",
}


def clip(text: str, limit: int) -> str:
    # Control characters would garble the terminal; a pretty-printed result reads fine on one line.
    text = " ".join(_CONTROL.sub("?", text).split())
    return text if len(text) <= limit else f"{text[:limit]} ... [{len(text) - limit} more chars]"


def show_call(rec: ToolCallRecord, limit: int = 300) -> None:
    args = json.dumps(rec.arguments, ensure_ascii=False) if rec.arguments is not None else "?"
    line = Text("  -> ", style="dim")
    line.append(rec.name or "(no name)", style="bold cyan")
    line.append(f"({clip(args, 200)})")
    ok = rec.status is CallStatus.OK
    line.append(f"  [{rec.status.value}]", style="green" if ok else "yellow")
    err_console.print(line, highlight=False)
    err_console.print(Text("     " + clip(rec.result_text, limit), style="dim"), highlight=False)


@app.command("chat")
@config_options
def chat(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="A training run (runs/<name>), a checkpoint or export directory, or any model spec "
            "(built-in name, model directory, .gguf file, openai:NAME).",
        ),
    ],
    servers: ServerOptions,
    checkpoint: Annotated[
        str,
        typer.Option("--checkpoint", "-c", help="Which checkpoint of a run: best, last, or a step number."),
    ] = "best",
    message: Annotated[
        str | None,
        typer.Option("--message", help="Send this one message, print the answer and exit (for scripts)."),
    ] = None,
    max_turns: Annotated[
        int,
        typer.Option(
            "--max-turns", help=range_help(RolloutConfig, "max_turns", "Assistant messages per user message.")
        ),
    ] = 6,
    max_new_tokens: Annotated[
        int,
        typer.Option(
            "--max-new-tokens",
            help=range_help(RolloutConfig, "max_new_tokens", "Tokens per assistant message."),
        ),
    ] = 256,
    max_context: Annotated[
        int,
        typer.Option(
            "--max-context",
            help=range_help(RolloutConfig, "max_context_tokens", "Token budget of the whole conversation."),
        ),
    ] = 8192,
    temperature: Annotated[
        float,
        typer.Option(
            "--temperature", help=range_help(RolloutConfig, "temperature", "0 is greedy (as evaluation).")
        ),
    ] = 0.0,
    top_p: Annotated[
        float, typer.Option("--top-p", help=range_help(RolloutConfig, "top_p", "Nucleus sampling."))
    ] = 1.0,
    seed: Annotated[int | None, typer.Option("--seed")] = None,
    base_url: BaseUrlOpt = None,
    result_chars: Annotated[
        int, typer.Option("--result-chars", min=20, help="Characters of each tool result to show.")
    ] = 300,
) -> None:
    """Chat with a model that uses a live MCP server's tools: the training agent loop, interactive.
    Type a message; /reset forgets the conversation; /exit or end of input (Ctrl-D) quits."""
    from mcp_rl.chat import Chat, Reply, chat_system_prompt
    from mcp_rl.models.registry import close_models
    from mcp_rl.serve.loading import Opened, looks_tuned, open_plain, open_source
    from mcp_rl.servers import ToolPolicy
    from mcp_rl.servers.session import ServerSession
    from mcp_rl.tuned import find_tuned

    if message is not None and not message.strip():
        raise ConfigError("--message is empty", hint="give the text to send, or leave --message out to chat")
    cfg = checked(
        RolloutConfig, ROLLOUT_FLAGS,
        max_turns=max_turns, max_new_tokens=max_new_tokens, max_context_tokens=max_context,
        temperature=temperature, top_p=top_p, seed=seed,
    )  # fmt: skip
    spec, policy = servers.spec(), servers.policy()
    base_url = check_base_url(base_url)
    # A missing run or a broken model file is reported before anything starts.
    source = find_tuned(model, checkpoint) if looks_tuned(model) else None
    if source is None:
        check_model_name(model, base_url=base_url)
    trained_policy = (source.config.get("policy") if source else None) or None
    if trained_policy and not servers.policy_given:
        # the tuned model learned with this tool set: the same one here, unless the flags say otherwise
        policy = ToolPolicy.model_validate(trained_policy)

    def report(reply: Reply) -> bool:
        if reply.answer is not None:
            console.print(reply.answer, markup=False, highlight=False, soft_wrap=True)
            if reply.truncated:
                err_console.print(f"(the answer was cut at {max_new_tokens} tokens)", style="yellow")
            return True
        err_console.print(f"({_END[reply.end].format(turns=max_turns)})", style="yellow", highlight=False)
        return False

    async def read_line() -> str | None:
        if sys.stdin.isatty():
            err_console.print("[bold]>[/] ", end="")
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        return None if line == "" else line.rstrip("\n")

    async def main() -> int:
        opened: Opened | None = None
        # The server first: a wrong command fails in seconds, before a model load that can take a minute.
        with err_console.status(f"starting server {spec.describe()} ..."):
            session = ServerSession(spec, policy)
            await session.__aenter__()
        try:
            if not session.tools:
                raise ConfigError(
                    f"server {spec.describe()!r} offers no usable tools",
                    hint="see `mcp-rl inspect`; --allow-destructive or --allow-tools may include some",
                )
            off = f", {len(session.excluded)} excluded" if session.excluded else ""
            err_console.print(
                f"[dim]server {session.server_name} {session.server_version}: {len(session.tools)} tools{off}[/]",
                highlight=False,
            )
            t0 = time.monotonic()
            with err_console.status(f"loading {model} ..."):
                if source is not None:
                    opened = await anyio.to_thread.run_sync(lambda: open_source(source, model))
                else:
                    opened = await anyio.to_thread.run_sync(lambda: open_plain(model, base_url=base_url))
            system, recorded = chat_system_prompt(session, source.prompt if source else None)
            where = f", checkpoint {source.step}" if source and source.step is not None else ""
            err_console.print(f"[dim]model {opened.name}{where} ready in {time.monotonic() - t0:.1f} s[/]")
            if source is not None and not recorded:
                trained_on = source.prompt.get("server_name") or "another server"
                err_console.print(
                    f"[yellow]note:[/] this model was trained on {trained_on}, not {session.server_name}",
                    highlight=False,
                )
            conv = Chat(opened.model, session, system, cfg, on_call=lambda r: show_call(r, result_chars))
            if message is not None:
                return 0 if report(await conv.send(message)) else 1
            if sys.stdin.isatty():
                err_console.print("[dim]type a message; /reset forgets the conversation; /exit quits[/]")
            while (line := await read_line()) is not None:
                text = line.strip()
                if text in ("/exit", "/quit"):
                    break
                if text == "/reset":
                    conv.reset()
                    err_console.print("[dim](conversation cleared)[/]")
                    continue
                if not text:
                    continue
                try:
                    report(await conv.send(text))
                except McpRlError as e:  # one bad exchange does not end the conversation
                    print_error(e.message)
            return 0
        finally:
            await session.__aexit__(None, None, None)
            if opened is not None:
                close_models(opened.model)

    code = anyio.run(main)
    if code:
        raise typer.Exit(code)
