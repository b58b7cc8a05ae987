"""Does a final answer match a reference answer? Deterministic, forgiving about form, strict about content.

A reference is split into items (a JSON list, or text separated by `;`, new lines, `, ` or `and`);
the answer must contain every item. An item matches when its normalized text appears in the
answer, or when every number in it appears in the answer (within a tolerance: 1,234.0 = 1234 =
1234.004) and, if it has two or more other words, most of them do too, or, for an item with no numbers, when all its
content words appear. Yes/no references need the same polarity and not the opposite.
Known leniency: an answer that lists many numbers can match a numeric reference by chance (digits
glued to a word, as in "ITM-006", count only for a reference that has such digits itself).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata

from pydantic import BaseModel

_NUM = re.compile(r"(?<![\w.])(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?|(?<=[A-Za-z_-])(\d+)(\.\d+)?")
_WORD = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")
_SPLIT = re.compile(r"\s*(?:;|\n|,\s+|\band\b)\s*")
# Words that carry no content when checking an item: articles, verbs of being, units and currencies.
_STOP = frozenset(
    {
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
    }
)
_YES = frozenset({"yes", "true", "correct"})
_NO = frozenset({"no", "false", "incorrect"})


class AnswerMatch(BaseModel):
    correct: bool
    how: str
    """Which rule decided: "no answer", "yes/no", "items", "text", "numbers"."""
    missing: list[str] = []
    """Reference items not found in the answer."""


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[^\w.,;:%$\-\s]", " ", text)
    return " ".join(text.split())


def numbers(text: str, glued: bool = True) -> list[float]:
    """Every number written in `text`: thousands separators, decimals, a leading minus; with
    `glued`, also digits glued to a word (the 104 of "SKU-104")."""
    out: list[float] = []
    for m in _NUM.finditer(text):
        if m.group(2) is not None:
            value = float(m.group(2).replace(",", "") + (m.group(3) or ""))
            out.append(-value if m.group(1) else value)
        elif glued:  # never negative
            out.append(float(m.group(4) + (m.group(5) or "")))
    return out


def _words(text: str) -> set[str]:
    return {w.strip(".-_") for w in _WORD.findall(normalize(text))}


def _content_words(text: str) -> set[str]:
    return {w for w in _words(text) if w not in _STOP and not re.fullmatch(r"[\d.,-]+", w)}


def _num_in(value: float, pool: list[float], rel_tol: float, abs_tol: float) -> bool:
    return any(math.isclose(value, x, rel_tol=rel_tol, abs_tol=abs_tol) for x in pool)


def split_items(reference: str) -> list[str]:
    ref = reference.strip()
    try:
        parsed = json.loads(ref)
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        return [json.dumps(x) if isinstance(x, dict | list) else str(x) for x in parsed if str(x).strip()]
    return [p for p in (s.strip(" .") for s in _SPLIT.split(ref)) if p]


_ISO_T = re.compile(r"(\d)[Tt](\d{1,2}:\d{2})")


def _unglue_iso(text: str) -> str:
    """ISO 8601's date-time separator is a letter: "2026-12-02T13:59" holds the time 13:59."""
    return _ISO_T.sub(r"\1 \2", text)


def item_present(item: str, answer: str, rel_tol: float = 0.01, abs_tol: float = 1e-6) -> bool:
    item, answer = _unglue_iso(item), _unglue_iso(answer)
    n_item, n_answer = normalize(item), normalize(answer)
    if n_item and re.search(rf"(?<!\w){re.escape(n_item)}(?!\w)", n_answer):
        return True
    item_nums = numbers(item)
    words = _content_words(item)
    answer_words = _words(answer)
    if item_nums:
        # A standalone number in the reference ("6") is not matched by digits glued to a word in
        # the answer ("time6", "ITM-006"): that let a noisy policy hit a reference by chance.
        glued_ref = len(item_nums) > len(numbers(item, glued=False))
        pool = numbers(answer, glued=glued_ref)
        if not all(_num_in(v, pool, rel_tol, abs_tol) for v in item_nums):
            return False
        # One word next to a number is decoration ("6 in stock"); with more, most must be there.
        return len(words) < 2 or len(words & answer_words) * 2 >= len(words)
    return bool(words) and words <= answer_words


def answer_matches(
    answer: str | None, reference: str, rel_tol: float = 0.01, abs_tol: float = 1e-6
) -> AnswerMatch:
    """Check `answer` against `reference` with the rules in this module's docstring."""
    if not answer or not answer.strip():
        return AnswerMatch(correct=False, how="no answer", missing=[reference])
    ref_words = _words(reference)
    if ref_words and ref_words <= (_YES | _NO) and len(ref_words) == 1:
        positive = bool(ref_words & _YES)
        said = _words(answer)
        said_yes, said_no = bool(said & _YES), bool(said & (_NO | {"not"}))
        ok = (said_yes and not said_no) if positive else (said_no and not said_yes)
        return AnswerMatch(correct=ok, how="yes/no", missing=[] if ok else [reference])
    items = split_items(reference)
    if len(items) > 1:
        missing = [i for i in items if not item_present(i, answer, rel_tol, abs_tol)]
        return AnswerMatch(correct=not missing, how="items", missing=missing)
    ok = item_present(reference, answer, rel_tol, abs_tol)
    return AnswerMatch(
        correct=ok, how="numbers" if numbers(reference) else "text", missing=[] if ok else [reference]
    )
