"""Does a final answer state the reference answer? Deterministic, strict about content, open about form.

An answer is a statement for a person. JSON objects in it (raw, or in a code fence) are no statement:
they are dropped before grading, and an answer that is nothing else (or only "Here is the result:")
is "not a statement" and never correct. A JSON list of plain values reads as a list of those values.

The reference decides how the answer is read, by the type of what it states (values are read by
`judges.values`, the one parser shared with the faithfulness checks):
- yes/no ("yes", "no", "true", "false"): what the answer claims. A leading yes/no decides, unless
  its sentence also says the opposite ("Yes, it is not" claims nothing); without one, a negation
  claims "no" ("It is not daylight saving time there") and "yes"/"true" claims yes. A non-answer
  ("No idea", "I could not find") claims nothing, so it fails either reference.
- a value (a number, a date, a clock time, a day or month name, an id): the answer must state the
  same value, in any written form, by the rules of `judges.values.same` (integers exactly, decimals
  to the reference's precision, dates and times exactly; "6:30 pm" is 18:30, "1,234" is 1234).
  One value where one is asked: every value of the same kind the answer states must be the
  reference's ("101 units" fails 100; ten numbers listed for a numeric reference fail), except values
  the question itself gives (`context`, the task text: the 100 of "How many items cost under 100?").
  A number written as a word ("six") counts only when the answer writes no number in digits.
- a name (a few words, no values but perhaps a model code like "4P"): the same words in order, case-
  and punctuation-insensitive, whole ("ITM-017" is not in "ITM-0170"); `_` reads as a space.
- longer text without values: every content word must be there.
- text with values and words ("6 in stock", "SKU-104: 7"): its values as above; with two or more
  content words besides, at least half of them too.
- a list (a JSON list, or items separated by `;`, new lines, ", " or "and"): a set, order free; every
  item must be there (`.missing` names those that are not), and the answer's values of the items'
  kinds must each be one of the items' values. With `complete` (the reference lists all of
  something, answer rule kind "names"), the answer must also not name items the reference lacks:
  every short part of the answer's own list (split the same way, after a "...:" lead-in) must hold
  a reference item (`.extra` names those that do not).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from judges.values import Value, extract_values, masked_text, normalize, number_words, same, words

__all__ = [
    "AnswerMatch",
    "answer_matches",
    "item_present",
    "json_spans",
    "normalize",
    "phrase_in",
    "polar_reference",
    "polarity",
    "split_items",
    "statement",
]

_SPLIT = re.compile(r"\s*(?:;|\n|,\s+|\band\b)\s*")
# Words that carry no content when checking an item: articles, verbs of being, units and currencies.
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "is",
        "are",
        "was",
        "were",
        "be",
        "in",
        "on",
        "at",
        "for",
        "to",
        "and",
        "or",
        "with",
        "by",
        "from",
        "it",
        "its",
        "this",
        "that",
        "there",
        "their",
        "has",
        "have",
        "had",
        "as",
        "per",
        "total",
        "units",
        "unit",
        "items",
        "item",
        "currently",
        "usd",
        "dollar",
        "dollars",
        "eur",
        "euro",
        "euros",
        "gbp",
        "we",
        "you",
        "they",
        "i",
        "our",
    ]
)
# What is left of an answer once its JSON is dropped, when it said nothing itself.
_FILLER = _STOP | frozenset(
    [
        "here",
        "result",
        "results",
        "output",
        "response",
        "json",
        "data",
        "tool",
        "returned",
        "return",
        "returns",
        "answer",
        "final",
        "below",
        "above",
        "following",
        "call",
        "function",
        "shows",
        "show",
        "got",
    ]
)
_YES = frozenset({"yes", "yeah", "yep", "true"})
_NO = frozenset({"no", "nope", "false"})
_NEGATION = re.compile(r"\b(?:not|never|no longer|none|neither|nor)\b|n't\b", re.IGNORECASE)
_NON_ANSWER = re.compile(
    r"\b(?:no idea|not sure|unsure|(?:do not|don'?t|does not|doesn'?t) know|"
    r"(?:cannot|can'?t|could not|couldn'?t|unable to) (?:tell|say|determine|find|know|access|check)|"
    r"unclear|uncertain|unknown)\b",
    re.IGNORECASE,
)
_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)```", re.DOTALL)


class AnswerMatch(BaseModel):
    correct: bool
    how: str
    """Which rule decided: "no answer", "not a statement", "yes/no", "items", "name", "text", or the
    kind of the one value the reference states ("number", "date", "time", "day", "month", "id"),
    "values" for several."""
    missing: list[str] = []
    """Reference items not found in the answer."""
    conflicting: list[str] = []
    """Values of the reference's kinds the answer states that the reference does not."""
    extra: list[str] = []
    """For a complete list: what the answer lists that the reference lacks."""


