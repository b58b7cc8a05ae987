"""`mcp-rl export`: each format reloads in its target loader and gives the in-training model's
next-token distributions (within the format's precision); the card and Modelfile carry the training
prompt and the serve commands; no secret reaches an export; bad inputs give one clear error.

The adapter is a real LoRA on a real built-in model (SmolLM2-135M, llama architecture; the qwen2
default in a slow test) with random B matrices, so the tuned model really differs from the base.
The reference is the in-training PEFT-wrapped model evaluated in float32 (its bf16 weights upcast
exactly), so a difference measures only what the format stores; for scale, the bf16 forward pass
training itself runs differs from that reference by a mean KL of about 1e-3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from conftest import REPO
from mcp_rl.cli import app
from mcp_rl.errors import McpRlError
from mcp_rl.policy_prompt import ANSWER_CONVENTION, system_prompt
from mcp_rl.rundir import RunDir, RunState
from mcp_rl.tuned import EXPORT_INFO, find_tuned

SMOL = "smollm2-135m-instruct"
SECRET = "sk-planted-export-secret-0123456789"
TOOLS = [
    {"type": "function", "function": {"name": "list_categories", "description": "List the product categories.",
                                      "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "get_item", "description": "Get one item by its SKU.",
                                      "parameters": {"type": "object", "properties": {"sku": {"type": "string"}},
                                                     "required": ["sku"]}}},
]  # fmt: skip
TASK = "How many product categories does the shop have?"

# Tolerances on the mean (over the prompt's positions) KL(reference || export), and why:
TOL_PEFT = 1e-6  # the same weights and the same arithmetic: equal up to float32 reduction order
TOL_MERGED = 2e-3  # merged weights rounded once to bf16 (the base's dtype): the bf16 forward's own noise
TOL_F16 = 1e-4  # f16 keeps 3 more mantissa bits than the bf16 base weights: far below bf16 noise
TOL_Q8 = 5e-3  # 8-bit blocks of 32 (measured 1e-3): about the bf16 forward's own noise
TOL_LLAMA_CPP_F16 = 1e-4  # llama.cpp's f16 kernels (measured 3e-6)
TOL_LLAMA_CPP_Q8 = (
    1.5e-2  # llama.cpp also rounds the activations to 8-bit blocks in q8_0 matmuls (measured 4.5e-3)
)
# Top-1 agreement over the prompt's positions: a few near-ties flip under 8-bit rounding.
TOP1_Q8 = 0.93


def _kl(ref: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    return (ref.exp() * (ref - other)).sum(-1)


def _compare(ref: torch.Tensor, got: torch.Tensor) -> dict[str, float]:
    kl = _kl(ref, got)
    return {
        "kl_mean": kl.mean().item(),
        "kl_max": kl.max().item(),
        "top1_agree": (ref.argmax(-1) == got.argmax(-1)).float().mean().item(),
        "last_top1_equal": float(ref[-1].argmax() == got[-1].argmax()),
        # how far below the reference's best next token the export's pick is (0 when they agree)
        "last_top1_gap": (ref[-1].max() - ref[-1][got[-1].argmax()]).item(),
    }


def _assert_close(
    name: str, ref: torch.Tensor, got: torch.Tensor, tol: float, base_kl: float, top1: float = 0.97
) -> dict:
    m = _compare(ref, got)
    print(f"{name}: {m}")
    assert m["kl_mean"] < tol, (name, m)
    # the next token of the prompt: the same, or (a near-tie) one the reference rates within 0.1 nats of its best
    assert m["last_top1_gap"] < 0.1, (name, m)
    assert m["top1_agree"] >= top1, (name, m)
    # not vacuous: the tolerance would reject the untuned base, and the format's error is far below the tuning
    assert base_kl > 5 * tol and base_kl > 20 * m["kl_mean"], (name, base_kl, m)
    return m


def _logprobs(model: Any, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)


def make_run(path: Path, model_name: str, b_std: float, *, secret_in_config: bool = True) -> dict[str, Any]:
    """A run directory with one real checkpoint of a random LoRA on `model_name`, and the reference
    next-token log-probs of that model (float32) and of its base on a chat prompt."""
    from mcp_rl.models import close_models, load_model

    model = load_model(model_name, fast=False)
    torch.manual_seed(0)  # LoRA A's initialisation: the same adapter on every run
    model.attach_lora(r=8, alpha=16)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * b_std)
    run = RunDir(path)
    env = {"SHOP_API_KEY": SECRET if secret_in_config else "***"}
    headers = {"Authorization": f"Bearer {SECRET}" if secret_in_config else "***"}
    run.create({
        "model": model_name,
        "server": {"name": "inventory", "transport": "stdio", "command": ["python", "-m", "examples.servers.inventory"],
                   "url": None, "env": env, "headers": headers},
        "rollout": {"max_turns": 4, "max_context_tokens": 4096},
    })  # fmt: skip
    system = system_prompt("inventory")
    run.write_json(
        run.prompt_file,
        {
            "system_prompt": system,
            "server_name": "inventory",
            "tools": TOOLS,
            "answer_convention": ANSWER_CONVENTION,
        },
    )
    run.save_checkpoint(1, model.save_adapter)
    run.append_metrics({"kind": "base_eval", "step": 0, "episodes": 8, "success": 0.25, "success_low": 0.07,
                        "success_high": 0.59, "success_n": 8, "valid_call_rate": 0.6, "tool_error_rate": 0.2, "tagged_call_rate": 0.0,
                        "answered_rate": 0.5, "mean_turns": 3.5})  # fmt: skip
    run.append_metrics({"kind": "eval", "step": 1, "episodes": 8, "success": 0.75, "success_low": 0.41,
                        "success_high": 0.93, "success_n": 8, "valid_call_rate": 0.95, "tool_error_rate": 0.05, "tagged_call_rate": 0.25,
                        "answered_rate": 1.0, "mean_turns": 2.25})  # fmt: skip
    run.write_json(run.best_file, {"step": 1})
    run.commit(RunState(completed_step=1, base_evaluated=True, best_step=1, best_success=0.75))
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": TASK}]
    text = model.render(msgs, TOOLS)
    ids = model.encode(text)
    model.model.float()  # the in-training model, evaluated without bf16 rounding of activations
    ref = _logprobs(model.model, ids)
    with model.adapter_disabled():
        base = _logprobs(model.model, ids)
    template = model.tokenizer.chat_template
    close_models(model)
    base_kl = _kl(ref, base).mean().item()
    print(
        f"{model_name}: tuned vs base mean KL {base_kl:.3g}, top-1 agreement {_compare(ref, base)['top1_agree']:.2f}"
    )
    return {
        "path": path, "ids": ids, "text": text, "ref": ref, "base_kl": base_kl, "system": system, "template": template,
    }  # fmt: skip


@pytest.fixture(scope="module")
def smol_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = make_run(tmp_path_factory.mktemp("export") / "shop-run", SMOL, b_std=0.08)
    assert run["base_kl"] > 0.03, (
        "the random adapter must really change the model, else every comparison is vacuous"
    )
    return run


def _export(
    run: Path, fmt: str, out: Path, *extra: str, monkeypatch: pytest.MonkeyPatch | None = None
) -> Path:
    if monkeypatch is not None:  # a secret in the exporting process's environment must not leak either
        monkeypatch.setenv("SHOP_API_KEY", SECRET)
    result = CliRunner().invoke(app, ["export", str(run), "--format", fmt, "-o", str(out), *extra])
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    assert f"as {fmt} to" in " ".join(result.output.split())
    return out


def _check_card_and_secrets(out: Path, fmt: str, system: str) -> dict[str, Any]:
    info = json.loads((out / EXPORT_INFO).read_text())
    card = (out / "README.md").read_text()
    assert info["format"] == fmt and info["base_model"] == SMOL and info["step"] == 1
    assert info["prompt"]["system_prompt"] == system
    assert info["config"]["server"]["env"] == {"SHOP_API_KEY": "***"}
    assert system in card and ANSWER_CONVENTION in card
    assert "list_categories" in card and "get_item" in card
    assert "| checked success [95% interval] | 25% [7%, 59%] (n=8) | 75% [41%, 93%] (n=8) |" in card
    assert f"mcp-rl serve {out}" in card
    # what other runtimes will parse, from the run's own figure, not a promise
    assert "| calls in `<tool_call>` tags | 0% | 25% |" in card
    assert "in 25% of its calls at its last evaluation (step 1)" in " ".join(card.split())
    if fmt == "peft":
        assert f"--enable-lora --lora-modules shop-run-step1={out}" in card
    if fmt == "gguf":
        modelfile = (out / "Modelfile").read_text()
        assert f"FROM ./{info['file']}" in modelfile
        assert system in modelfile and "get_item" in modelfile  # SmolLM2's template ignores tools: inlined
        assert "PARAMETER temperature 0" in modelfile and 'PARAMETER stop "<|im_end|>"' in modelfile
        assert f"ollama create shop-run-step1 -f {out}/Modelfile" in card and "llama-server -m" in card
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f"the planted secret leaked into {f}"
    return info


@pytest.mark.models
def test_peft_export_reloads_with_peft(smol_run, tmp_path, monkeypatch):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out = _export(smol_run["path"], "peft", tmp_path / "peft", monkeypatch=monkeypatch)
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "adapter_config.json",
        "adapter_model.safetensors",
        EXPORT_INFO,
    ]  # fmt: skip  (no optimizer state, no PEFT placeholder card)
    _check_card_and_secrets(out, "peft", smol_run["system"])
    cfg = json.loads((out / "adapter_config.json").read_text())
    # what vLLM's LoRA loader refuses: a bias, DoRA, modules_to_save, a rank above --max-lora-rank
    assert cfg["bias"] == "none" and not cfg["use_dora"] and not cfg["modules_to_save"]
    assert f"--max-lora-rank {max(8, cfg['r'])}" in (out / "README.md").read_text()
    base_dir = Path(cfg["base_model_name_or_path"])
    assert (base_dir / "config.json").is_file(), "base_model_name_or_path must be a loadable local directory"
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    tuned = PeftModel.from_pretrained(base, str(out))
    _assert_close("peft", smol_run["ref"], _logprobs(tuned, smol_run["ids"]), TOL_PEFT, smol_run["base_kl"])
    # what serve and chat read: an adapter on the recorded base
    src = find_tuned(out)
    assert (
        src.adapter_dir == out
        and src.base_model == SMOL
        and src.prompt["system_prompt"] == smol_run["system"]
    )


@pytest.mark.models
def test_merged_export_loads_with_transformers_and_mcp_rl(smol_run, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mcp_rl.models import close_models, load_model

    out = _export(smol_run["path"], "merged", tmp_path / "merged", monkeypatch=monkeypatch)
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", EXPORT_INFO} <= {
        p.name for p in out.iterdir()
    }
    info = _check_card_and_secrets(out, "merged", smol_run["system"])
    assert info["dtype"] == "bfloat16"
    tok = AutoTokenizer.from_pretrained(str(out))
    assert tok.chat_template == smol_run["template"], "the chat template training used travels with the model"
    model = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    assert not any("lora" in n for n, _ in model.named_parameters())
    _assert_close(
        "merged", smol_run["ref"], _logprobs(model, smol_run["ids"]), TOL_MERGED, smol_run["base_kl"]
    )
    # mcp-rl's own loader, through what serve and chat use
    src = find_tuned(out)
    assert src.model_dir == out and src.adapter_dir is None
    tm = load_model(str(out), dtype=torch.float32, fast=False)
    try:
        text = tm.render(
            [{"role": "system", "content": smol_run["system"]}, {"role": "user", "content": TASK}], TOOLS
        )
        assert tm.encode(text) == smol_run["ids"]
        _assert_close("merged via load_model", smol_run["ref"], _logprobs(tm.model, smol_run["ids"]), TOL_MERGED,
                      smol_run["base_kl"])  # fmt: skip
    finally:
        close_models(tm)


def _gguf_checks(out: Path, run: dict[str, Any], arch: str) -> Path:
    from gguf import GGUFReader

    info = json.loads((out / EXPORT_INFO).read_text())
    path = out / info["file"]
    reader = GGUFReader(path)
    assert reader.fields["general.architecture"].contents() == arch
    assert reader.fields["tokenizer.chat_template"].contents() == run["template"]
    assert find_tuned(out).model_dir == path  # serve and chat load the file itself
    return path


@pytest.fixture(scope="module")
def smol_gguf(smol_run, tmp_path_factory) -> Path:
    """The f16 GGUF export, made once for the transformers and the llama.cpp checks."""
    mp = pytest.MonkeyPatch()
    try:
        return _export(smol_run["path"], "gguf", tmp_path_factory.mktemp("gguf") / "gguf", monkeypatch=mp)
    finally:
        mp.undo()


@pytest.mark.models
def test_gguf_export_loads_with_transformers(smol_run, smol_gguf):
    from transformers import AutoModelForCausalLM

    _check_card_and_secrets(smol_gguf, "gguf", smol_run["system"])
    path = _gguf_checks(smol_gguf, smol_run, "llama")
    # transformers dequantizes GGUF weights to float32 and un-permutes llama's q/k rows: a wrong
    # permutation here would wreck attention and the distributions.
    model = AutoModelForCausalLM.from_pretrained(str(smol_gguf), gguf_file=path.name, dtype=torch.float32)
    _assert_close("gguf f16 (transformers)", smol_run["ref"], _logprobs(model, smol_run["ids"]), TOL_F16,
                  smol_run["base_kl"])  # fmt: skip


@pytest.mark.models
@pytest.mark.slow
def test_gguf_q8_0_export_loads_with_transformers(smol_run, tmp_path):
    from transformers import AutoModelForCausalLM

    out = _export(smol_run["path"], "gguf", tmp_path / "gguf8", "--gguf-type", "q8_0")
    path = _gguf_checks(out, smol_run, "llama")
    model = AutoModelForCausalLM.from_pretrained(str(out), gguf_file=path.name, dtype=torch.float32)
    _assert_close("gguf q8_0 (transformers)", smol_run["ref"], _logprobs(model, smol_run["ids"]), TOL_Q8,
                  smol_run["base_kl"], TOP1_Q8)  # fmt: skip


def _llama_cpp() -> Any:
    """llama.cpp's Python bindings. `scripts/test.sh` installs them and sets MCP_RL_REQUIRE_LLAMA_CPP=1,
    so in CI a missing build fails the test instead of skipping it."""
    if os.environ.get("MCP_RL_REQUIRE_LLAMA_CPP") == "1":
        import llama_cpp

        return llama_cpp
    return pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")


def _llama_cpp_logprobs(path: Path, ids: list[int], text: str) -> torch.Tensor:
    llama_cpp = _llama_cpp()
    llm = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=max(1024, len(ids) + 64),
        logits_all=True,
        n_threads=2,
        verbose=False,
        n_gpu_layers=0,
    )
    try:
        # the GGUF's own tokenizer (copied from the original file) must give the training token ids
        assert llm.tokenize(text.encode(), add_bos=False, special=True) == ids
        llm.eval(ids)
        scores = torch.tensor(llm.scores[: len(ids)], dtype=torch.float32)
    finally:
        llm.close()
    return torch.log_softmax(scores, -1)


@pytest.mark.models
@pytest.mark.gguf
@pytest.mark.parametrize("gguf_type", ["f16", "q8_0"])
def test_gguf_export_runs_in_llama_cpp(smol_run, smol_gguf, tmp_path, gguf_type):
    _llama_cpp()
    out = smol_gguf
    if gguf_type != "f16":
        out = _export(smol_run["path"], "gguf", tmp_path / f"gguf-{gguf_type}", "--gguf-type", gguf_type)
    path = _gguf_checks(out, smol_run, "llama")
    got = _llama_cpp_logprobs(path, smol_run["ids"], smol_run["text"])
    q8 = gguf_type == "q8_0"
    tol, top1 = (TOL_LLAMA_CPP_Q8, TOP1_Q8) if q8 else (TOL_LLAMA_CPP_F16, 0.97)
    _assert_close(f"gguf {gguf_type} (llama.cpp)", smol_run["ref"], got, tol, smol_run["base_kl"], top1)


@pytest.mark.models
@pytest.mark.slow
def test_qwen2_default_model_gguf_export(tmp_path):
    """The 0.5B default policy: qwen2 architecture (attention biases, no q/k permutation, untied head)."""
    from transformers import AutoModelForCausalLM

    run = make_run(tmp_path / "qwen-run", "qwen2.5-coder-0.5b-instruct", b_std=0.015, secret_in_config=False)
    assert run["base_kl"] > 0.03
    out = _export(run["path"], "gguf", tmp_path / "gguf")
    path = _gguf_checks(out, run, "qwen2")
    model = AutoModelForCausalLM.from_pretrained(str(out), gguf_file=path.name, dtype=torch.float32)
    _assert_close(
        "qwen2 gguf f16 (transformers)", run["ref"], _logprobs(model, run["ids"]), TOL_F16, run["base_kl"]
    )
    del model
    got = _llama_cpp_logprobs(path, run["ids"], run["text"])
    _assert_close("qwen2 gguf f16 (llama.cpp)", run["ref"], got, TOL_LLAMA_CPP_F16, run["base_kl"])


# ---- bad input ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with a real (tiny random model) checkpoint: enough for every check before loading."""
    from mcp_rl.models import close_models, load_model

    path = tmp_path_factory.mktemp("bad") / "tiny-run"
    model = load_model("tiny")
    model.attach_lora(r=4, alpha=8)
    run = RunDir(path)
    run.create(
        {"model": "tiny", "server": {"name": "inventory", "transport": "stdio", "env": {}, "headers": {}}}
    )
    run.save_checkpoint(1, model.save_adapter)
    run.commit(RunState(completed_step=1, base_evaluated=True, best_step=1))
    close_models(model)
    return path


