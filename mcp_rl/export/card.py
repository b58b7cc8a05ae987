"""What travels with every export: `mcp-rl-export.json` (for programs: `mcp_rl.tuned.find_tuned`
reads it), the model card `README.md` (for people), and for GGUF the Ollama `Modelfile`.

The tuned model depends on the prompt it was trained with (system prompt, tool listing, answer
convention): the card and the Modelfile carry it verbatim. Nothing here holds a secret: the run's
config is already masked, and `public_config` masks env and header values again in case an older
run wrote them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mcp_rl.figures import pct, rate_text
from mcp_rl.servers.spec import masked_url

_RESULT_KEYS = (
    "step", "episodes", "success", "success_low", "success_high", "success_n",
    "judged", "judged_low", "judged_high", "judged_n", "pasted_rate",
    "valid_call_rate", "tagged_call_rate", "tool_error_rate", "answered_rate", "mean_turns",
)  # fmt: skip
_VLLM_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


class ExportInfo(BaseModel):
    """The record `mcp-rl export` writes next to every export (`EXPORT_INFO`)."""

    format: str
    name: str
    """The name to serve it under (Ollama, vLLM, mcp-rl serve)."""
    base_model: str
    base_description: str
    base_location: str | None = None
    """The local directory with the exact base weights the adapter was trained on."""
    step: int | None = None
    run_dir: str | None = None
    mcp_rl_version: str
    created: str
    file: str | None = None
    """The GGUF file (format gguf)."""
    gguf_type: str | None = None
    dtype: str | None = None
    lora: dict[str, Any] = {}
    template_has_tools: bool = True
    """False when the chat template ignores `tools`: training listed them in the system message."""
    config: dict[str, Any] = {}
    prompt: dict[str, Any] = {}
    results: dict[str, Any] = {}


def public_config(config: Any) -> Any:
    """The config with every env and header value masked (any depth), and URLs without credentials."""
    if isinstance(config, dict):
        out: dict[str, Any] = {}
        for k, v in config.items():
            if k in ("env", "headers") and isinstance(v, dict):
                out[k] = {name: "***" for name in v}
            elif k == "url" and isinstance(v, str):
                out[k] = masked_url(v)
            else:
                out[k] = public_config(v)
        return out
    if isinstance(config, list):
        return [public_config(v) for v in config]
    return config


def run_results(metrics: list[dict[str, Any]], step: int | None, best_step: int | None) -> dict[str, Any]:
    """Base evaluation, the exported step's evaluation and the best one, from metrics.jsonl records."""

    def pick(kind: str, at: int | None, model: str | None = None) -> dict[str, Any] | None:
        for m in reversed(metrics):
            if m.get("kind") == kind and (at is None or m.get("step") == at) and m.get("model") == model:
                return {k: m.get(k) for k in _RESULT_KEYS}
        return None

    return {
        "base": pick("base_eval", None),
        "exported": pick("eval", step) if step is not None else None,
        "best": pick("eval", best_step) if best_step else None,
        "test_base": pick("test_eval", None, "base"),
        "test_best": pick("test_eval", None, "best"),
    }


def template_uses_tools(tokenizer: Any) -> bool:
    """Whether the chat template renders `tools` (SmolLM2's does not: training listed them in the
    system message, see TransformersModel.render)."""
    probe = "zz_mcp_rl_export_probe"
    tool = {"type": "function", "function": {"name": probe, "description": "", "parameters": {}}}
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}], tools=[tool], tokenize=False, add_generation_prompt=True
        )
    except Exception:
        return False
    return probe in str(text)


def system_message(prompt: dict[str, Any], template_has_tools: bool) -> str:
    """The system message as the policy saw it in training. With a template that ignores tools, the
    tool listing was appended to it in the form TransformersModel._inline_tools writes."""
    from mcp_rl.models.hf_backend import TOOLS_PREAMBLE

    system = str(prompt.get("system_prompt") or "")
    tools = prompt.get("tools") or []
    if template_has_tools or not tools:
        return system
    listing = TOOLS_PREAMBLE + "\n".join(json.dumps(t.get("function", t)) for t in tools)
    return f"{system}\n\n{listing}".strip()


def modelfile(info: ExportInfo, stop: list[str]) -> str:
    """An Ollama Modelfile: the GGUF, the training system message, greedy decoding as in evaluation."""
    system = system_message(info.prompt, info.template_has_tools).replace('"""', '" " "')
    ctx = int(((info.config.get("rollout") or {}).get("max_context_tokens")) or 4096)
    lines = [
        f"# Ollama Modelfile written by mcp-rl export ({info.name}); see README.md",
        f"FROM ./{info.file}",
        "",
        *(
            [
                "# The system prompt this model was trained with: it depends on it.",
                f'SYSTEM """{system}"""',
                "",
            ]
            if system
            else ["# The run recorded no system prompt.", ""]
        ),
        "# Evaluation during training was greedy; the context matches the training episodes' budget.",
        "PARAMETER temperature 0",
        f"PARAMETER num_ctx {ctx}",
    ]
    lines += [f"PARAMETER stop {json.dumps(s)}" for s in stop if s]
    return "\n".join(lines) + "\n"


