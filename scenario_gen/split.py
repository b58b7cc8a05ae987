"""A deterministic train / val / test split in which no two splits share a reference call or an entity.

Tasks that share an identifying key (a reference call, an id or a name: `scenario_gen.split_keys`) form
one component, and a component goes to one split whole; otherwise what the policy learns on "the price
of ITM-017" is measured on "the stock of ITM-017". Components are placed in the order of a hash of
(seed, their task ids), so the same tasks and seed give the same split in any order.

Grounded tasks are graded deterministically (checked success, the reported figure), so they are placed
first and test picks before val: the held-out splits fill their share of the set with grounded tasks
first, as far as train keeps `TRAIN_GROUNDED_FLOOR` of them to learn from (the rest divided between
test and val in proportion to their fractions), then with the other components. A component too large
for the room left in val and test goes to train.
"""

from __future__ import annotations

import hashlib
import math
from typing import Literal

from pydantic import BaseModel, Field

from mcp_rl.task import Task
from scenario_gen.split_keys import MAX_KEY_SHARE, find_groups

Split = Literal["train", "val", "test"]
SPLITS: tuple[Split, ...] = ("train", "val", "test")
_HELD_OUT: tuple[Split, ...] = ("test", "val")
"""In the order they pick: test first, it is the figure reported."""


class SplitReport(BaseModel):
    """What a split did: the counts per split, the components, the keys left out, any leak."""

    counts: dict[str, dict[str, int]] = Field(default_factory=dict)
    """split -> {"grounded": n, "written": n}"""
    components: int = 0
    largest_component: int = 0
    ignored_keys: dict[str, int] = Field(default_factory=dict)
    """Keys too widely shared to identify anything -> how many tasks hold each."""
    leaks: list[str] = Field(default_factory=list)
    """Identifying keys held by tasks in more than one split (none after `split_tasks`)."""

    def total(self, split: str) -> int:
        return sum(self.counts.get(split, {}).values())

    def summary(self) -> str:
        parts = [
            f"{s} {self.total(s)} ({self.counts.get(s, {}).get('grounded', 0)} grounded)" for s in SPLITS
        ]
        return " / ".join(parts)


def _kind(task: Task) -> str:
    return "grounded" if task.grounded else "written"


def _rank(seed: int, ids: list[str]) -> str:
    return hashlib.sha256(f"{seed}:{chr(10).join(sorted(ids))}".encode()).hexdigest()


def _share(n: int, fraction: float) -> int:
    return math.floor(n * fraction + 0.5)  # half rounds up, unlike round()


TRAIN_GROUNDED_FLOOR = 0.4
"""The share of grounded tasks train keeps: they give training its clean (checked) reward."""


def _grounded_needs(n_grounded: int, n_total: int, fractions: dict[Split, float]) -> dict[Split, int]:
    """Grounded tasks each held-out split should get: up to its whole share of the set, from the
    grounded tasks train can spare, divided in proportion to the fractions (at least one each while
    train keeps one)."""
    spare = n_grounded - math.ceil(n_grounded * TRAIN_GROUNDED_FLOOR)
    total_f = sum(fractions[s] for s in _HELD_OUT) or 1.0
    need = {s: min(_share(n_total, fractions[s]), math.floor(spare * fractions[s] / total_f)) for s in _HELD_OUT}
    proportional = _needs(n_grounded, fractions)  # never fewer than each split's own fraction
    return {s: max(need[s], proportional[s]) for s in _HELD_OUT}


def _needs(n: int, fractions: dict[Split, float]) -> dict[Split, int]:
    """How many of `n` tasks of one kind each held-out split should get: its fraction, and at least
    one while that still leaves one for train; never all of them (train keeps one, val gives first)."""
    need = {s: _share(n, fractions[s]) for s in _HELD_OUT}
    for s in _HELD_OUT:
        if fractions[s] > 0 and need[s] == 0 and n - sum(need.values()) >= 2:
            need[s] = 1
    for s in reversed(_HELD_OUT):
        while n >= 2 and need[s] and sum(need.values()) > n - 1:
            need[s] -= 1
    return need


