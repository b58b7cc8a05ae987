"""Issue #7's done criterion end to end: an adapter that a real `mcp-rl train` run produced (the default
0.5B policy, the example server over stdio, checks-only reward, 2 GRPO steps; SmolLM2-135M never calls
a tool, so its groups carry no reward variance and GRPO would not move it) exported in all three formats, each
reloaded in its target loader and compared with the in-training model on a prompt of that run.

`tests/test_export.py` checks each format's fidelity on a deliberately large random adapter; this test
checks the whole path from a trained checkpoint, so the adapter is whatever GRPO made of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import INVENTORY, REPO
from mcp_rl.task import Task
from scenario_gen.io import save_tasks
from tests.test_export import (
    TOL_LLAMA_CPP_F16,
    TOL_MERGED,
    TOL_PEFT,
    _assert_close,
    _compare,
    _export,
    _kl,
    _llama_cpp_logprobs,
    _logprobs,
)

POLICY = "qwen2.5-coder-0.5b-instruct"
pytestmark = [pytest.mark.models, pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("trained")
    tasks = [
        Task(id="t1", text="How many product categories does the shop have?", source="grounded",
             reference_answer="6", tools_expected=["list_categories"], split="train"),
        Task(id="t2", text="What is the price of the Camp Kettle 1L?", source="grounded",
             reference_answer="29.99", tools_expected=["search_items"], split="train"),
        Task(id="v1", text="How many categories are there?", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="val"),
        Task(id="x1", text="Count the shop's product categories.", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="test"),
    ]  # fmt: skip
    save_tasks(tasks, tmp / "tasks.jsonl")
    run = tmp / "run"
    r = subprocess.run(
        [sys.executable, "-m", "mcp_rl", "train", "--server", INVENTORY, "--model", POLICY, "--tasks",
         str(tmp / "tasks.jsonl"), "--judge", "none", "--max-steps", "2", "--eval-every", "2",
         "--group-size", "4", "--tasks-per-step", "2", "--max-new-tokens", "48", "--max-turns", "2",
         "--learning-rate", "3e-3", "--run-dir", str(run)],
        cwd=REPO, capture_output=True, text=True, timeout=1100,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    steps = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert sum(m.get("trajectories_trained", 0) for m in steps if m["kind"] == "step") > 0, (
        "no group had reward variance: GRPO never updated the adapter"
    )
    return run


def test_a_trained_adapter_reloads_in_every_format(trained: Path, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from mcp_rl.models import close_models, load_model
    from mcp_rl.models.hardware import release_memory
    from mcp_rl.trajectory import load_trajectories
    from mcp_rl.tuned import find_tuned

    # "last": on one val task, 2 steps rarely beat the base, and "best" would then refuse (by design)
    source = find_tuned(trained, "last")
    assert source.step == 2
    # A prompt of the run itself: the opening of a training episode, with the training template.
    traj = load_trajectories(trained / "steps" / "000002.parquet")[0]
    ids = traj.token_ids[: traj.sampled_mask.index(1)]

    model = load_model(POLICY, fast=False)
    model.load_adapter(source.adapter_dir)
    text = model.decode(ids)
    model.model.float()  # the in-training model, without bf16 rounding of the activations
    ref = _logprobs(model.model, ids)
    with model.adapter_disabled():
        base = _logprobs(model.model, ids)
    close_models(model)
    del model
    release_memory()
    base_kl = _kl(ref, base).mean().item()
    print(f"trained step {source.step}: tuned vs base mean KL {base_kl:.3g}, {_compare(ref, base)}")
    assert base_kl > 5 * TOL_LLAMA_CPP_F16, "training must have moved the model beyond the formats' noise"

    peft_dir = _export(trained, "peft", tmp_path / "peft", "--checkpoint", "last")
    cfg = json.loads((peft_dir / "adapter_config.json").read_text())
    tuned = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(cfg["base_model_name_or_path"], dtype=torch.float32),
        str(peft_dir),
    )
    _assert_close("trained peft", ref, _logprobs(tuned, ids), TOL_PEFT, base_kl)
    del tuned  # one fp32 model at a time: kept, they took this process to 16.8 GB
    release_memory()

    merged_dir = _export(trained, "merged", tmp_path / "merged", "--checkpoint", "last")
    merged = AutoModelForCausalLM.from_pretrained(str(merged_dir), dtype=torch.float32)
    _assert_close("trained merged", ref, _logprobs(merged, ids), TOL_MERGED, base_kl)
    del merged
    release_memory()

    gguf_dir = _export(trained, "gguf", tmp_path / "gguf", "--checkpoint", "last")
    info = json.loads((gguf_dir / "mcp-rl-export.json").read_text())
    got = _llama_cpp_logprobs(gguf_dir / info["file"], ids, text)
    _assert_close("trained gguf f16 (llama.cpp)", ref, got, TOL_LLAMA_CPP_F16, base_kl)
    assert (gguf_dir / "Modelfile").is_file()