def _test_rows(results: dict[str, Any]) -> list[str]:
    """The run's reported figure: the test split, run once on the base and once on val's best."""
    base, best = results.get("test_base"), results.get("test_best")
    if base is None or best is None:
        return []
    return [
        f"On the test split (held out from training and from choosing the checkpoint; step {best['step']}"
        " was val's choice):",
        "",
        "| test tasks | base model | best checkpoint |",
        "|---|---|---|",
        f"| checked success [95% interval] | {rate_text(base)} | {rate_text(best)} |",
        f"| judged success (tasks without a reference) | {rate_text(base, 'judged')} | {rate_text(best, 'judged')} |",
        f"| pasted answers | {pct(base.get('pasted_rate'))} | {pct(best.get('pasted_rate'))} |",
        "",
        "On val:",
        "",
    ]


def _result_rows(results: dict[str, Any], step: int | None) -> list[str]:
    rows = _test_rows(results)
    base = results.get("base")
    after, label = results.get("exported"), f"step {step} (exported)"
    if after is None and results.get("best"):
        after, label = (
            results["best"],
            f"step {results['best']['step']} (best; step {step} was not evaluated)",
        )
    if base is None and after is None:
        return ["No evaluation was recorded in the run's metrics.jsonl."]
    cols = [("base model", base), (label, after)]
    cols = [(n, m) for n, m in cols if m is not None]

    rows += [
        "| val tasks | " + " | ".join(n for n, _ in cols) + " |",
        "|---" * (len(cols) + 1) + "|",
        "| checked success [95% interval] | " + " | ".join(rate_text(m) for _, m in cols) + " |",
        "| valid-call rate | " + " | ".join(pct(m["valid_call_rate"]) for _, m in cols) + " |",
        "| calls in `<tool_call>` tags | " + " | ".join(pct(m.get("tagged_call_rate")) for _, m in cols) + " |",
        "| tool-error rate | " + " | ".join(pct(m["tool_error_rate"]) for _, m in cols) + " |",
        "| answered | " + " | ".join(pct(m["answered_rate"]) for _, m in cols) + " |",
        "| mean turns | "
        + " | ".join("-" if m["mean_turns"] is None else f"{m['mean_turns']:.1f}" for _, m in cols)
        + " |",
    ]
    return rows


def _vllm_rank(r: int) -> int:
    return next((x for x in _VLLM_RANKS if x >= r), r)


def serve_commands(info: ExportInfo, out: Path) -> list[str]:
    """The exact commands that serve this export (shell lines; comments start with #)."""
    d = str(out)
    lines = [
        "# mcp-rl (OpenAI-compatible /v1/chat/completions with tool calls, on 127.0.0.1)",
        f"mcp-rl serve {d}",
    ]
    # vLLM's tool-call parsers look for tags (<tool_call>...) that small models trained here often do
    # not emit (they answer with bare JSON): say so where it matters, rather than promise tool calls.
    vllm_note = (
        "# (vLLM returns the model's tool calls as message text unless one of its --tool-call-parser "
        "formats matches; `mcp-rl serve` parses them the way training did)"
    )
    to_gguf = "# Ollama and llama.cpp load GGUF: mcp-rl export <run> --format gguf -o <dir>"
    if info.format == "peft":
        base = info.base_location or info.base_model
        lines += [
            "# vLLM: the base weights the adapter was trained on, with the adapter as a LoRA module",
            f"vllm serve {base} --enable-lora --lora-modules {info.name}={d} "
            f"--max-lora-rank {_vllm_rank(int(info.lora.get('r') or 16))}",
            vllm_note,
            to_gguf,
        ]
    elif info.format == "merged":
        lines += ["# vLLM", f"vllm serve {d} --served-model-name {info.name}", vllm_note, to_gguf]
    else:
        lines += [
            "# Ollama",
            f"ollama create {info.name} -f {d}/Modelfile",
            f"ollama run {info.name}",
            "# llama.cpp (--jinja applies the model's own chat template, tools included)",
            f"llama-server -m {d}/{info.file} --jinja --host 127.0.0.1 --port 8080",
            "# vLLM takes the adapter or the merged model: mcp-rl export <run> --format peft|merged -o <dir>",
        ]
    return lines