def split_tasks(
    tasks: list[Task],
    val_fraction: float = 0.2,
    test_fraction: float = 0.3,
    seed: int = 0,
    max_key_share: float = MAX_KEY_SHARE,
) -> list[Task]:
    """Copies of `tasks` (same order) with `split` set to train, val or test; tasks sharing an
    identifying key always share a split (`leaks` of the result is empty)."""
    for name, f in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= f < 1.0:
            raise ValueError(f"{name} must be in [0, 1)")
    if val_fraction + test_fraction >= 1.0:
        raise ValueError("val_fraction + test_fraction must be below 1: train needs tasks")
    out = [t.model_copy(update={"split": "train"}) for t in tasks]
    groups = find_groups(out, max_key_share)
    comps = sorted(groups.members().values(), key=lambda m: _rank(seed, [out[i].id for i in m]))
    fractions: dict[Split, float] = {"val": val_fraction, "test": test_fraction}
    n_grounded = sum(t.grounded for t in out)
    g_need = _grounded_needs(n_grounded, len(out), fractions)
    room = {s: max(_share(len(out), fractions[s]), g_need[s]) for s in _HELD_OUT}
    size = dict.fromkeys(_HELD_OUT, 0)
    grounded = dict.fromkeys(_HELD_OUT, 0)

    def grounded_in(m: list[int]) -> int:
        return sum(out[i].grounded for i in m)

    def place(m: list[int], s: Split) -> None:
        for i in m:
            out[i].split = s
        size[s] += len(m)
        grounded[s] += grounded_in(m)

    with_grounded = [m for m in comps if grounded_in(m)]
    for m in with_grounded:
        for s in _HELD_OUT:
            if grounded[s] + grounded_in(m) <= g_need[s] and size[s] + len(m) <= room[s]:
                place(m, s)
                break
    # a held-out split that got no grounded task (every component it could take was larger than its
    # share of them): the smallest that fits its room, if train keeps one
    for s in _HELD_OUT:
        if g_need[s] and not grounded[s]:
            in_train = n_grounded - sum(grounded.values())
            fits = [
                m for m in with_grounded
                if out[m[0]].split == "train" and size[s] + len(m) <= room[s] and grounded_in(m) < in_train
            ]  # fmt: skip
            if fits:
                place(min(fits, key=len), s)
    for m in comps:
        if grounded_in(m) or out[m[0]].split != "train":
            continue
        for s in _HELD_OUT:
            if size[s] + len(m) <= room[s]:
                place(m, s)
                break
    return out


def leaks(tasks: list[Task], max_key_share: float = MAX_KEY_SHARE) -> list[str]:
    """Every identifying key held by tasks in more than one split, sorted (empty when the splits are
    disjoint)."""
    groups = find_groups(tasks, max_key_share)
    where: dict[str, set[str]] = {}
    for t, keys in zip(tasks, groups.keys, strict=True):
        for k in keys:
            if k not in groups.ignored:
                where.setdefault(k, set()).add(t.split)
    return sorted(k for k, splits in where.items() if len(splits) > 1)


def split_report(tasks: list[Task], max_key_share: float = MAX_KEY_SHARE) -> SplitReport:
    """What the split of `tasks` (as their `split` fields stand) looks like."""
    groups = find_groups(tasks, max_key_share)
    members = groups.members()
    counts = {s: {"grounded": 0, "written": 0} for s in SPLITS}
    for t in tasks:
        counts[t.split][_kind(t)] += 1
    return SplitReport(
        counts=counts,
        components=len(members),
        largest_component=max((len(m) for m in members.values()), default=0),
        ignored_keys=groups.ignored,
        leaks=leaks(tasks, max_key_share),
    )
