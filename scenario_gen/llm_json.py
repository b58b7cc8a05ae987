"""Getting structured JSON out of a language model that does not always cooperate.

Small local writers wrap JSON in fences, add chatter after it, return one object where a list was
asked, leak template braces (`{{`), or stop mid-list at the token limit. `parse_lenient` recovers what
can be recovered; `ask_items` validates each item against a pydantic schema and, when nothing usable
came back, asks again with a message that says what was wrong. Nothing here raises on garbage output:
callers get fewer items and a list of problems they can count and report.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from mcp_rl.models.base import ChatModel, Message, SamplingParams

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON|javascript|js)?\s*\n?(.*?)(?:```|$)", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([\]}])")
_SMART_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})
LIST_KEYS = ("tasks", "questions", "items", "data", "results", "arguments", "examples", "requests")


class JsonParseError(ValueError):
    """The text holds no JSON value that could be recovered; the message says why, for the retry prompt."""


def _decode_from(text: str, start: int) -> tuple[Any, int] | None:
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError:
        return None


def _salvage_items(text: str, start: int) -> list[Any]:
    """Parse the complete elements of a JSON array that starts at `start` and may be cut off."""
    items: list[Any] = []
    i = start + 1
    n = len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n or text[i] == "]":
            break
        got = _decode_from(text, i)
        if got is None:
            break
        items.append(got[0])
        i = got[1]
    return items


def _variants(text: str) -> list[str]:
    """The text and progressively repaired versions of it."""
    t = text.strip().translate(_SMART_QUOTES)
    out = [t]
    if "{{" in t or "}}" in t:
        # Qwen2.5-Coder-1.5B's chat template typo leaks doubled braces into outputs.
        out.append(t.replace("{{", "{").replace("}}", "}"))
    out += [_TRAILING_COMMA.sub(r"\1", v) for v in list(out)]
    return list(dict.fromkeys(out))


def _parse_one(text: str) -> Any:
    for t in _variants(text):
        try:
            value = json.loads(t)
            if isinstance(value, dict | list):
                return value
        except json.JSONDecodeError:
            pass
        starts = [i for i in (t.find("{"), t.find("[")) if i >= 0]
        if not starts:
            continue
        start = min(starts)
        got = _decode_from(t, start)
        if got is not None:
            value, end = got
            # Several objects one after another (JSON lines): collect them into a list.
            rest = t[end:].strip()
            if isinstance(value, dict) and rest.startswith("{"):
                values = [value]
                pos = t.find("{", end)
                while pos >= 0:
                    nxt = _decode_from(t, pos)
                    if nxt is None:
                        break
                    values.append(nxt[0])
                    pos = t.find("{", nxt[1])
                return values
            return value
        # Python-style literals (single quotes, True/None) from models that mix languages.
        for end in (t.rfind("]"), t.rfind("}")):
            if end > start:
                try:
                    value = ast.literal_eval(t[start : end + 1])
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
                if isinstance(value, dict | list):
                    return value
        # Cut off at the token limit: keep the complete elements of the first array.
        arr = t.find("[")
        if arr >= 0:
            items = _salvage_items(t, arr)
            if items:
                return items
    raise JsonParseError("no JSON object or list could be read from the reply")


def parse_lenient(text: str) -> Any:
    """Best-effort JSON value from a model reply (fenced blocks first, then the whole text)."""
    if not text or not text.strip():
        raise JsonParseError("the reply was empty")
    candidates = [m.group(1) for m in _FENCE.finditer(text) if m.group(1).strip()]
    errors: list[str] = []
    for cand in [*candidates, text]:
        try:
            return _parse_one(cand)
        except JsonParseError as e:
            errors.append(str(e))
    raise JsonParseError(errors[-1] if errors else "no JSON found")


def coerce_items(value: Any, keys: tuple[str, ...] = LIST_KEYS) -> list[Any]:
    """Whatever came back -> a list of candidate items: a list as is; {"tasks": [...]} -> the list;
    a single item object -> [it]; {"1": {...}, "2": {...}} -> the values."""
    if isinstance(value, list):
        # [[...]] from models that nest once too often
        if len(value) == 1 and isinstance(value[0], list):
            return value[0]
        return value
    if isinstance(value, dict):
        for k in keys:
            if isinstance(value.get(k), list):
                return value[k]
        lists = [v for v in value.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
        if len(lists) == 1:
            return lists[0]
        if value and all(isinstance(v, dict) for v in value.values()) and len(value) > 1:
            return list(value.values())
        return [value]
    if isinstance(value, str):
        return [value]
    return []


def validate_items(raw: list[Any], item_type: type[T]) -> tuple[list[T], list[str]]:
    """Items that fit the schema, and one short problem string per item that did not."""
    good: list[T] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        try:
            good.append(item_type.model_validate(item))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ())) or "item"
            problems.append(f"item {i + 1}: {where}: {first.get('msg', 'invalid')}")
    return good, problems


def _with_note(message: Message, note: str) -> Message:
    return {**message, "content": f"{message.get('content', '')}\n\n{note}"}


class AskResult(BaseModel):
    items: list[Any] = []
    problems: list[str] = []
    """What went wrong along the way (parse failures, invalid items, model errors): for the report."""
    calls: int = 0
    last_text: str = ""


async def ask_items(
    model: ChatModel,
    messages: list[Message],
    item_type: type[T],
    *,
    want: int = 1,
    attempts: int = 3,
    sampling: SamplingParams | None = None,
    format_hint: str = "",
    keys: tuple[str, ...] = LIST_KEYS,
    accept: Callable[[T], str | None] | None = None,
) -> AskResult:
    """Ask `model` for up to `want` items of `item_type`; retry with feedback while none are usable.

    `accept(item)` may return a reason to reject an item that is schema-valid but unusable (e.g. it
    names a tool); the reasons go into the retry message. Returns at most `want` items."""
    convo = list(messages)
    sampling = sampling or SamplingParams(temperature=0.7, max_new_tokens=768)
    result = AskResult()
    for attempt in range(attempts):
        params = sampling.model_copy(
            update={"seed": None if sampling.seed is None else sampling.seed + attempt}
        )
        try:
            completions = await model.chat(convo, n=1, sampling=params)
        except Exception as e:  # a backend failure is one more problem, not a crash of the whole run
            result.problems.append(f"model call failed: {type(e).__name__}: {str(e)[:200]}")
            result.calls += 1
            continue
        result.calls += 1
        text = completions[0].text if completions else ""
        result.last_text = text
        try:
            raw = coerce_items(parse_lenient(text), keys)
        except JsonParseError as e:
            result.problems.append(f"unparseable reply: {e}")
            # Garbage is not shown back to the model (a small model tends to continue what it sees);
            # the retry is the original request plus a note quoting how the bad reply began.
            start = " ".join(text.split())[:80]
            note = f"(A previous reply could not be used: {e}; it began {start!r}.) " if start else ""
            convo = [*messages[:-1], _with_note(messages[-1], note + "Reply with only the JSON.")]
            continue
        else:
            good, bad = validate_items(raw, item_type)
            rejected: list[str] = []
            for item in good:
                reason = accept(item) if accept else None
                if reason:
                    rejected.append(reason)
                elif len(result.items) < want:
                    result.items.append(item)
            result.problems += bad + rejected
            if result.items:
                return result
            issues = "; ".join((bad + rejected)[:4]) or "no items in the reply"
            feedback = f"None of the items in your reply could be used: {issues}."
        convo = [
            *convo,
            {"role": "assistant", "content": text[:1500]},
            {
                "role": "user",
                "content": f"{feedback} Reply again with only the JSON, nothing else. {format_hint}".strip(),
            },
        ]
    return result
