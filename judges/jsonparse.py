"""Pull one JSON value out of what a language model actually wrote.

Small judges wrap JSON in ```json fences, add a sentence before or after it, use single quotes
or Python literals (True/None), or leave a trailing comma. This module recovers the value when
that is unambiguous and otherwise says precisely why it could not, so the repair prompt can tell
the judge what to fix.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON|javascript|js)?\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


class JsonExtractError(ValueError):
    """No JSON value could be recovered; the message says why, in words fit for a repair prompt."""


def _balanced_spans(text: str) -> list[str]:
    """Every top-level {...} or [...] span, found by bracket matching that respects strings."""
    spans: list[str] = []
    depth = 0
    start = -1
    quote: str | None = None
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'" and depth > 0:
            quote = ch
        elif ch in "{[":
            if depth == 0:
                start = i
            depth += 1
        elif ch in "}]" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    if depth > 0 and start >= 0:
        # An unclosed value (the judge ran out of tokens): keep it so the error can say so.
        spans.append(text[start:])
    return spans


def _loads_lenient(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        pass
    fixed = _TRAILING_COMMA.sub(r"\1", candidate)
    try:
        return json.loads(fixed)
    except json.JSONDecodeError:
        pass
    # Python-literal style: single quotes, True/False/None. literal_eval never executes code.
    pythonish = re.sub(r"\btrue\b", "True", fixed)
    pythonish = re.sub(r"\bfalse\b", "False", pythonish)
    pythonish = re.sub(r"\bnull\b", "None", pythonish)
    try:
        return ast.literal_eval(pythonish)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    raise JsonExtractError("it is not valid JSON")


def extract_json(text: str, want: type | tuple[type, ...] = (dict, list)) -> Any:
    """Return the first JSON value of type `want` found in `text`.

    Looks in fenced blocks first, then at every balanced bracket span, in order. Raises
    `JsonExtractError` with a short reason when nothing usable is there.
    """
    if not text or not text.strip():
        raise JsonExtractError("the reply was empty")
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    candidates.append(text.strip())
    for block in list(candidates):
        candidates.extend(_balanced_spans(block))
    last_error = "no JSON object was found in the reply"
    truncated = False
    for cand in candidates:
        cand = cand.strip()
        if not cand or cand[0] not in "{[":
            continue
        try:
            value = _loads_lenient(cand)
        except JsonExtractError as e:
            last_error = f"the JSON could not be parsed ({e})"
            opens = cand.count("{") + cand.count("[")
            closes = cand.count("}") + cand.count("]")
            truncated = truncated or opens > closes
            continue
        if isinstance(value, want):
            return value
        last_error = f"the JSON was a {type(value).__name__}, not an object"
    if truncated:
        raise JsonExtractError("the JSON was cut off before it was closed (keep explanations shorter)")
    raise JsonExtractError(last_error)
