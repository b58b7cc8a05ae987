"""A deterministic train/val split: the same tasks and seed always give the same split, in any order.

Each task's place is a hash of (seed, task id), so adding a task never moves the others; grounded
and written tasks are split separately so the val split holds both kinds.
"""

from __future__ import annotations

import hashlib
import math

from scenario_gen.task import Task


def _rank(seed: int, task_id: str) -> str:
    return hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()


def split_tasks(tasks: list[Task], val_fraction: float = 0.2, seed: int = 0) -> list[Task]:
    """Copies of `tasks` (same order) with `split` set. At least one val task per source when a
    source has two or more tasks and val_fraction > 0."""
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError("val_fraction must be in [0, 1)")
    out = [t.model_copy(update={"split": "train"}) for t in tasks]
    for source in ("grounded", "written"):
        group = [i for i, t in enumerate(out) if t.source == source]
        if not group or val_fraction == 0:
            continue
        k = round(len(group) * val_fraction)
        if k == 0 and len(group) >= 2:
            k = 1
        k = min(k, math.floor(len(group) * 0.5)) if len(group) > 1 else 0
        for i in sorted(group, key=lambda i: _rank(seed, out[i].id))[:k]:
            out[i].split = "val"
    return out
