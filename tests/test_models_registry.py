"""`--model` resolution: each accepted form, and a clear error for everything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_rl.errors import ModelError
from mcp_rl.models import load_model
from mcp_rl.models.api_backend import ApiModel
from mcp_rl.models.hardware import best_dtype, configure_threads, cpu_has_fast_bf16, physical_cores
from mcp_rl.models.hf_backend import TransformersModel


def test_tiny_names() -> None:
    for name in ("tiny", "tiny-random"):
        model = load_model(name)
        assert isinstance(model, TransformersModel) and model.name == "tiny-random"


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(ModelError) as err:
        load_model("qwen2.5-coder-0.5b-instruc")
    assert "did you mean 'qwen2.5-coder-0.5b-instruct'" in str(err.value)


def test_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        load_model(str(tmp_path / "nope.gguf"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match=r"no config\.json"):
        load_model(str(tmp_path / "empty"))


def test_hub_id_offline_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty hub cache
    with pytest.raises(ModelError) as err:
        load_model("SomeOrg/some-model-that-is-not-cached")
    assert "offline" in str(err.value) and "qwen2.5-coder-0.5b-instruct" in str(err.value)


def test_api_forms() -> None:
    a = load_model("openai:gpt-x", base_url="http://127.0.0.1:9/v1")
    b = load_model("my-served-model", base_url="http://localhost:9/v1")
    c = load_model("anthropic/claude-x", api_key="k")
    assert isinstance(a, ApiModel) and a.provider == "openai" and a.model == "gpt-x"
    assert isinstance(b, ApiModel) and b.model == "my-served-model"
    assert isinstance(c, ApiModel) and c.provider == "litellm"


def test_hardware_choices() -> None:
    import torch

    assert physical_cores() >= 1
    assert configure_threads(1) == 1 and torch.get_num_threads() == 1
    configure_threads()
    assert torch.get_num_threads() == physical_cores()
    assert best_dtype("cpu") == (torch.bfloat16 if cpu_has_fast_bf16() else torch.float32)
