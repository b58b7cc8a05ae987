"""Faithfulness: is an answer a statement of what the tools returned, and were the calls made with data
the episode had? Pure functions over texts and call records, no model.

- `pasted_result`: an answer that is mostly a tool result's text (raw JSON, a code fence of JSON, or
  a result copied whole or mostly: 40+ characters and 60% of the answer's in runs of 3+ words found
  in one result) is a paste, not an answer. A short answer stating a value a result holds ("20.0",
  "The result is 20.") is not. A result that is one plain line of at most 150 characters is already
  a sentence for a person: saying it back is no paste.
- `unsupported_values`: the values an answer states (numbers, dates, clock times, ids, read by
  `judges.values`, the grader's own parser) that neither the task text nor an OK tool result holds.
  A result supports a value written in another form (20:05 supports "8:05 pm", 2026-12-03 supports
  "December 3"), the weekday and month of its dates, a decimal rounded to one or more places
  (482.99 supports "483.0", not "483"), and the length of every JSON list in it (a count).
- `invented_arguments`: argument values of a call that neither the task text nor the results of
  calls of an earlier turn hold. Strict on numbers (a list of numbers is judged number by number;
  the task's number words count: "five" gives 5), dates, times and ids, by the same support rule. Lenient on free strings: one is supported when
  it is written in the sources, when one of its words (3+ letters) is a word of the sources or
  shares its first 4+ letters with one ("lights" for "lighting"), when it is one of the schema's
  enum choices (when `schemas` are given), or when it is a single word under a key that names a
  choice (`sort_by`, `order`, `unit`, ...). Not data, never flagged: booleans, nulls, empty strings,
  and an integer from 0 to 100 under a key that names a bound or a count (`limit`, `top_k`, `page`,
  `offset`, ...; not inside a list).
- `reference_supported`: the same support rule for a grounded task's reference answer: can the
  episode's OK results have told it?
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, NamedTuple

from judges.answers import json_spans, phrase_in, polar_reference, split_items, statement
from judges.values import (
    Value,
    extract_values,
    implied,
    json_leaves,
    json_list_lengths,
    number_words,
    same,
    words,
)
from mcp_rl.answer_rule import result_data, result_json
from mcp_rl.servers.results import CallStatus
from mcp_rl.trajectory import ToolCallRecord

_CHECKED = ("number", "date", "time", "id")
_BOUND_KEY = re.compile(
    r"^(?:limit|top|top_?k|k|n|page|page_?size|per_?page|offset|skip|size|max_?results|num_?results|"
    r"max_?items|count|depth|max_?depth)$",
    re.IGNORECASE,
)
_CHOICE_KEY = re.compile(
    r"(?:^|_)(?:sort|order|by|direction|mode|format|unit|units|type|kind|field|lang|language|style|scope)$",
    re.IGNORECASE,
)
_PLAIN_LINE_CHARS = 150
_MIN_COPY = 40


# --- pastes --------------------------------------------------------------------------------------
def pasted_result(answer: str, results: list[str]) -> str | None:
    """Why `answer` is a paste of a tool result, or None when it is an answer of its own."""
    text = answer.strip()
    if not text:
        return None
    objects = sum(end - start for start, end, v in json_spans(text.replace("```", "   ")) if _structured(v))
    if objects and statement(text) is None:
        return "the answer is raw JSON (a tool result's form), not a statement"
    if objects * 2 >= len(text):
        return f"the answer is mostly raw JSON ({objects} of its {len(text)} characters)"
    said = text.split()
    for i, result in enumerate(results):
        r = result.split()
        if not r or (
            result_json(result) is None and "\n" not in result.strip() and len(result) <= _PLAIN_LINE_CHARS
        ):
            continue
        copied = _copied_chars(said, r)
        if copied >= _MIN_COPY and copied * 10 >= sum(map(len, said)) * 6:
            return f"the answer copies tool result {i + 1} ({copied} of its {sum(map(len, said))} characters)"
    return None


def _copied_chars(said: list[str], result: list[str], n: int = 3) -> int:
    """Characters of the answer's words that lie in a run of `n` or more words found in the result
    (a linear measure of copying, whatever the lengths)."""
    grams = {tuple(result[i : i + n]) for i in range(len(result) - n + 1)}
    covered = [False] * len(said)
    for i in range(len(said) - n + 1):
        if tuple(said[i : i + n]) in grams:
            covered[i : i + n] = [True] * n
    return sum(len(w) for w, c in zip(said, covered, strict=True) if c)


def _structured(value: Any) -> bool:
    return isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(x, dict | list) for x in value)
    )


# --- values --------------------------------------------------------------------------------------
def source_values(texts: Iterable[str]) -> list[Value]:
    """Every value the texts hold, with what they imply: weekdays and months of dates, list lengths."""
    out: list[Value] = []
    for text in texts:
        vals = extract_values(text)
        out += vals + implied(vals)
        data = result_data(text)  # a text listing's length is a count an answer may state too
        if data is not None:
            out += [_number(n) for n in json_list_lengths(data)]
    return out


def _number(x: int | float | Decimal) -> Value:
    d = Decimal(str(x))
    places = max(0, -d.as_tuple().exponent) if isinstance(d.as_tuple().exponent, int) else 0
    return Value("number", str(x), (d,), places=places)


def supported(v: Value, sources: list[Value]) -> bool:
    """Does one of `sources` hold `v`, in any written form (rules in the module docstring)?"""
    for s in sources:
        if same(s, v) or (v.kind in ("date", "time") and same(v, s)):
            return True
        if v.kind == s.kind == "number" and 1 <= v.places < s.places:
            quantum = Decimal(1).scaleb(-v.places)
            if s.key[0].quantize(quantum, rounding=ROUND_HALF_UP) == v.key[0]:
                return True
    return False


def unsupported_values(answer: str, task_text: str, results: list[str]) -> list[str]:
    """The values `answer` states that neither `task_text` nor any of `results` (the episode's OK
    tool results) holds, as written in the answer."""
    sources = source_values([task_text, *results])
    out = [v.text for v in extract_values(answer) if v.kind in _CHECKED and not supported(v, sources)]
    return list(dict.fromkeys(out))


def reference_supported(reference: str, results: list[str]) -> bool:
    """Can the reference answer come from `results`? Its values by the support rule; an item without
    values (a name) written in a result; a yes/no from a result holding a boolean or a yes/no word."""
    if not results:
        return False
    if polar_reference(reference) is not None:
        for r in results:
            data = result_json(r)
            leaves = json_leaves(data) if data is not None else []
            if any(isinstance(x, bool) for x in leaves) or set(words(r)) & {"yes", "no", "true", "false"}:
                return True
        return False
    sources = source_values(results)
    for item in split_items(reference) or [reference]:
        vals = [v for v in extract_values(item) if v.kind in _CHECKED]
        if vals:
            if not all(supported(v, sources) for v in vals):
                return False
        elif not any(phrase_in(item, r) for r in results):
            return False
    return True


# --- arguments -----------------------------------------------------------------------------------
def _leaves(value: Any, path: str, key: str, in_list: bool = False) -> list[tuple[str, str, Any, bool]]:
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _leaves(v, f"{path}.{k}" if path else str(k), str(k))]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _leaves(v, f"{path}[{i}]", key, True)]
    return [(path, key, value, in_list)]


def _enum_choices(schema: Mapping[str, Any] | None) -> set[str]:
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for choice in node.get("enum", []) or []:
                out.add(str(choice).lower())
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return out


def _word_supported(word: str, source_words: set[str]) -> bool:
    if word in source_words:
        return True
    if len(word) < 4:
        return False
    return any(len(s) >= 4 and _common_prefix(word, s) >= 4 for s in source_words)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _string_words(value: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", value)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if len(w) >= 3]


def _argument_ok(
    key: str,
    value: Any,
    in_list: bool,
    sources: list[Value],
    source_text: str,
    source_words: set[str],
    choices: set[str],
) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        if isinstance(value, int) and not in_list and _BOUND_KEY.match(key) and 0 <= value <= 100:
            return True
        return supported(_number(value), sources)
    text = str(value).strip()
    if not text:
        return True
    if text.lower() in choices:
        return True
    if re.fullmatch(r"\d+", text) and not in_list and _BOUND_KEY.match(key) and int(text) <= 100:
        return True
    vals = [v for v in extract_values(text) if v.kind in _CHECKED]
    if vals:
        return all(supported(v, sources) for v in vals)
    if phrase_in(text, source_text):
        return True
    ws = _string_words(text)
    if any(_word_supported(w, source_words) for w in ws):
        return True
    return bool(_CHOICE_KEY.search(key)) and re.fullmatch(r"[A-Za-z_-]{1,24}", text) is not None


class _Sources(NamedTuple):
    values: list[Value]
    text: str
    words: set[str]


def invented_arguments(
    calls: list[ToolCallRecord], task_text: str, schemas: Mapping[str, Mapping[str, Any]] | None = None
) -> list[str]:
    """Each argument value (as `tool.path=value`) that comes neither from `task_text` nor from the
    results of calls of an earlier turn; `schemas` (tool name -> its JSON schema), when known, adds
    their enum choices as supported values."""
    out: list[str] = []
    known: dict[int, _Sources] = {}  # what the policy had seen by each turn, read once
    for call in calls:
        if not isinstance(call.arguments, dict):
            continue
        if call.turn not in known:
            earlier = [
                c.result_text
                for c in calls
                if c.turn < call.turn and c.result_text and c.status in (CallStatus.OK, CallStatus.TOOL_ERROR)
            ]
            text = "\n".join([task_text, *earlier])
            known[call.turn] = _Sources(
                source_values([task_text, *earlier]) + number_words(task_text), text, set(words(text))
            )
        sources, source_text, source_words = known[call.turn]
        choices = _enum_choices((schemas or {}).get(call.name))
        for path, key, value, in_list in _leaves(call.arguments, "", ""):
            if not _argument_ok(key, value, in_list, sources, source_text, source_words, choices):
                out.append(f"{call.name}.{path}={json.dumps(value, ensure_ascii=False)}")
    return out
