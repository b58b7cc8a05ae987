"""Values seen in tool results, kept so later calls can use real ids and names.

Exploring a server is mostly a matter of finding arguments it accepts: an `item_id` parameter only
works with an id the server actually has. Every scalar field of every successful result is recorded
under its key, with the step that produced it, so a chain of calls (list -> get by id) can be traced
back afterwards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_NAME_KEYS = ("name", "title", "label", "display_name", "full_name", "username")
_ID_LIKE = re.compile(r"(^|_)(id|ids|key|sku|code|slug|uuid|ref)$", re.IGNORECASE)


def name_of(obj: dict[str, Any]) -> str | None:
    """A human-readable handle for an object (its name or title), if it has one."""
    for k in _NAME_KEYS:
        v = obj.get(k)
        if isinstance(v, str) and v.strip():
            return v
    return None


def is_id_like(key: str) -> bool:
    return bool(_ID_LIKE.search(key))


@dataclass
class SeenValue:
    value: Any
    step: int
    """Index of the exploration step whose result held the value."""
    context_name: str | None = None
    """The name/title of the object the value sat in (a readable anchor for an id)."""


@dataclass
class ValuePool:
    by_key: dict[str, list[SeenValue]] = field(default_factory=dict)
    accepted: dict[str, list[Any]] = field(default_factory=dict)
    """Argument values the server accepted (a call with them succeeded): real values for the writer."""

    def add_accepted(self, arguments: dict[str, Any], limit_per_key: int = 20) -> None:
        for k, v in arguments.items():
            if isinstance(v, str) and 0 < len(v) <= 60:
                bucket = self.accepted.setdefault(k.lower(), [])
                if v not in bucket and len(bucket) < limit_per_key:
                    bucket.append(v)

    def add_result(
        self, data: Any, step: int, arguments: dict[str, Any] | None = None, limit_per_key: int = 40
    ) -> None:
        # a result echoing the call's own arguments ("query": "tent") teaches nothing new
        echoes = {
            v
            for v in (arguments or {}).values()
            if isinstance(v, str | int | float) and not isinstance(v, bool)
        }

        def walk(node: Any, depth: int, ctx_name: str | None) -> None:
            if depth > 4:
                return
            if isinstance(node, dict):
                ctx = name_of(node) or ctx_name
                for k, v in node.items():
                    if isinstance(v, str | int | float) and not isinstance(v, bool):
                        if (isinstance(v, str) and not (0 < len(v) <= 80)) or v in echoes:
                            continue
                        bucket = self.by_key.setdefault(k.lower(), [])
                        if len(bucket) < limit_per_key and all(s.value != v for s in bucket):
                            bucket.append(SeenValue(v, step, ctx))
                    else:
                        walk(v, depth + 1, ctx)
            elif isinstance(node, list):
                for v in node[:50]:
                    walk(v, depth + 1, ctx_name)

        walk(data, 0, None)

    def candidates(self, param: str) -> list[SeenValue]:
        """Seen values that fit a parameter name: the same key, or `x_id` <- `id` of x-ish objects."""
        p = param.lower()
        out: list[SeenValue] = list(self.by_key.get(p, []))
        if not out and is_id_like(p):
            stem = re.sub(r"_?(id|ids|key|sku|code|slug|uuid|ref)$", "", p)
            for k in (f"{stem}_id", "id", f"{stem}id"):
                out += self.by_key.get(k, [])
        if not out and p.endswith("s"):
            out += self.by_key.get(p[:-1], [])
        if not out:
            # `category_name` <- `category`; never the other way (`time` <- `time_difference` is wrong)
            for k, vals in self.by_key.items():
                if p.startswith(k + "_"):
                    out += vals
        return out

    def name_words(self) -> list[SeenValue]:
        """Distinct words (4+ letters) of the names seen, for free-text search parameters."""
        out: list[SeenValue] = []
        seen: set[str] = set()
        for k in _NAME_KEYS:
            for v in self.by_key.get(k, []):
                for w in re.findall(r"[^\W\d_]{4,}", str(v.value)):
                    if w.lower() not in seen:
                        seen.add(w.lower())
                        out.append(SeenValue(w, v.step, v.context_name))
        return out

    def sample_names(self, limit: int = 12, keys: int = 8) -> dict[str, list[str]]:
        """A few real values per key (names, ids, categories, accepted arguments) for the writer's prompt."""
        out: dict[str, list[str]] = {}
        ranked = sorted(self.by_key, key=lambda k: (k not in _NAME_KEYS, not is_id_like(k), k))
        for k in ranked:
            strs = [str(v.value) for v in self.by_key[k] if isinstance(v.value, str) and _plain(v.value)]
            if len(strs) >= 2 or (strs and (k in _NAME_KEYS or is_id_like(k))):
                out[k] = strs[:limit]
        for k, vals in self.accepted.items():
            merged = list(dict.fromkeys([*out.get(k, []), *(str(v) for v in vals if _plain(str(v)))]))
            if merged:
                out[k] = merged[:limit]
        return dict(list(out.items())[:keys])


def _plain(value: str) -> bool:
    """A value worth showing: short, not a timestamp or a long free text."""
    return 0 < len(value) <= 40 and not re.match(r"^\d{4}-\d{2}-\d{2}", value)