# --- the answer as a statement -------------------------------------------------------------------
def json_spans(text: str) -> list[tuple[int, int, Any]]:
    """Every JSON object or array written in `text`: (start, end, value)."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            out.append((i, end, value))
            i = end
        else:
            i += 1
    return out


def _plain_list(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(x, dict | list) for x in value)


def statement(answer: str) -> str | None:
    """The answer as prose a person reads: code fences opened, JSON objects (and lists holding them)
    dropped, a JSON list of plain values written as "a, b, c". None when nothing but filler is left."""
    text = _FENCE.sub(lambda m: f" {m.group(1)} ", answer)
    spans = json_spans(text)
    if not spans:
        return text.strip() or None
    out, pos, dropped = [], 0, False
    for start, end, value in spans:
        out.append(text[pos:start])
        if _plain_list(value):
            out.append(", ".join(str(x) for x in value))
        else:
            dropped = True
        pos = end
    out.append(text[pos:])
    rest = " ".join("".join(out).split())
    if dropped and not any(w not in _FILLER for w in words(rest)):
        return None
    return rest or None


# --- yes / no ------------------------------------------------------------------------------------
def polarity(text: str) -> Literal["yes", "no"] | None:
    """What a sentence claims to a yes/no question (rules in the module docstring)."""
    if _NON_ANSWER.search(text):
        return None
    ws = words(text)
    if not ws:
        return None
    lead = ws[0]
    if lead in _YES or lead in _NO:
        first = re.split(r"(?<=[.!?;])\s", text.strip(), maxsplit=1)[0]
        opposite = _NO if lead in _YES else _YES
        if set(ws) & opposite or (lead in _YES and _NEGATION.search(first)):
            return None
        return "yes" if lead in _YES else "no"
    says_yes, says_no = bool(set(ws) & _YES), bool(set(ws) & _NO) or bool(_NEGATION.search(text))
    if says_yes == says_no:
        return None
    return "yes" if says_yes else "no"


def polar_reference(reference: str) -> Literal["yes", "no"] | None:
    """The claim of a yes/no reference ("yes", "No.", "true", "false"); None for any other."""
    ws = words(reference)
    if len(ws) == 1 and ws[0] in _YES | _NO:
        return "yes" if ws[0] in _YES else "no"
    return None


# --- items ---------------------------------------------------------------------------------------
def split_items(reference: str) -> list[str]:
    """A reference's items: a JSON list's elements, else its parts between `;`, new lines, ", " and
    "and" (never inside a value: "December 3, 2026" is one item)."""
    ref = reference.strip()
    try:
        parsed = json.loads(ref)
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        return [json.dumps(x) if isinstance(x, dict | list) else str(x) for x in parsed if str(x).strip()]
    masked = masked_text(ref, fill="#")
    out, pos = [], 0
    for m in _SPLIT.finditer(masked):
        out.append(ref[pos : m.start()])
        pos = m.end()
    out.append(ref[pos:])
    return [p for p in (s.strip(" .") for s in out) if p]


def _content(text: str) -> set[str]:
    return {w for w in words(masked_text(text)) if w not in _STOP}


@dataclass
class _Item:
    text: str
    values: list[Value]
    content: set[str]
    style: Literal["name", "text", "typed"]


def _item(text: str) -> _Item:
    values = extract_values(text)
    # A day or month written inside a date is part of that date, not a second thing to state.
    dates = [v for v in values if v.kind == "date"]
    values = [
        v
        for v in values
        if not (v.kind in ("day", "month") and any(d.start <= v.start and v.end <= d.end for d in dates))
    ]
    content = _content(text)
    if not values or (all(v.kind == "id" for v in values) and content):
        style: Literal["name", "text", "typed"] = "name" if len(words(text)) <= 6 else "text"
        return _Item(text, [], content, style)
    return _Item(text, values, content, "typed")


def phrase_in(phrase: str, text: str) -> bool:
    """Is `phrase` written in `text`, whole words, ignoring case, punctuation and `_` vs space?"""
    p = normalize(phrase).strip(" .,;:")
    return bool(p) and re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-]|\.\w)", normalize(text)) is not None


class _Answer:
    """An answer's statement, read once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.values = extract_values(text)
        if not any(v.kind == "number" for v in self.values):
            self.values += number_words(text)
        self.words = set(words(text))


