"""The merged model as one GGUF file that llama.cpp and Ollama load.

The built-in models came from GGUF files (FIELD_NOTES §2), so the cleanest conversion needs no
converter of our own for the metadata: everything the original file says about the architecture,
its hyper-parameters and its tokenizer is copied verbatim; only the weights are new (the merged
ones, under the GGUF tensor names, in f16 or q8_0) and the chat template is the one training used
(a built-in's template fixes included). The original file also fixes the tensor set and shapes,
which every written tensor is checked against.

Tensor layout: GGUF stores `llama` attention q/k rows permuted for llama.cpp's rotary embedding
(interleaved pairs) where transformers uses rotate-half; transformers' GGUF loader undoes exactly
this permutation, so it is applied here to q and k (k with the key/value head count). `qwen2` has
no such permutation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcp_rl.errors import ModelError
from mcp_rl.export.base import BaseInfo
from mcp_rl.models.builtin import BUILTIN_MODELS, join_and_verify

SUPPORTED_ARCHS = ("llama", "qwen2")
GGUF_TYPES = ("f16", "q8_0")
_PERMUTED = {"llama"}  # architectures whose q/k rows GGUF stores in llama.cpp's rotary order
_COPY_THROUGH = {"rope_freqs.weight"}  # tensors that exist only in GGUF (no transformers parameter)
_SKIP_KEYS = {
    "general.architecture",  # written by GGUFWriter itself
    "general.file_type",
    "general.quantization_version",
    "general.name",
}
_HINT_CONVERT = (
    "export --format merged instead, then convert that directory with llama.cpp's converter "
    "(convert_hf_to_gguf.py DIR --outtype f16)"
)


@dataclass(frozen=True)
class GgufOrigin:
    path: Path
    architecture: str
    temporary: bool
    """True when the file was joined from a built-in's package parts (delete after use)."""
    reader: Any
    """A GGUFReader of it (reading the metadata of a 150k-token vocabulary takes seconds: once)."""


def gguf_origin(base: BaseInfo, workdir: Path) -> GgufOrigin:
    """The GGUF file the base model came from (a built-in's parts are joined and verified into
    `workdir`); ModelError unless it exists and has a supported architecture."""
    from gguf import GGUFReader

    if base.kind == "builtin":
        path, temporary = join_and_verify(BUILTIN_MODELS[base.name], workdir / "original.gguf"), True
    elif base.kind == "gguf":
        path, temporary = Path(base.name).expanduser(), False
    else:
        raise ModelError(
            f"cannot write GGUF for base model {base.name!r}: it did not come from a GGUF file, so there "
            "is no tokenizer and architecture metadata to carry over",
            hint=_HINT_CONVERT,
        )
    try:
        reader = GGUFReader(path)
        arch = str(reader.fields["general.architecture"].contents())
    except Exception as exc:
        raise ModelError(f"cannot read the base model's GGUF file {path}: {exc}") from None
    if arch not in SUPPORTED_ARCHS:
        if temporary:
            path.unlink(missing_ok=True)
        raise ModelError(
            f"GGUF export supports the architectures {', '.join(SUPPORTED_ARCHS)}; the base model is {arch!r}",
            hint=_HINT_CONVERT,
        )
    return GgufOrigin(path, arch, temporary, reader)


