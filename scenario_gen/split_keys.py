"""What ties tasks together for the split: the identifying keys a task holds, and the groups they make.

Two tasks that share a key must land in one split, or what is learned on one is measured on the other:
- a reference call (tool + canonical JSON arguments): `call get_item {"item_id":"ITM-017"}`;
- an entity: every string in a reference call's arguments (an id such as ITM-017, a name, a query, a
  timezone), case-folded: `entity itm-017`;
- the entity-like tokens of a task's text (ids, quoted strings, capitalized names, paths such as
  America/New_York) that equal an entity of some task's reference calls. Written tasks have no calls:
  this is how "Update the stock of item 'ITM-018'" joins the grounded tasks about ITM-018. A path-shaped
  entity is also known by its last part ("America/New_York" by "new york"), the way a text names it.

A key held by so many tasks that it would glue most of the set into one group (a category, a timezone,
a call with no arguments that every grounded task starts with) says nothing about which task is which:
it is ignored, and reported. A key fewer than three tasks hold is never ignored. Groups are the
connected components of the rest (union-find).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from mcp_rl.task import Task

MAX_KEY_SHARE = 0.25
"""A key held by more than this share of the tasks is not identifying."""
MIN_GLUE = 3
"""Fewer tasks than this holding a key make it identifying whatever the share: two tasks sharing a
call are the very leak the split exists to prevent."""

_QUOTED = re.compile(r"""(?<!\w)['"‘“]([^'"’”\n]{2,80})['"’”](?!\w)""")
# ids and paths: ITM-017, Etc/UTC, America/New_York, order_12
_IDLIKE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_/][A-Za-z0-9]+)+")
# runs of capitalized words: "Solar String Lights", "New York", "Tokyo"
_CAPITALIZED = re.compile(r"[A-Z][\w'-]*(?:\s+(?:[A-Z0-9][\w'-]*))*")
_SPACES = re.compile(r"\s+")


def normalize(value: str) -> str:
    """An entity as compared: case-folded, spaces collapsed, outer punctuation dropped."""
    return _SPACES.sub(" ", value.casefold()).strip(" .,;:!?")


def call_key(tool: str, arguments: dict[str, Any]) -> str:
    return f"call {tool} {json.dumps(arguments, sort_keys=True, separators=(',', ':'), ensure_ascii=False)}"


def entity_key(value: str) -> str:
    return f"entity {normalize(value)}"


def string_leaves(value: Any) -> list[str]:
    """Every string leaf of a JSON value (numbers and booleans name nothing)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in string_leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in string_leaves(v)]
    return []


def _call_keys(task: Task) -> set[str]:
    keys = set()
    for call in task.reference_calls:
        keys.add(call_key(call.tool, call.arguments))
        keys |= {entity_key(s) for s in string_leaves(call.arguments) if len(normalize(s)) >= 2}
    return keys


def text_tokens(text: str) -> set[str]:
    """Entity-like tokens of a text, normalized: quoted strings, ids and paths, capitalized runs (and
    each word of a run, since a sentence's first word joins the run: "Tokyo" in "Tokyo time?")."""
    found = {m.group(1) for m in _QUOTED.finditer(text)}
    found |= {m.group(0) for m in _IDLIKE.finditer(text)}
    for m in _CAPITALIZED.finditer(text):
        words = m.group(0).split()
        found.add(m.group(0))
        found |= {" ".join(words[i:]) for i in range(1, len(words))}
    return {normalize(t) for t in found} - {""}


def _aliases(entity: str) -> list[str]:
    """Other ways a text names an entity: the last part of a path, underscores read as spaces."""
    value = entity.removeprefix("entity ")
    if "/" not in value:
        return []
    last = value.rsplit("/", 1)[-1].replace("_", " ").strip()
    return [last] if len(last) >= 3 else []


def task_keys(tasks: list[Task]) -> list[set[str]]:
    """The keys each task holds (before any are ignored), in the order of `tasks`."""
    own = [_call_keys(t) for t in tasks]
    # what a text token may name: the entities of every task's reference calls
    named: dict[str, str] = {}
    for keys in own:
        for k in keys:
            if k.startswith("entity "):
                named[k.removeprefix("entity ")] = k
                for alias in _aliases(k):
                    named.setdefault(alias, k)
    out = []
    for t, keys in zip(tasks, own, strict=True):
        out.append(keys | {named[tok] for tok in text_tokens(t.text) if tok in named})
    return out


def _holders(keys: list[set[str]]) -> Counter[str]:
    return Counter(k for ks in keys for k in ks)


def _components(keys: list[set[str]], ignored: set[str] | dict[str, int]) -> list[int]:
    """A label per task: tasks sharing any key not ignored get the same label (the smallest index
    in their component, so a label does not depend on the order the keys are seen in)."""
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, ks in enumerate(keys):
        for k in sorted(ks):
            if k in ignored:
                continue
            if k not in first:
                first[k] = i
                continue
            a, b = find(first[k]), find(i)
            parent[max(a, b)] = min(a, b)
    return [find(i) for i in range(len(keys))]


@dataclass
class Groups:
    """The tasks' keys and components, and the keys left out of them."""

    keys: list[set[str]]
    """Per task, every key it holds (ignored ones included)."""
    labels: list[int]
    """Per task, its component (tasks with one label must share a split)."""
    ignored: dict[str, int]
    """Keys that are not identifying -> how many tasks hold each."""

    def members(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i, label in enumerate(self.labels):
            out.setdefault(label, []).append(i)
        return out


def find_groups(tasks: list[Task], max_key_share: float = MAX_KEY_SHARE) -> Groups:
    """Components of `tasks` over their identifying keys.

    Not identifying: a key more than `max_key_share` of the tasks hold; then, while a component holds
    more than that share, the key most of its tasks hold (a key only two tasks share is a leak if
    split, never glue: such a component stays whole, and goes to train if too large for val/test)."""
    keys = task_keys(tasks)
    count = _holders(keys)
    limit = max_key_share * len(tasks)
    ignored = {k: n for k, n in sorted(count.items()) if n > limit and n >= MIN_GLUE}
    while True:
        labels = _components(keys, ignored)
        oversize = [lb for lb, n in Counter(labels).items() if n > max(limit, 1)]
        # each oversize component's most-held key; of those, the most held (ties by name: the
        # choice must not depend on the order of the tasks)
        best: tuple[int, str] | None = None
        for label in oversize:
            inside = _holders([ks for ks, lb in zip(keys, labels, strict=True) if lb == label])
            top = max(((n, k) for k, n in inside.items() if k not in ignored), default=None)
            if top is not None and top[0] >= MIN_GLUE and (best is None or top > best):
                best = top
        if best is None:
            return Groups(keys, labels, ignored)
        ignored = dict(sorted({**ignored, best[1]: count[best[1]]}.items()))