def _present(item: _Item, answer: _Answer) -> bool:
    if item.style == "name":
        return phrase_in(item.text, answer.text)
    if item.style == "text":
        return bool(item.content) and item.content <= answer.words
    if not all(any(same(r, a) for a in answer.values) for r in item.values):
        return False
    # One word next to a value is decoration ("6 in stock"); with more, at least half must be there.
    return len(item.content) < 2 or len(item.content & answer.words) * 2 >= len(item.content)


def item_present(item: str, answer: str) -> bool:
    """Is one reference item stated in `answer` (by the rules for its type)?"""
    return _present(_item(item), _Answer(answer))


def _conflicts(items: list[_Item], answer: _Answer, context: list[Value]) -> list[str]:
    ref_values = [v for it in items for v in it.values]
    kinds = {v.kind for v in ref_values}
    out = []
    for a in answer.values:
        if a.kind not in kinds or any(same(r, a) for r in ref_values):
            continue
        if any(same(c, a) or same(a, c) for c in context):
            continue  # the question's own value, said back
        out.append(a.text)
    return list(dict.fromkeys(out))


def _extras(items: list[_Item], text: str) -> list[str]:
    lines = [
        ln.split(":")[-1] if ":" in ln and not re.search(r"\d:\d", ln) else ln for ln in text.split("\n")
    ]
    out = []
    for part in split_items("\n".join(lines)):
        part = re.sub(r"^\s*(?:[-*•]|\d{1,2}[.)])\s*", "", part).strip(" .!")
        ws = words(part)
        if not ws or len(ws) > 6 or not any(w not in _FILLER for w in ws):
            continue  # a sentence around the list, not an entry of it
        answer = _Answer(part)
        if not any(_present(it, answer) for it in items):
            out.append(part)
    return out


def answer_matches(
    answer: str | None, reference: str, *, complete: bool = False, context: str = ""
) -> AnswerMatch:
    """Check `answer` against `reference` with the rules in this module's docstring. `complete`: the
    reference lists all of something, so extra items are wrong; `context`: the task's text, whose
    values the answer may say back without stating a second value."""
    if not answer or not answer.strip():
        return AnswerMatch(correct=False, how="no answer", missing=[reference])
    text = statement(answer)
    if text is None:
        return AnswerMatch(correct=False, how="not a statement", missing=[reference])
    polar = polar_reference(reference)
    if polar is not None:
        ok = polarity(text) == polar
        return AnswerMatch(correct=ok, how="yes/no", missing=[] if ok else [reference])
    items = [_item(p) for p in split_items(reference) or [reference.strip()]]
    said = _Answer(text)
    missing = [it.text for it in items if not _present(it, said)]
    conflicting = _conflicts(items, said, extract_values(context) if context else [])
    extra = _extras(items, text) if complete else []
    if len(items) > 1:
        how = "items"
    elif items[0].style != "typed":
        how = items[0].style
    else:
        kinds = {v.kind for v in items[0].values}
        how = kinds.pop() if len(kinds) == 1 and len(items[0].values) == 1 else "values"
    return AnswerMatch(
        correct=not (missing or conflicting or extra),
        how=how,
        missing=missing,
        conflicting=conflicting,
        extra=extra,
    )