def _server_lines(config: dict[str, Any], prompt: dict[str, Any]) -> list[str]:
    server = config.get("server") or {}
    name = prompt.get("server_name") or server.get("name") or "(unknown)"
    how = server.get("url") or " ".join(server.get("command") or []) or "(not recorded)"
    lines = [f"- Server: `{name}` ({server.get('transport', '?')}: `{how}`)"]
    secret_names = [*(server.get("env") or {}), *(server.get("headers") or {})]
    if secret_names:
        lines.append(
            f"- It needed these env/header values at training (not stored): {', '.join(secret_names)}"
        )
    return lines


def _tool_lines(prompt: dict[str, Any]) -> list[str]:
    tools = [t.get("function", t) for t in prompt.get("tools") or []]
    if not tools:
        return ["(the run did not record its tool list)"]
    out = [f"{len(tools)} tools:", ""]
    for t in tools:
        desc = " ".join(str(t.get("description") or "").split())
        out.append(
            f"- `{t.get('name')}`" + (f": {desc[:160]}{'...' if len(desc) > 160 else ''}" if desc else "")
        )
    return out


def _call_form_lines(results: dict[str, Any]) -> list[str]:
    """What runtimes will make of its calls, from the share written in tags at its last evaluation."""
    last = results.get("exported") or results.get("best") or results.get("base") or {}
    share = last.get("tagged_call_rate")
    measured = (
        "not measured for this run"
        if share is None
        else f"{pct(share)} of its calls at its last evaluation (step {last.get('step')})"
    )
    return [
        'It writes a tool call as a JSON object `{"name": ..., "arguments": {...}}`, in `<tool_call>` tags '
        f"(the Qwen2.5/Hermes form) in {measured}, the rest bare or in a code fence. `mcp-rl serve` turns "
        "every form into OpenAI `tool_calls`; llama.cpp's server (`--jinja`), vLLM's `hermes` parser and "
        "Ollama's Qwen templates turn only the tagged ones into `tool_calls` and return the others as text.",
    ]


def model_card(info: ExportInfo, out: Path) -> str:
    """README.md of an export."""
    library = {"peft": "peft", "merged": "transformers", "gguf": "gguf"}[info.format]
    what = {
        "peft": "a LoRA adapter (PEFT format)",
        "merged": f"a standalone transformers model (adapter merged, {info.dtype})",
        "gguf": f"a GGUF file ({info.gguf_type}) for llama.cpp and Ollama, with an Ollama Modelfile",
    }[info.format]
    system = system_message(info.prompt, info.template_has_tools)
    lines = [
        "---",
        f"base_model: {info.base_model}",
        f"library_name: {library}",
        "tags: [mcp-rl, mcp, tool-use, grpo, lora]",
        "---",
        "",
        f"# {info.name}",
        "",
        f"`{info.base_model}` trained with mcp-rl (GRPO on a LoRA) to use the tools of an MCP server. "
        f"This directory is {what}, made by `mcp-rl export` from "
        + (f"`{info.run_dir}`, checkpoint step {info.step}." if info.run_dir else "a checkpoint."),
        "",
        "## Base model",
        "",
        f"- `{info.base_model}`: {info.base_description}",
    ]
    if info.base_location:
        lines.append(f"- Local copy of the exact base weights it was trained on: `{info.base_location}`")
    if info.lora:
        lines.append(
            f"- LoRA: rank {info.lora.get('r')}, alpha {info.lora.get('lora_alpha')}, on "
            f"{', '.join(sorted(info.lora.get('target_modules') or []))}"
        )
    lines += [
        "- The adapter fits these weights, not an upstream checkpoint of the same name (a built-in model is "
        "a quantized GGUF dequantized to bf16).",
        "",
        "## Trained for",
        "",
        *_server_lines(info.config, info.prompt),
        "",
        *_tool_lines(info.prompt),
        "",
        "## The prompt it depends on",
        "",
        "Give it the same system message and the same tools (in the OpenAI `tools` form) as in training:",
        "",
        "```text",
        system,
        "```",
        "",
    ]
    if not info.template_has_tools:
        lines += [
            "Its chat template ignores `tools`, so training listed them in the system message (as above).",
            "",
        ]
    convention = info.prompt.get("answer_convention") or ""
    lines += [
        f"Answer convention: {convention}"
        if convention
        else "Answer convention: a reply without a tool call is the final answer.",
        "",
        *_call_form_lines(info.results),
        "",
        "## Results",
        "",
        *_result_rows(info.results, info.step),
        "",
        "Success: the share of held-out tasks answered correctly (reference check, else judge verdict), "
        "with a Wilson 95% interval; evaluation was greedy.",
        "",
        "## Serve it",
        "",
        "```sh",
        *serve_commands(info, out),
        "```",
        "",
        f"Made with mcp-rl {info.mcp_rl_version} on {info.created}.",
        "",
    ]
    return "\n".join(lines)