def _variant(tiny_run: Path, where: Path, model: str) -> Path:
    """A copy of the tiny run whose config names another base model."""
    import shutil

    shutil.copytree(tiny_run, where)
    cfg = json.loads((where / "config.json").read_text())
    (where / "config.json").write_text(json.dumps({**cfg, "model": model}))
    return where


def _unsupported_gguf(path: Path) -> Path:
    from gguf import GGUFWriter

    w = GGUFWriter(path, "gpt2")
    w.add_block_count(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no_checkpoint", "has no checkpoint yet"),
        ("unknown_step", "has no checkpoint for step 7"),
        ("unknown_checkpoint_word", "unknown checkpoint 'newest'"),
        ("output_not_empty", "exists and is not empty"),
        ("output_unwritable", "cannot write the output directory"),
        ("base_not_offline", "is not available offline"),
        ("base_dir_missing", "does not exist here"),
        ("gguf_no_origin", "did not come from a GGUF file"),
        ("gguf_unsupported_arch", "the base model is 'gpt2'"),
        ("bad_format", "unknown export format 'onnx'"),
        ("not_a_run", "neither a training run nor an mcp-rl export"),
        ("output_is_the_run", "which this export reads"),
        ("uncommitted_step", "step 2 of"),
        ("base_was_best", "beat the base model"),
        ("corrupt_export_info", "cannot be read"),
    ],
)
def test_bad_input_is_one_clear_message(tiny_run, tmp_path, monkeypatch, capsys, case, message):
    """Through the CLI's entry point (`mcp_rl.cli.main`, as the console script runs it), in-process
    to keep the suite fast; the process exit code is checked once in a subprocess below."""
    from mcp_rl.cli import main

    run, fmt, extra = tiny_run, "peft", []
    out = tmp_path / "out"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("COLUMNS", "200")
    if case == "no_checkpoint":
        run = tmp_path / "empty-run"
        RunDir(run).create({"model": "tiny"})
    elif case == "unknown_step":
        extra = ["--checkpoint", "7"]
    elif case == "unknown_checkpoint_word":
        extra = ["--checkpoint", "newest"]
    elif case == "output_not_empty":
        out.mkdir()
        (out / "keep.txt").write_text("mine")
    elif case == "output_unwritable":
        (tmp_path / "a-file").write_text("x")
        out = tmp_path / "a-file" / "out"
    elif case == "base_not_offline":
        run = _variant(tiny_run, tmp_path / "hub-run", "someorg/no-such-model-in-cache")
    elif case == "base_dir_missing":
        run = _variant(tiny_run, tmp_path / "dir-run", str(tmp_path / "gone-model"))
    elif case == "gguf_no_origin":
        fmt = "gguf"
    elif case == "gguf_unsupported_arch":
        run = _variant(tiny_run, tmp_path / "gpt2-run", str(_unsupported_gguf(tmp_path / "gpt2.gguf")))
        fmt = "gguf"
    elif case == "bad_format":
        fmt = "onnx"
    elif case == "not_a_run":
        run = tmp_path
    elif case == "output_is_the_run":  # with --force this would have replaced the run itself
        run = _variant(tiny_run, tmp_path / "mine", "tiny")
        out, extra = tmp_path, ["--force"]
    elif case == "uncommitted_step":  # killed after saving step 2's checkpoint, before committing it
        run = _with_uncommitted_step(tiny_run, tmp_path / "killed-run")
        extra = ["--checkpoint", "2"]
    elif case == "base_was_best":
        run = _variant(tiny_run, tmp_path / "lost-run", "tiny")
        RunDir(run).commit(RunState(completed_step=1, base_evaluated=True, best_step=0))
    elif case == "corrupt_export_info":
        run = _export(tiny_run, "peft", tmp_path / "damaged-export")
        (run / EXPORT_INFO).write_text('{"base_model": "tiny", ')
    monkeypatch.setattr(sys, "argv", ["mcp-rl", "export", str(run), "--format", fmt, "-o", str(out), *extra])
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert message in " ".join(err.split()), err
    assert "hint:" in err and "Traceback" not in err
    if case == "output_not_empty":
        assert (out / "keep.txt").read_text() == "mine", "a refused export must not touch the directory"
    elif case == "output_is_the_run":
        assert (run / "checkpoints" / "000001" / "adapter_config.json").is_file()
    else:
        assert not out.exists() or not any(out.iterdir()), "a failed export leaves nothing behind"
    assert not list(out.parent.glob(f".{out.name}.tmp-*")), "no staging directory left behind"