def _permute_rotary(w: np.ndarray, n_head: int) -> np.ndarray:
    """transformers (rotate-half) row order -> llama.cpp (interleaved pairs), per head."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _name_map(arch: str, n_layers: int) -> Any:
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map

    enum = next(k for k, v in MODEL_ARCH_NAMES.items() if v == arch)
    return get_tensor_name_map(enum, n_layers)


def gguf_tensors(state: dict[str, Any], config: Any, arch: str) -> dict[str, np.ndarray]:
    """The model's float32 weights under GGUF names, q/k permuted where the architecture wants it.
    Tied weights (lm_head = embeddings) appear under both names; the caller keeps what the original has."""
    names = _name_map(arch, config.num_hidden_layers)
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    out: dict[str, np.ndarray] = {}
    for hf_name, tensor in state.items():
        stem, _, suffix = hf_name.rpartition(".")
        gguf = names.get_name(stem)
        if gguf is None:
            raise ModelError(f"no GGUF name for the {arch} parameter {hf_name}", hint=_HINT_CONVERT)
        data = tensor.detach().float().cpu().numpy()
        if arch in _PERMUTED and gguf.endswith(".attn_q"):
            data = _permute_rotary(data, heads)
        elif arch in _PERMUTED and gguf.endswith(".attn_k"):
            data = _permute_rotary(data, kv_heads)
        out[f"{gguf}.{suffix}"] = data
    return out


def _copy_metadata(reader: Any, writer: Any, skip: set[str]) -> None:
    from gguf import GGUFValueType

    for key, field in reader.fields.items():
        if key.startswith(("GGUF.", "split.", "quantize.")) or key in skip:
            continue
        types = list(field.types)
        if types[0] == GGUFValueType.ARRAY:
            if len(types) != 2:  # nested arrays: none in the supported architectures
                raise ModelError(f"cannot copy the nested GGUF metadata array {key}")
            writer.add_key_value(key, field.contents(), GGUFValueType.ARRAY, sub_type=types[1])
        else:
            writer.add_key_value(key, field.contents(), types[0])


def write_gguf(
    tensors: dict[str, np.ndarray],
    origin: GgufOrigin,
    out_file: Path,
    tensor_type: str,
    chat_template: str | None,
    name: str,
) -> dict[str, int]:
    """Write `out_file`; returns the count of tensors per GGML type."""
    from gguf import GGMLQuantizationType, GGUFWriter, LlamaFileType
    from gguf.constants import GGML_QUANT_VERSION
    from gguf.quants import quantize

    if tensor_type not in GGUF_TYPES:
        raise ModelError(f"unknown GGUF type {tensor_type!r}", hint=f"use one of {', '.join(GGUF_TYPES)}")
    reader = origin.reader
    originals = {t.name: t for t in reader.tensors}
    missing = [n for n in originals if n not in tensors and n not in _COPY_THROUGH]
    if missing:
        raise ModelError(f"the merged model lacks GGUF tensors of the original: {', '.join(missing[:5])}")
    extra = [n for n in tensors if n not in originals]
    for n in extra:  # only a tied output head may be absent from the original
        if not (n == "output.weight" and np.array_equal(tensors[n], tensors.get("token_embd.weight"))):
            raise ModelError(
                f"the merged model has a tensor the original GGUF lacks: {n}", hint=_HINT_CONVERT
            )

    # No temp file: the tensors are in memory already, and a spool file would go to /tmp, not to the
    # output's disk (a full /tmp would fail an export that had room).
    writer = GGUFWriter(out_file, origin.architecture, use_temp_file=False)
    # the chat template training used replaces the original's (a built-in's template fixes included)
    _copy_metadata(reader, writer, _SKIP_KEYS | ({"tokenizer.chat_template"} if chat_template else set()))
    writer.add_name(name)
    writer.add_file_type(LlamaFileType.MOSTLY_F16 if tensor_type == "f16" else LlamaFileType.MOSTLY_Q8_0)
    writer.add_quantization_version(GGML_QUANT_VERSION)
    if chat_template:
        writer.add_chat_template(chat_template)
    counts: dict[str, int] = {}
    for gname, original in originals.items():  # the original's order and set
        if gname not in tensors:  # copy-through (e.g. precomputed rope factors)
            writer.add_tensor(gname, np.asarray(original.data), raw_dtype=original.tensor_type)
            counts[original.tensor_type.name] = counts.get(original.tensor_type.name, 0) + 1
            continue
        data = tensors[gname]
        if list(reversed(data.shape)) != [int(d) for d in original.shape]:
            raise ModelError(
                f"tensor {gname}: shape {list(data.shape)} does not match the original GGUF's "
                f"{list(reversed([int(d) for d in original.shape]))}"
            )
        if data.ndim == 1:  # norms and biases stay float32, as llama.cpp expects
            writer.add_tensor(gname, data.astype(np.float32))
            kind = "F32"
        elif tensor_type == "q8_0" and data.shape[-1] % 32 == 0:
            writer.add_tensor(
                gname, quantize(data, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0
            )
            kind = "Q8_0"
        else:
            writer.add_tensor(gname, data.astype(np.float16))
            kind = "F16"
        counts[kind] = counts.get(kind, 0) + 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return counts
