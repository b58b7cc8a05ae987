"""A disk cache of judge answers keyed by their content, so a resumed run does not pay twice.

The key is a hash of everything that decides the answer: the prompt version, the judge's name and
sampling settings, and the exact messages sent (which hold the rubric, the task, the reference, the
trajectories and their order). One small JSON file per entry, written atomically; a corrupt or
unreadable entry is treated as a miss, never as an error.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def cache_key(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JudgeCache:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.misses += 1
            return None
        if not isinstance(value, dict) or value.get("key") != key:
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**value, "key": key}, ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(path)
