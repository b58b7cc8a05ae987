"""`mcp-rl export`: a run's tuned LoRA as a PEFT adapter, a merged model or a GGUF file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mcp_rl.cli.app import app, console
from mcp_rl.cli.options import OutAlias, one_output
from mcp_rl.errors import ConfigError


@app.command("export")
def export_command(
    run: Annotated[
        Path, typer.Argument(help="A run directory (runs/<name>), one of its checkpoints, or a PEFT export.")
    ],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="peft (the adapter: PEFT, vLLM --lora-modules), merged (a standalone transformers model), "
            "gguf (llama.cpp, Ollama; with a Modelfile).",
        ),
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="The output directory (created).")
    ] = None,
    out: OutAlias = None,
    checkpoint: Annotated[
        str, typer.Option("--checkpoint", "-c", help="best (default), last, or a step number.")
    ] = "best",
    gguf_type: Annotated[
        str, typer.Option("--gguf-type", help="GGUF weight type: f16 (default) or q8_0 (half the size).")
    ] = "f16",
    name: Annotated[
        str | None,
        typer.Option("--name", help="The name to serve it under (default: <run>-step<N>)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the output directory if it exists and is not empty.")
    ] = False,
) -> None:
    """Export the tuned model with a model card (base model, server and tools, the training prompt,
    results before/after, and the commands that serve it with vLLM, Ollama or `mcp-rl serve`)."""
    from mcp_rl.export import export_tuned

    out = one_output(output, out, "--out")
    if out is None:
        raise ConfigError("no output directory given", hint="pass --output DIR")
    result = export_tuned(
        run,
        fmt.strip().lower(),
        out,
        checkpoint=checkpoint,
        gguf_type=gguf_type.strip().lower(),
        force=force,
        name=name,
        log=lambda msg: console.print(f"[dim]{msg}[/]", highlight=False),
    )
    total = sum(result.files.values())
    console.print(
        f"exported step {result.info.step} of {result.info.base_model} as [bold]{result.format}[/] "
        f"to [bold]{result.out}[/] ({total / 1e6:.1f} MB)",
        highlight=False,
    )
    for fname, size in result.files.items():
        console.print(f"  {fname}  {size / 1e6:.1f} MB", highlight=False)
    console.print(f"serve it: mcp-rl serve {result.out}   (more commands in {result.out / 'README.md'})")
