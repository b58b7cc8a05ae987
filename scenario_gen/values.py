"""Values seen in tool results, kept so later calls can use real ids and names.

Exploring a server is mostly a matter of finding arguments it accepts: an `item_id` parameter only
works with an id the server actually has. Every scalar field of every successful result is recorded
under its key, with the step that produced it, so a chain of calls (list -> get by id) can be traced
back afterwards.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from mcp_rl.answer_rule import parse_datetime

_NAME_KEYS = ("name", "title", "label", "display_name", "full_name", "username")
# a field that says what sort of thing an entry is (`[DIR] bills` -> type DIR): see `SeenValue.kind`
_KIND_KEYS = ("type", "kind")
_ID_LIKE = re.compile(r"(^|_)(id|ids|key|sku|code|slug|uuid|ref)$", re.IGNORECASE)
_PATH_ARG = re.compile(r"(^|_)(path|dir|directory|folder|root)$", re.IGNORECASE)
# a parameter named `<anything>_<suffix>` takes values seen under the suffix (`file_path` <- `path`)
_SUFFIX_KEYS = ("path", "name", "title", "id")
TIME_PARAM = re.compile(r"(^|_)(time|timestamp|date|datetime|since|until|before|after)s?(_|$)", re.IGNORECASE)


def name_of(obj: dict[str, Any]) -> str | None:
    """A human-readable handle for an object (its name or title), if it has one."""
    for k in _NAME_KEYS:
        v = obj.get(k)
        if isinstance(v, str) and v.strip():
            return v
    return None


ID_VALUE = re.compile(r"(?=\S*\d)[\w.:/#-]{3,}")  # one token with a digit: 4c1e9a0b7d, ITM-001


def opaque(dicts: list[dict[str, Any]], key: str) -> bool:
    """Every value is one token with a digit (a hash, a SKU) or a time: nothing a person says."""
    return all(ID_VALUE.fullmatch(str(x[key])) or parse_datetime(str(x[key])) is not None for x in dicts)


def handle_key(dicts: list[dict[str, Any]]) -> str | None:
    """The field that names each element of a list: name/title if present, else the first field whose
    values are distinct short strings (e.g. `category` in a list of category counts)."""
    if not dicts:
        return None
    keys = [k for k in dicts[0] if all(isinstance(x.get(k), str) for x in dicts)]
    preferred = [k for k in _NAME_KEYS if k in keys]
    # words before opaque tokens: a commit is asked about by its message, not its 40-digit hash
    # (measured: git's log gave 57 facts all anchored on hashes; 9 of 43 questions survived)
    words = [k for k in keys if not is_id_like(k) and not opaque(dicts, k)]
    for k in preferred + words + [k for k in keys if not is_id_like(k)] + [k for k in keys if is_id_like(k)]:
        values = [x[k] for x in dicts]
        if len(set(values)) == len(values) and all(0 < len(v) <= 60 for v in values):
            return k
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
    kind: str | None = None
    """The `type` or `kind` of the object the value sat in (`FILE`, `DIR`): a tool that fails on one
    entry of a kind likely fails on every entry of it (`read_file` on a directory), see `kinds_in`."""


@dataclass
class ValuePool:
    by_key: dict[str, list[SeenValue]] = field(default_factory=dict)
    accepted: dict[str, list[Any]] = field(default_factory=dict)
    """Argument values the server accepted (a call with them succeeded): real values for the writer."""
    launch_paths: list[str] = field(default_factory=list)
    """Paths the user started the server on (`--repository /srv/repo`, a root directory): the values
    a path parameter most likely wants before any result has named one (`launch_paths`)."""

    def shown(self) -> set[Any]:
        """Every value some result showed (whatever its key)."""
        return {sv.value for values in self.by_key.values() for sv in values}

    def add_accepted(self, arguments: dict[str, Any], limit_per_key: int = 20) -> None:
        for k, v in arguments.items():
            if isinstance(v, str) and 0 < len(v) <= 60:
                bucket = self.accepted.setdefault(k.lower(), [])
                if v not in bucket and len(bucket) < limit_per_key:
                    bucket.append(v)

    def add_result(
        self,
        data: Any,
        step: int,
        arguments: dict[str, Any] | None = None,
        limit_per_key: int = 40,
        tool: str | None = None,
    ) -> None:
        """Learn the scalars of a result (JSON, or the structure `result_data` reads from text).

        A value is kept under its key, with the step it came from. Entries of a list of plain strings
        are kept under the list's key, or for a bare listing (`Lisbon\\nPorto`) under `name` and
        under the plural noun ending the tool's name (`note_titles` -> `titles`, feeding `title`). An entry
        of a listing made for a path argument (`[FILE] a.txt` for `path=/srv`) is also kept as a path
        (`/srv/a.txt`), which is what a later call on that entry needs. A value the call was given,
        at any depth, is an echo and teaches nothing new."""
        args = arguments or {}
        echoes = set(_scalars(args))
        noun = (tool or "").rsplit("_", 1)[-1].lower()
        noun = noun if len(noun) > 3 and noun.endswith("s") else None
        base = next(
            (v for k, v in args.items() if _PATH_ARG.search(k) and isinstance(v, str) and v.strip()), None
        )

        def keep(key: str, v: Any, ctx: str | None, kind: str | None = None) -> None:
            if isinstance(v, bool) or not isinstance(v, str | int | float):
                return
            if (isinstance(v, str) and not (0 < len(v) <= 80)) or v in echoes:
                return
            bucket = self.by_key.setdefault(key.lower(), [])
            if len(bucket) < limit_per_key and all(s.value != v for s in bucket):
                bucket.append(SeenValue(v, step, ctx, kind))

        def walk(node: Any, depth: int, ctx_name: str | None, key: str) -> None:
            if depth > 4:
                return
            if isinstance(node, dict):
                ctx = name_of(node) or ctx_name
                kinds = (node.get(k) for k in _KIND_KEYS)
                kind = next((v for v in kinds if isinstance(v, str) and 0 < len(v) <= 20), None)
                for k, v in node.items():
                    if isinstance(v, dict | list):
                        walk(v, depth + 1, ctx, k)
                    elif k not in _KIND_KEYS:
                        keep(k, v, ctx, kind)
                    else:
                        keep(k, v, ctx)
                name = name_of(node)
                if base is not None and name and depth <= 2:
                    keep("path", _join(base, name), name, kind)
            elif isinstance(node, list):
                # an element with no name field is named by its list's handle (a commit by its message),
                # so a question may name an id the element holds by it ("the commit 'Release 0.1.0'")
                dicts = [v for v in node[:50] if isinstance(v, dict)]
                handle = handle_key(dicts) if len(dicts) > 1 else None
                if handle and (is_id_like(handle) or opaque(dicts, handle)):
                    handle = None  # an id or a hash names nothing a person says
                for v in node[:50]:
                    if isinstance(v, dict) and handle and not name_of(v):
                        walk(v, depth + 1, str(v[handle]), key)
                    elif isinstance(v, dict | list):
                        walk(v, depth + 1, ctx_name, key)
                    elif isinstance(v, str) or key != "name":  # a bare list of numbers names nothing
                        keep(key, v, ctx_name)
                        if key == "name" and depth == 0 and noun:
                            keep(noun, v, ctx_name)
                        if isinstance(v, str) and key == "name" and _file_like(v) and (base or v.startswith("/")):
                            keep("path", _join(base or "/", v), v)

        walk(data, 0, None, "name")

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
        if not out:  # `title` <- the entries of `titles`, `city` <- of `cities`
            out += self.by_key.get(p + "s", []) + self.by_key.get(p[:-1] + "ies" if p.endswith("y") else "", [])
        if not out:
            suffix = next((k for k in _SUFFIX_KEYS if p.endswith("_" + k) or p.endswith("_" + k + "s")), None)
            out += self.by_key.get(suffix, []) if suffix else []
        if not out and TIME_PARAM.search(param):
            # `start_timestamp` <- the times results showed (a log's commit dates): a filter on a time
            # the server holds returns part of what it holds, a made-up one ("2 weeks ago") all or none
            out += [s for vals in self.by_key.values() for s in vals if parse_datetime(s.value) is not None]
        if not out:
            # `category_name` <- `category`; never the other way (`time` <- `time_difference` is wrong)
            for k, vals in self.by_key.items():
                if p.startswith(k + "_"):
                    out += vals
        return out

    def named_in(self, text: str) -> list[SeenValue]:
        """Seen values of the first key the text names (a parameter `contains` described as "the commit
        sha that branch should contain" <- the `commit` values of a log), [] when it names none."""
        for word in re.findall(r"[a-z]{3,}", text.lower()):
            for k in (word, word[:-1] if word.endswith("s") else "", word[:-3] + "y" if word.endswith("ies") else ""):
                if k and self.by_key.get(k):
                    return list(self.by_key[k])
        return []

    def kinds_in(self, arguments: dict[str, Any]) -> set[str]:
        """The kinds of the entries the arguments' values were seen in, at any depth."""
        values = set(_scalars(arguments))
        return {s.kind for vals in self.by_key.values() for s in vals if s.kind is not None and s.value in values}

    def kinds(self) -> set[str]:
        return {s.kind for vals in self.by_key.values() for s in vals if s.kind is not None}

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

    def shared_words(self, limit: int = 6) -> list[SeenValue]:
        """Names (capitalized words of 4+ letters, not a sentence's first word) that two or more
        different values hold: a search for one lists several entries ("Lyon" -> the two people and two
        places there), while a search for a name's word finds the one entry a lookup by name found
        already. Measured on the npm memory server (2026-12-07): six searches, one per name, gave six
        one-entry results and no fact that spanned entries. Only names: a search for "works" found the
        one person whose notes say "works as", and "How many relationships involve 'works'?" read as the
        'works at' links (2) where the search's answer was that person's links (4)."""
        holders: dict[str, set[str]] = {}
        first: dict[str, SeenValue] = {}
        for key, vals in self.by_key.items():
            if is_id_like(key):
                continue
            for v in vals:
                if not isinstance(v.value, str) or ID_VALUE.fullmatch(v.value):
                    continue
                words = re.findall(r"[^\W\d_]+", v.value)
                titled = all(w[0].isupper() for w in words)  # "Ines Moreau": every word is a name's
                for i, w in enumerate(words):
                    if len(w) >= 4 and w[0].isupper() and (i > 0 or titled):
                        holders.setdefault(w, set()).add(v.value)
                        first.setdefault(w, SeenValue(w, v.step, v.context_name))
        shared = [w for w, entries in holders.items() if len(entries) >= 2]
        shared.sort(key=lambda w: (-len(holders[w]), w))
        return [first[w] for w in shared[:limit]]

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


def _scalars(node: Any) -> list[str | int | float]:
    if isinstance(node, dict):
        return [x for v in node.values() for x in _scalars(v)]
    if isinstance(node, list):
        return [x for v in node for x in _scalars(v)]
    return [node] if isinstance(node, str | int | float) and not isinstance(node, bool) else []


_FILE_LIKE = re.compile(r"^/\S*$|^[^\s*]+\.[A-Za-z0-9]{1,8}$|^[^\s*]+/$")


def _file_like(entry: str) -> bool:
    """An entry of a plain listing that names a file: a full path, a name with an extension, or a
    directory with its slash. Not any line: measured, `git_branch` lists `feature/charts` and
    `* main` for `repo_path=R`; taken as paths (R/feature/charts), they failed 21 of 28 exploratory calls."""
    return bool(_FILE_LIKE.match(entry.strip()))


def _join(base: str, name: str) -> str:
    """`name` under the directory `base`, unless it is already a full path."""
    if name.startswith("/") or base in (".", "./"):
        return name
    return base.rstrip("/") + "/" + name


def _plain(value: str) -> bool:
    """A value worth showing: short, not a timestamp or a long free text."""
    return 0 < len(value) <= 40 and not re.match(r"^\d{4}-\d{2}-\d{2}", value)


_PROGRAMS = (".py", ".js", ".mjs", ".cjs", ".ts", ".jar", ".exe", ".sh")
"""A server's own program, not a value a user would name."""


def launch_paths(command: list[str], cwd: str | None = None) -> list[str]:
    """The existing files and directories named on a stdio server's command line (its own executable
    and interpreter aside), as absolute paths. Only paths that exist: an argument that is not one may
    be a token, and is never read. Measured: `mcp-server-git --repository R` rejects every call whose
    `repo_path` is not R, and with nothing else to go on exploration made 25 calls, none of them OK."""
    out: list[str] = []
    for arg in command[1:]:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if not value.startswith(("/", "./", "../", "~")):
            continue
        path = os.path.abspath(os.path.join(cwd or ".", os.path.expanduser(value)))
        if os.path.isdir(path) or (os.path.isfile(path) and not path.endswith(_PROGRAMS)):
            out.append(path)
    return list(dict.fromkeys(out))
