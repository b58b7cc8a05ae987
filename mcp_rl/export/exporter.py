"""`export_tuned`: a run's checkpoint -> an adapter, a merged model or a GGUF file, with its card.

Order matters for the user: every check that can fail fast (the run and its checkpoint, the output
directory, the base model being here offline, the base having a GGUF origin) runs before any
model is loaded; the export is written to a staging directory that replaces -o only when complete.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from mcp_rl.errors import ConfigError
from mcp_rl.export.base import BaseInfo, check_base, load_tokenizer, local_dir, stored_dtype
from mcp_rl.export.card import (
    ExportInfo,
    model_card,
    modelfile,
    public_config,
    run_results,
    template_uses_tools,
)
from mcp_rl.export.gguf_export import GGUF_TYPES, gguf_origin, gguf_tensors, write_gguf
from mcp_rl.export.outdir import check_output, staged
from mcp_rl.rundir import RunDir
from mcp_rl.tuned import EXPORT_INFO, TunedSource, find_tuned, read_json

Format = Literal["peft", "merged", "gguf"]
FORMATS: tuple[str, ...] = ("peft", "merged", "gguf")


class ExportResult(BaseModel):
    out: Path
    format: str
    files: dict[str, int]
    """File name -> size in bytes."""
    info: ExportInfo


def _served_name(source: TunedSource, out: Path, name: str | None) -> str:
    raw = name or (f"{source.run_dir.name}-step{source.step}" if source.run_dir else out.name)
    clean = re.sub(r"[^a-z0-9._-]+", "-", raw.lower()).strip("-.")
    if not clean:
        raise ConfigError(
            f"--name {raw!r} has no usable characters", hint="use letters, digits, '.', '-', '_'"
        )
    return clean


def _base_path(base: BaseInfo) -> Path | None:
    from mcp_rl.models.builtin import model_cache_dir

    if base.kind in ("directory", "gguf"):
        return Path(base.name).expanduser()
    return model_cache_dir(base.name) if base.kind == "builtin" else None


def _refuse_overwriting_inputs(target: Path, inputs: list[Path | None]) -> None:
    """-o replaces the whole directory (with --force): never the run, its checkpoint or the base model."""
    for p in inputs:
        if p is None:
            continue
        p = p.expanduser().absolute()
        if target == p or target in p.parents:
            raise ConfigError(
                f"the output directory {target} holds {p}, which this export reads",
                hint="choose an -o directory outside the run and the base model",
            )


def _results(source: TunedSource) -> dict[str, Any]:
    if source.run_dir is None:  # re-exporting an export: keep the figures it carries
        info = source.adapter_dir / EXPORT_INFO if source.adapter_dir else None
        return read_json(info, "export info").get("results", {}) if info and info.is_file() else {}
    run = RunDir(source.run_dir)
    state = run.load_state()
    # Only what the run committed: a killed run's metrics file may hold a step it will redo.
    committed = [m for m in run.read_metrics() if int(m.get("step", 0)) <= state.completed_step]
    return run_results(committed, source.step, state.best_step)


def _lora(adapter_dir: Path) -> dict[str, Any]:
    cfg = read_json(adapter_dir / "adapter_config.json", "the adapter's config")
    return {k: cfg.get(k) for k in ("r", "lora_alpha", "target_modules", "use_rslora")}


def export_tuned(
    path: str | Path,
    fmt: str,
    out: str | Path,
    *,
    checkpoint: str | int = "best",
    gguf_type: str = "f16",
    force: bool = False,
    name: str | None = None,
    log: Callable[[str], None] = lambda _msg: None,
) -> ExportResult:
    """Export RUN (a run directory, one of its checkpoints, or a PEFT export) in `fmt`."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    if gguf_type not in GGUF_TYPES:
        raise ConfigError(f"unknown GGUF type {gguf_type!r}", hint=f"use one of {', '.join(GGUF_TYPES)}")
    target = check_output(Path(out), force)
    source = find_tuned(path, checkpoint)
    if source.adapter_dir is None:
        raise ConfigError(
            f"{path} is a merged export: there is no adapter left to export",
            hint="export from the training run (runs/<name>) instead",
        )
    base = check_base(source.base_model)
    _refuse_overwriting_inputs(target, [Path(path), source.run_dir, source.adapter_dir, _base_path(base)])
    info = ExportInfo(
        format=fmt,
        name=_served_name(source, target, name),
        base_model=base.name,
        base_description=base.description,
        step=source.step,
        run_dir=str(source.run_dir) if source.run_dir else None,
        mcp_rl_version=_version(),
        created=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        lora=_lora(source.adapter_dir),
        config=public_config(source.config),
        prompt=source.prompt,  # the system prompt and the server's tools: no secrets (and tool schemas may
        # have parameters named env or headers, which masking would corrupt)
        results=_results(source),
    )
    with staged(target) as tmp:
        origin = gguf_origin(base, tmp) if fmt == "gguf" else None  # fails before any model loads
        try:
            base_dir = local_dir(base)
            info.base_location = str(base_dir) if base_dir else None
            stop = _write_format(fmt, source, base, base_dir, origin, tmp, info, gguf_type, log)
        finally:
            if origin is not None and origin.temporary:
                origin.path.unlink(missing_ok=True)
        (tmp / EXPORT_INFO).write_text(info.model_dump_json(indent=2) + "\n")
        (tmp / "README.md").write_text(model_card(info, target))
        if fmt == "gguf":
            (tmp / "Modelfile").write_text(modelfile(info, stop))
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()}
    return ExportResult(out=target, format=fmt, files=files, info=info)


def _write_format(
    fmt: str,
    source: TunedSource,
    base: BaseInfo,
    base_dir: Path | None,
    origin: Any,
    tmp: Path,
    info: ExportInfo,
    gguf_type: str,
    log: Callable[[str], None],
) -> list[str]:
    """Write the weights of `fmt` into `tmp`; fills in `info`; returns the stop strings."""
    from mcp_rl.export.merged import merged_model, write_merged
    from mcp_rl.export.peft_export import write_peft

    assert source.adapter_dir is not None
    if fmt == "peft":
        log(f"copying the adapter of step {source.step}")
        write_peft(source.adapter_dir, tmp, info.base_location or base.name)
        tokenizer = load_tokenizer(base, base_dir)
        info.template_has_tools = template_uses_tools(tokenizer)
        return [str(tokenizer.eos_token or "")]
    log(f"loading {base.name} in float32 and merging the adapter of step {source.step}")
    model, tokenizer = merged_model(base.name, source.adapter_dir)
    info.template_has_tools = template_uses_tools(tokenizer)
    if fmt == "merged":
        info.dtype = stored_dtype(base_dir)
        log(f"writing the merged model ({info.dtype} safetensors)")
        write_merged(model, tokenizer, tmp, info.dtype)
        return [str(tokenizer.eos_token or "")]
    info.gguf_type = gguf_type
    info.file = f"{info.name}-{gguf_type}.gguf"
    log(f"writing {info.file} ({origin.architecture}, {gguf_type})")
    tensors = gguf_tensors(model.state_dict(), model.config, origin.architecture)
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None
    write_gguf(tensors, origin, tmp / info.file, gguf_type, template, info.name)
    return [str(tokenizer.eos_token or "")]


def _version() -> str:
    from mcp_rl import __version__

    return __version__