def _with_uncommitted_step(tiny_run: Path, where: Path) -> Path:
    import shutil

    shutil.copytree(tiny_run, where)
    shutil.copytree(where / "checkpoints" / "000001", where / "checkpoints" / "000002")
    return where


def test_last_and_best_never_take_an_uncommitted_checkpoint(tiny_run, tmp_path):
    run = _with_uncommitted_step(tiny_run, tmp_path / "killed-run")
    for which in ("last", "best"):
        out = _export(run, "peft", tmp_path / which, "--checkpoint", which)
        assert json.loads((out / EXPORT_INFO).read_text())["step"] == 1
    with pytest.raises(McpRlError, match="never committed"):
        find_tuned(run / "checkpoints" / "000002")


def test_bad_input_exit_code_of_the_real_process(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "mcp_rl", "export", str(tmp_path / "no-run"), "--format", "peft", "-o", str(tmp_path / "o")],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "does not exist" in r.stderr and "hint:" in r.stderr and "Traceback" not in r.stderr


def test_force_replaces_a_previous_export(tiny_run, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("previous export")
    _export(tiny_run, "peft", out, "--force")
    assert not (out / "old.txt").exists()
    assert (out / "adapter_model.safetensors").is_file() and (out / EXPORT_INFO).is_file()
    # a PEFT export is itself a valid source: re-export it (e.g. to another directory)
    again = _export(out, "peft", tmp_path / "again")
    assert json.loads((again / EXPORT_INFO).read_text())["base_model"] == "tiny"


def test_an_export_is_readable_by_other_users(tiny_run, tmp_path):
    # the staging directory is made private; a model server running as its own user (Ollama's
    # service) must still be able to read the export
    old = os.umask(0o022)
    try:
        out = _export(tiny_run, "peft", tmp_path / "shared")
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o755


def test_a_merged_export_is_readable_by_other_users_like_the_gguf(tiny_run, tmp_path):
    # safetensors writes model.safetensors 0600; a service running as its own user could not read it
    old = os.umask(0o022)
    try:
        out = _export(tiny_run, "merged", tmp_path / "merged")
    finally:
        os.umask(old)
    modes = {f.name: f.stat().st_mode & 0o777 for f in out.iterdir()}
    assert modes["model.safetensors"] == 0o644 and set(modes.values()) == {0o644}, modes


def test_full_disk_during_an_export_is_one_clear_message_and_leaves_nothing(tiny_run, tmp_path):
    # RLIMIT_FSIZE (no root needed) with SIGXFSZ ignored: writes fail with EFBIG as on a full disk.
    import resource
    import signal

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))

    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "mcp_rl", "export", str(tiny_run), "--format", "peft", "-o", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, preexec_fn=limit,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no room left on the disk while writing" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists() and not list(tmp_path.glob(".out.*")), "nothing half-written is left"
