"""Answers read deterministically out of tool results.

A grounded task's reference answer is never written by the LLM: it is a value taken from a real
result by an `AnswerRule` (a field, a count, a list of names, the time of day in a timestamp). The
LLM only words the question. So the reference is right even with a weak local writer, and a grader
can re-run the reference calls and apply the same rule when the answer moves with time or state.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mcp_rl.answer_rule import DIFF_KEY, format_value, parse_datetime, result_data, transform_value
from mcp_rl.servers.result_text import EMPTY_RESULT
from mcp_rl.task import AnswerRule
from scenario_gen.values import ID_VALUE, handle_key, is_id_like, name_of, opaque

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DAY_NAMES = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
COUNT_KEY = re.compile(r"(count|total|matches|num_|number)", re.IGNORECASE)
_MAX_ANSWER_CHARS = 80
_PLACEHOLDER = re.compile(r"\[(resource|image|audio|blob)\b")
_NOTHING = re.compile(
    r"^\s*(no|nothing|none|0)\b.{0,40}\b(found|match(es|ed)?|results?|entries|exists?)\b|\b(error|exception|"
    r"not found|denied|invalid|failed|EISDIR|ENOENT)\b",
    re.IGNORECASE,
)
_MAX_NAMES = 8
_NAME_KEYS = ("name", "title", "label", "display_name")


@dataclass
class Fact:
    rule: AnswerRule
    answer: str
    what: str
    """A short human description of the value ("the price of 'Summit Dome 4P Tent'")."""
    mentions: list[list[str]] = field(default_factory=list)
    """Groups of words the question must mention (one of each group), e.g. the selected item's name."""
    weight: float = 1.0
    dated: bool = False
    """The value depends on today's date or the current time."""
    avoid: list[str] = field(default_factory=list)
    """Words the question must not use: they name another field than the one answered (a yes/no about
    `isFile` asked as "is it a directory?", when the record has `isDirectory` too, gets "no" wrong)."""
    kinds: list[list[str]] = field(default_factory=list)
    """For a count or list of entries of several kinds (`[FILE]` and `[DIR]`): words for each kind. A
    question that names some kinds but not all ("how many directories") asks for fewer entries than
    the answer holds."""
    of_kind: list[str] = field(default_factory=list)
    """For a count or list of one kind of entry (the files of a folder): its words, of which the question
    must use one as a word of its own, not inside a value it names ("/srv/files" names no kind)."""
    narrowing: list[str] = field(default_factory=list)
    """For a count or list of every entry: the entries' own values. A question that names one ("how
    many relations between Ines, Paul and Anna?") asks about some of the entries, not all of them."""
    reaches: bool = False
    """For a count of a list whose every entry holds a value the call was given, and some entries other
    values too (the relations that touch any of three people): a question may not ask for the entries
    between the given values only."""
    compares: str = ""
    """For a fact of a diff the call made against a value it was given ("Diff with 8edfb38:", the
    changes between that commit and now): that value. A question must ask it as a comparison; asked
    as the commit's own changes it has another answer (6 of 20 git tasks read, 2026-12-07)."""


_FILLER_WORDS = {"is", "has", "the", "of", "a", "an"}
_ABBREVIATIONS = {
    "dir": ("directory", "folder"),
    "repo": ("repository",),
    "pkg": ("package",),
    "msg": ("message",),
    "img": ("image",),
    "doc": ("document",),
}


_IRREGULAR = {"person": "people", "child": "children", "man": "men", "woman": "women"}


def _plurals(word: str) -> list[str]:
    if word in _IRREGULAR:
        return [word, _IRREGULAR[word], word + "s"]
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return [word, word[:-1] + "ies"]
    return [word, word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s")]


def name_parts(name: str) -> list[str]:
    """The words of a field or kind name, split at separators and camelCase (`isDirectory` -> is,
    Directory); one-letter pieces dropped."""
    return [w for w in re.split(r"[_\-\s]+|(?<=[a-z])(?=[A-Z])", name) if len(w) >= 2]


def word_forms(name: str) -> list[str]:
    """The words a field name or a kind stands for, with plurals: `isDirectory` -> directory,
    directories; `DIR` -> dir, dirs, directory, directories, folder, folders."""
    parts = [w.lower() for w in name_parts(name)]
    out: list[str] = []
    for w in parts:
        if w in _FILLER_WORDS:
            continue
        for base in (w, *_ABBREVIATIONS.get(w, ())):
            out += _plurals(base)
    return list(dict.fromkeys(out))


def _sibling_words(obj: dict[str, Any], key: str, same_kind: Callable[[Any], bool]) -> list[str]:
    """Words of the record's other fields of the same kind as `key` (yes/no flags, timestamps) that the
    field `key` itself does not use: a question using them asks about the sibling."""
    own = set(word_forms(key))
    words = [w for k, v in obj.items() if k != key and same_kind(v) for w in word_forms(k)]
    return [w for w in dict.fromkeys(words) if w not in own]


def _kinds(dicts: list[dict[str, Any]], name_key: str | None) -> list[list[str]]:
    """Word forms of each kind, when the entries carry a kind field (a short string of 2-4 values,
    like `type`: FILE / DIR); [] otherwise."""
    for k in dicts[0] if dicts else {}:
        values = [x.get(k) for x in dicts]
        if k == name_key or not all(isinstance(v, str) and 0 < len(v) <= 12 for v in values):
            continue
        distinct = list(dict.fromkeys(str(v).lower() for v in values))
        if 2 <= len(distinct) <= 4 and len(distinct) < len(values):
            return [word_forms(v) for v in distinct]
    return []


def _now_anchored(data: Any, now: datetime, window: timedelta) -> tuple[bool, bool]:
    """(holds a timestamp within `window` of now, holds a date within a day of today)."""
    near_now = near_today = False

    def walk(node: Any, depth: int) -> None:
        nonlocal near_now, near_today
        if depth > 5:
            return
        if isinstance(node, dict):
            for v in node.values():
                walk(v, depth + 1)
        elif isinstance(node, list):
            for v in node[:50]:
                walk(v, depth + 1)
        else:
            dt = parse_datetime(node)
            if dt is not None:
                near_now = near_now or abs(dt - now) <= window
                near_today = near_today or abs(dt - now) <= timedelta(days=1, hours=14)
            elif isinstance(node, str) and _ISO_DATE.match(node):
                today = now.date()
                near_today = near_today or abs((datetime.fromisoformat(node).date() - today).days) <= 1

    walk(data, 0)
    return near_now, near_today


def time_dependent(result_text: str, now: datetime | None = None) -> bool:
    """True when a result reports the current time (e.g. a clock): its values are stale within minutes."""
    near_now, _ = _now_anchored(result_data(result_text), now or datetime.now(UTC), timedelta(minutes=10))
    return near_now


def _scalar(v: Any) -> bool:
    return isinstance(v, str | int | float | bool) and v is not None


def _echoes(value: Any, arg_values: set[str]) -> bool:
    return format_value(value).lower() in arg_values


def _field_facts(
    obj: dict[str, Any],
    path: list[Any],
    label: str,
    mentions: list[list[str]],
    arg_values: set[str],
    dated: bool,
    now_result: bool = False,
) -> list[Fact]:
    """Facts about an object's scalar fields. `dated`: the result holds today's date; `now_result`: it
    reports the current time (a clock), so its date, weekday and the like are questions about now."""
    out: list[Fact] = []
    for k, v in obj.items():
        if not _scalar(v) or (isinstance(v, str) and not (0 < len(v.strip()) <= _MAX_ANSWER_CHARS)):
            continue
        if _echoes(v, arg_values) or any(format_value(v).lower() == m.lower() for g in mentions for m in g):
            continue  # an answer the question already gives away
        what = f"the `{k}`{label}"
        if parse_datetime(v) is not None:
            # A raw timestamp is a poor answer to grade ("2026-12-02T09:30:00-05:00" against "9:30 am on
            # Wednesday"): ask for its time of day or its date instead. Neither when the time is the
            # one the call was given (a conversion echoing its input).
            hhmm, day = transform_value(v, "time_hhmm"), transform_value(v, "date")
            if hhmm in arg_values:
                continue
            # a file's `modified` asked as "when was it created?" reads the wrong time (measured: 2 of
            # 12 filesystem references, right only because both times were equal)
            avoid = _sibling_words(obj, k, lambda x: parse_datetime(x) is not None)
            rule = AnswerRule(kind="field", path=[*path, k], transform="time_hhmm")
            out.append(Fact(rule, hhmm, f"the time of day (HH:MM) in {what[4:]}", mentions, 1.5, False, avoid))
            if now_result:
                rule = AnswerRule(kind="field", path=[*path, k], transform="date")
                out.append(Fact(rule, day, f"the date (YYYY-MM-DD) in {what[4:]}", mentions, 0.5, True, avoid))
            continue
        weight = 0.4 if is_id_like(k) else 1.0
        # A date-bound value (a day name, a yes/no like daylight saving) moves with the calendar.
        is_dated = dated and (str(v).lower() in _DAY_NAMES or isinstance(v, bool))
        if is_dated and not now_result:
            continue  # about a date the call was not asked about (today's, implicitly): not a fair question
        fact = Fact(AnswerRule(kind="field", path=[*path, k]), format_value(v), what, mentions, weight, is_dated)
        if isinstance(v, bool):
            fact.avoid = _sibling_words(obj, k, lambda x: isinstance(x, bool))
        out.append(fact)
    return out


def _list_facts(
    items: list[Any],
    path: list[Any],
    label: str,
    arg_values: set[str],
    dated: bool,
    complete: bool = True,
    now_result: bool = False,
) -> list[Fact]:
    """Facts about a list. `complete` is False when the server says the list was cut (a `total` larger
    than its length): then neither its length nor its names answer a question about all of them."""
    out: list[Fact] = []
    dicts = [x for x in items if isinstance(x, dict)]
    name_key = handle_key(dicts)
    kinds = _kinds(dicts, name_key) if len(dicts) == len(items) else []
    narrowing = _entry_values(items, kinds)
    if complete:
        count = Fact(AnswerRule(kind="count", path=list(path)), str(len(items)), f"how many entries{label}", [], 0.8)
        count.kinds, count.narrowing = kinds, narrowing
        out.append(count)
    entries = [x for x in items if isinstance(x, str)]
    if complete and len(entries) == len(items) and 1 < len(entries) <= _MAX_NAMES:
        # a listing of plain entries (cities, titles, paths): the entries themselves are the answer
        answer = ", ".join(e.strip() for e in entries)
        if all(0 < len(e.strip()) <= 60 for e in entries) and len(answer) <= 3 * _MAX_ANSWER_CHARS:
            rule = AnswerRule(kind="names", path=list(path))
            out.append(Fact(rule, answer, f"every entry{label}, in order", [], 0.8))
    others = _identifying_keys(dicts, name_key) if name_key else []
    # the handle of elements with no name field (`to` of relations) lists nothing a user asks for: the
    # memory set's 4 questions on "the `to` of every relation" were all written wrong
    if complete and name_key and not others and 1 < len(dicts) <= _MAX_NAMES:
        answer = ", ".join(str(x[name_key]) for x in dicts)
        if len(answer) <= 3 * _MAX_ANSWER_CHARS:
            rule = AnswerRule(kind="names", path=list(path), name_key=name_key)
            names = Fact(rule, answer, f"the `{name_key}` of every entry{label}, in order", [], 0.8)
            names.kinds, names.narrowing = kinds, narrowing
            out.append(names)
    if complete and len(dicts) == len(items):
        out += _group_facts(dicts, path, label, name_key, kinds, narrowing)
    for obj in dicts[:12] if name_key else []:
        name = str(obj[name_key])
        selector = {"key": name_key, "equals": obj[name_key]}
        if not others:
            out += _field_facts(
                obj, [*path, selector], f" of '{name}'{label}", [[name]], arg_values, dated, now_result
            )
            continue
        # An element with no name field is named by its short text fields together (a relation by its
        # `from`, `to` and `relationType`): a question naming only the one field that happens to be
        # distinct (`to`) lets the writer invent the rest (measured: 5 of 13 memory-graph references
        # read wrong, "the relationship between Ines and Paul" answered with Anna's relation to Ines).
        ident = {k: str(obj[k]) for k in [name_key, *others]}
        for fact in _field_facts(obj, [*path, selector], "", [], arg_values, dated, now_result):
            key = fact.rule.path[-1]
            named = {k: v for k, v in ident.items() if k != key}
            if any(fact.answer.lower() == v.lower() for v in named.values()):
                continue  # the answer is one of the names the question must say
            if sum(all(str(x.get(k)) == v for k, v in named.items()) for x in dicts) != 1:
                continue  # what the question names fits several elements (Lena Park's commits)
            fact.mentions = [[v] for v in named.values()]
            fact.what = fact.what + " of the entry with " + ", ".join(f"{k} '{v}'" for k, v in named.items()) + label
            out.append(fact)
    return out


_MAX_GROUP_KEYS = 2
_MAX_GROUP_VALUES = 3


def _group_keys(dicts: list[dict[str, Any]], name_key: str | None) -> list[str]:
    """Fields that sort a list's elements into groups (`author` of commits, `entityType` of entities,
    `type` of [FILE]/[DIR] entries): short words every element has, some shared by several elements."""
    keys = []
    for k in dicts[0] if dicts else {}:
        values = [x.get(k) for x in dicts]
        if k == name_key or is_id_like(k) or not all(
            isinstance(v, str) and 0 < len(v.strip()) <= 40 and "\n" not in v and parse_datetime(v) is None
            for v in values
        ):
            continue
        if opaque(dicts, k) or not 2 <= len(set(values)) < len(values) or _crossed(dicts, k):
            continue
        keys.append(k)
    return keys[:_MAX_GROUP_KEYS]


def _crossed(dicts: list[dict[str, Any]], key: str) -> bool:
    """Some value of `key` is also a value of another field (Ines is the `from` of one relation and the
    `to` of another): a role, and "how many relations has Ines" reads both roles."""
    values = {x.get(key) for x in dicts}
    return any(v in values for x in dicts for k, v in x.items() if k != key and isinstance(v, str))


def _group_facts(
    dicts: list[dict[str, Any]],
    path: list[Any],
    label: str,
    name_key: str | None,
    kinds: list[list[str]],
    narrowing: list[str],
) -> list[Fact]:
    """Counts and names of the elements of one group ("how many commits did Lena Park make?", "which
    files does the folder hold?"): a question about some of a list by what they share. Before these, a
    git log gave only per-commit facts (24 candidates for 48 tasks, 2026-12-05)."""
    out: list[Fact] = []
    kind_of = {w: kind for kind in kinds for w in kind}
    for k in _group_keys(dicts, name_key):
        counts = Counter(str(x[k]) for x in dicts)
        for v, n in counts.most_common(_MAX_GROUP_VALUES):
            where = {"key": k, "equals": v}
            own = kind_of.get(v.lower())
            # a kind is named by its words (FILE: file, files); another kind named in the plural asks for
            # those too ("how many files and folders"), in the singular it may be where they are ("in
            # the folder docs")
            mentions = [] if own else [[v]]
            avoid = [w for kind in kinds if kind is not own for w in kind if w.endswith("s")] if own else []
            rest = [x for x in narrowing if x.lower() != v.lower()]
            what = f"how many entries{label} have `{k}` '{v}'"
            count = Fact(AnswerRule(kind="count", path=list(path), where=where), str(n), what, mentions, 0.8)
            count.avoid, count.narrowing, count.of_kind = avoid, rest, own or []
            out.append(count)
            if name_key is None or not 2 <= n <= _MAX_NAMES or _crossed(dicts, name_key):
                continue
            answer = ", ".join(str(x[name_key]) for x in dicts if str(x[k]) == v)
            if len(answer) <= 3 * _MAX_ANSWER_CHARS:
                rule = AnswerRule(kind="names", path=list(path), name_key=name_key, where=where)
                names = Fact(rule, answer, f"the `{name_key}` of every entry{label} with `{k}` '{v}', in order", mentions, 0.8)
                names.avoid, names.narrowing, names.of_kind = avoid, rest, own or []
                out.append(names)
    return out


def _entry_values(items: list[Any], kinds: list[list[str]]) -> list[str]:
    """The short text values of a list's entries (each entry, or the fields of each element), less the
    kind words: a count question may say "files and folders" but not name one relation's end (measured:
    2 of 14 memory-graph count references asked "how many relations between Ines, Paul and Anna?")."""
    kind_words = {w for kind in kinds for w in kind}
    dicts = [x for x in items if isinstance(x, dict)]
    shared = {k for k in (dicts[0] if dicts else {}) if len({str(x.get(k)) for x in dicts}) == 1}  # `type: relation`
    values = [
        v
        for x in items[:50]
        for v in ([v for k, v in x.items() if k not in shared] if isinstance(x, dict) else [x])
        if isinstance(v, str) and 3 <= len(v.strip()) <= 60 and "\n" not in v and parse_datetime(v) is None
    ]
    return [v for v in dict.fromkeys(v.strip() for v in values) if v.lower() not in kind_words]


def _identifying_keys(dicts: list[dict[str, Any]], name_key: str) -> list[str]:
    """Other fields a question must name to pick out one element, when the handle is not a name field
    (`name`, `title`...) nor an id: the short text fields every element has that differ between elements,
    not ids or times, at most two."""
    if name_key in _NAME_KEYS or all(ID_VALUE.fullmatch(str(x[name_key])) for x in dicts):
        return []  # a name, or an id (a commit hash, a SKU): it picks the element out by itself
    keys = [
        k
        for k in dicts[0]
        if k != name_key
        and not is_id_like(k)
        and all(
            isinstance(x.get(k), str) and 0 < len(x[k]) <= 60 and "\n" not in x[k] and parse_datetime(x[k]) is None
            for x in dicts
        )
        and not opaque(dicts, k)  # a hash picks the element out, but no one says it with its message
        and len({x[k] for x in dicts}) > 1  # the same in every element (`type: relation`) tells none apart
    ]
    return keys[:2]


def extract_facts(
    result_text: str,
    arguments: dict[str, Any] | None = None,
    now: datetime | None = None,
    known_kinds: dict[str, set[str]] | None = None,
) -> list[Fact]:
    """Every answer a question could have, read from one result (call_index -1 in the rule).

    The result is read through `result_data`, so plain-text replies (a listing, `Key: value` records)
    give the same kinds of facts as JSON. A count that only repeats the length of a list the call was
    given (the `count` of `describe(numbers=[...])`) is no question. `known_kinds`: the kinds each
    list held anywhere in the exploration (`list_kinds`), words a count of another list avoids."""
    arg_values = {format_value(v).lower() for v in (arguments or {}).values() if _scalar(v)}
    given_lengths = {str(len(v)) for v in (arguments or {}).values() if isinstance(v, list)}
    data = result_data(result_text)
    if data is None:
        t = result_text.strip()
        # not a placeholder for an image or a file (`[resource file:///...: mime, N bytes]`): a user
        # could never say it back
        # nor a report of nothing found or of an error: a question whose answer is "No matches found"
        # asks about an argument exploration made up (measured: 4 of 24 filesystem tasks searched for
        # the placeholder pattern 'example')
        # nor our own note for an empty result (git's remote branches of a repository with no remote:
        # "(the tool returned no content)" was kept as the reference answer of a question, 2026-12-05)
        if t == EMPTY_RESULT:
            return []
        # nor a heading with nothing under it: git's "Diff with 43cb800...:" of a commit against itself
        # was the whole reply of a candidate question (2026-12-06)
        if t and "\n" not in t and len(t) <= 150 and not _PLACEHOLDER.match(t) and not _NOTHING.search(t) and not t.endswith(":"):
            return [Fact(AnswerRule(kind="text"), t, "the whole reply", [], 0.3)]
        return []
    near_now, near_today = _now_anchored(data, now or datetime.now(UTC), timedelta(minutes=10))
    facts: list[Fact] = []
    if isinstance(data, list):
        facts += _list_facts(data, [], "", arg_values, near_today, now_result=near_now)
    elif isinstance(data, dict):
        facts += _field_facts(data, [], "", [], arg_values, near_today, near_now)
        counts = [
            v
            for k, v in data.items()
            if COUNT_KEY.search(k) and isinstance(v, int) and not isinstance(v, bool)
        ]
        for k, v in data.items():
            if isinstance(v, dict):
                facts += _field_facts(v, [k], f" in `{k}`", [], arg_values, near_today, near_now)
            elif isinstance(v, list) and v:
                complete = all(c == len(v) for c in counts)
                facts += _list_facts(v, [k], f" in `{k}`", arg_values, near_today, complete, near_now)
        _not_in_other_lists_words(data, facts, known_kinds or {})
        if DIFF_KEY in data and (against := _compared_with(result_text, arguments or {})):
            for f in facts:
                if f.rule.path and f.rule.path[0] == DIFF_KEY:
                    f.compares = against
                    f.what += f" (the changes between '{against}' and now, not those made in '{against}' alone)"
    given = _given_values(arguments or {})
    for f in facts:
        f.dated = f.dated or near_now
        if f.rule.kind == "count" and f.rule.where is None and len(f.rule.path) <= 1:
            items = data.get(f.rule.path[0]) if f.rule.path and isinstance(data, dict) else data
            reach = _reach(items, given) if isinstance(items, list) else ""
            f.what, f.reaches = f.what + reach, bool(reach)
    return [f for f in facts if not (f.answer in given_lengths and _counts(f.rule)) and not _counts_the_given(f, data, given)]


def _counts_the_given(fact: Fact, data: Any, given: set[str]) -> bool:
    """A count of a list whose every entry is named by a value the call was given: `search_nodes` on
    "Lycee Ampere" found the school itself, and its count of 1 was asked as "How many organizations
    are associated with the Lycee Ampere school?" (and "How many people named Ines Moreau are
    listed?" -> 1), 2 of 20 memory tasks read by hand, 2026-12-07: the count says only that the
    given thing exists."""
    if fact.rule.kind != "count" or fact.rule.where is not None or len(fact.rule.path) > 1:
        return False
    items = data.get(fact.rule.path[0]) if fact.rule.path and isinstance(data, dict) else data
    if not isinstance(items, list) or not items or not all(isinstance(x, dict) for x in items):
        return False
    names = [name_of(x) for x in items]
    return all(n is not None and n.lower() in given for n in names)


_COMPARING = re.compile(r"\b(with|between|against|since|vs\.?|versus|and)\b", re.IGNORECASE)


def _compared_with(text: str, arguments: dict[str, Any]) -> str:
    """The given value a diff was made against, when its first line says so ("Diff with 8edfb38:",
    "Changes between v1 and HEAD"); "" for a diff of one change (git's `show` opens "commit 8edfb38")."""
    first = text.strip().split("\n", 1)[0]
    if not _COMPARING.search(first):
        return ""
    given = [str(v) for v in arguments.values() if isinstance(v, str | int) and len(str(v)) >= 3]
    return next((v for v in given if v in first), "")


_KIND_FIELD = re.compile(r"(type|kind|category|class)$", re.IGNORECASE)  # entityType, type, category


def list_kinds(data: Any) -> dict[str, set[str]]:
    """Per list of a result, the one-word kinds its entries hold (`entityType: person`)."""
    if not isinstance(data, dict):
        return {}
    return {
        k: {
            v.lower()
            for x in items if isinstance(x, dict)
            for key, v in x.items()
            if _KIND_FIELD.search(key) and isinstance(v, str) and re.fullmatch(r"[A-Za-z]{3,20}", v)
        }
        for k, items in data.items() if isinstance(items, list)
    }  # fmt: skip


def _not_in_other_lists_words(data: dict[str, Any], facts: list[Fact], known: dict[str, set[str]]) -> None:
    """A result holding several lists (a graph's `entities` and `relations`): a count of one list's
    entries may not be asked in the words of another's: its name, or the one-word kinds of its
    entries, in this result or anywhere `known` saw that list. Measured 2026-12-07 on the memory
    graph: "How many people are married to anyone?" -> 1 (the `married to` relations) and "How many
    organizations are associated with 'Pharmacie du Parc'?" -> 1 (its relations), 2 of 20 tasks read
    by hand, both wrong; and, with only this result's kinds, "How many organizations are related to
    the Porto trip?" -> 1 (its one relation, to a person: no organization was in that result)."""
    lists = {k: v for k, v in data.items() if isinstance(v, list) and v}
    if len(lists) < 2:
        return
    here = list_kinds(data)
    words: dict[str, list[str]] = {}
    for k in lists:
        singular = re.sub(r"ies$", "y", k) if k.endswith("ies") else re.sub(r"(?<!s)s$", "", k)
        kinds = here.get(k, set()) | known.get(k, set())
        words[k] = word_forms(singular) + [w for kind in sorted(kinds) for w in word_forms(kind)]
    for f in facts:
        if f.rule.kind == "count" and f.rule.path and f.rule.path[0] in lists:
            own = set(words[f.rule.path[0]])
            other = [w for k, ws in words.items() if k != f.rule.path[0] for w in ws if w not in own]
            f.avoid = list(dict.fromkeys([*f.avoid, *other]))


def _given_values(arguments: dict[str, Any]) -> set[str]:
    """The scalar values a call was given, each entry of an array argument too, as a question says them."""
    leaves = [x for v in arguments.values() for x in (v if isinstance(v, list) else [v])]
    return {format_value(x).lower() for x in leaves if _scalar(x)}


def _reach(items: list[Any], given: set[str]) -> str:
    """How a counted list relates to the values the call was given, when every entry holds one of them
    but some also hold others: the memory graph's `open_nodes` on three people returned the 5 relations
    that touch any of them, and the question asked "how many relations are there between" them (2 of 20
    tasks read by hand, 2026-12-04). Said in the fact, the writer can ask for what was counted."""
    dicts = [x for x in items if isinstance(x, dict)]
    if not given or not dicts or len(dicts) != len(items):
        return ""
    hits = [{k: format_value(v).lower() in given for k, v in x.items() if _scalar(v)} for x in dicts]
    keys = [k for k in hits[0] if any(h.get(k) for h in hits)]
    if not keys or not all(any(h.get(k) for k in keys) for h in hits) or all(all(h.get(k) for k in keys) for h in hits):
        return ""  # not every entry is about a given value, or every one is about given values only
    fields = " or ".join(f"`{k}`" for k in keys)
    return f" (every entry with one of the values given as its {fields}, not only entries among them)"


def _counts(rule: AnswerRule) -> bool:
    key = next((p for p in reversed(rule.path) if isinstance(p, str)), "")
    return rule.kind == "count" or bool(COUNT_KEY.search(key))
