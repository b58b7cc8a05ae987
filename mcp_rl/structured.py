"""Structured output from a language model: read JSON out of what it wrote, and ask again when it
could not be read or did not fit.

One module for every caller that wants JSON from a model (the RULER judge, the verdict, the task
writer and explorer) and for the tool-call parser's fences:

- `FENCE`: a Markdown code fence, closed or cut off (group 1 its language label, group 2 its body).
- `extract_json`: the first JSON value of a wanted type in a reply. Small models wrap JSON in
  fences, write a sentence before or after it, use typographic or single quotes, Python literals
  (True/None), trailing commas, or leak template braces (`{{`); those are repaired when that is
  unambiguous. With `item_list=True` (a reply that lists items) two more repairs apply: objects
  written one after another (JSON lines) become a list, and a list cut off at the token limit
  keeps its complete items. A judge's reply gets neither: a partial judgement is a wrong one.
- `JsonReplyError`: nothing could be recovered; the message says why, in words fit for a repair
  prompt.
- `ask_with_repair`: ask, check the reply, on a bad reply change the conversation (a `Repair`) and
  ask again; every call is counted in `Usage`. Nothing the model raises escapes, so one broken
  reply can never stop a run; cancellation still propagates.
- `ask_items`: the loop for a list of pydantic items (task writing, argument proposals), with
  per-item validation and a caller's `accept` rule.
"""

from __future__ import annotations

import ast
import json
import re
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError

from mcp_rl.models.base import ChatModel, Message, SamplingParams
from mcp_rl.usage import Usage, call_usage

T = TypeVar("T")
Item = TypeVar("Item", bound=BaseModel)

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_\-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_SMART_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})
LIST_KEYS = ("tasks", "questions", "items", "data", "results", "arguments", "examples", "requests")
"""Keys under which a model tends to put the list it was asked for."""


class JsonReplyError(ValueError):
    """No JSON value could be recovered from a reply; the message says why, for the repair prompt."""


# ---- reading JSON ---------------------------------------------------------------------------


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
        # An unclosed value (the model ran out of tokens): kept so the error can say so.
        spans.append(text[start:])
    return spans


def _repairs(text: str) -> list[str]:
    """The text, then versions with one more repair each. The original always comes first, so a
    repair never changes a reply that was already valid (a typographic quote inside a string)."""
    out = [text, text.translate(_SMART_QUOTES)]
    last = out[-1]
    if "{{" in last or "}}" in last:
        # Qwen2.5-Coder-1.5B's chat template typo leaks doubled braces into its outputs.
        out.append(last.replace("{{", "{").replace("}}", "}"))
    return list(dict.fromkeys(out))


def _loads(candidate: str) -> Any:
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
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        # TypeError: `{{...}}` evaluates to a set holding a dict, which is unhashable.
        pass
    raise JsonReplyError("it is not valid JSON")


def _unclosed(span: str) -> bool:
    """More brackets opened than closed: the value was cut off, not merely malformed."""
    return span.count("{") + span.count("[") > span.count("}") + span.count("]")


def _complete_items(text: str) -> list[Any]:
    """The complete elements of the first JSON array in `text`, which may be cut off."""
    decoder = json.JSONDecoder()
    items: list[Any] = []
    i = text.find("[") + 1
    if i == 0:
        return items
    while i < len(text):
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            break
        try:
            value, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            break
        items.append(value)
    return items


def extract_json(text: str, want: type | tuple[type, ...] = (dict, list), *, item_list: bool = False) -> Any:
    """The first JSON value of type `want` in `text`.

    Looks in fenced blocks first, then in the whole text; in each, at every balanced bracket span
    in order, as written and then repaired (see the module docstring). `item_list` adds the two
    repairs for a list of items. Raises `JsonReplyError` with a short reason when nothing fits.
    """
    if not text or not text.strip():
        raise JsonReplyError("the reply was empty")
    blocks = [m.group(2) for m in FENCE.finditer(text) if m.group(2).strip()]
    problem = "no JSON object was found in the reply"
    truncated = False
    for block in [*blocks, text]:
        variants = _repairs(block.strip())
        for variant in variants:
            values: list[Any] = []
            for span in _balanced_spans(variant):
                try:
                    values.append(_loads(span))
                except JsonReplyError as e:
                    problem = f"the JSON could not be parsed ({e})"
                    truncated = truncated or _unclosed(span)
            if item_list and len(values) > 1 and all(isinstance(v, dict) for v in values):
                return values  # objects one after another (JSON lines): the items of a list
            for value in values:
                if isinstance(value, want):
                    return value
                problem = f"the JSON was a {type(value).__name__}, not an object"
        if item_list:
            for variant in variants:
                if items := _complete_items(variant):
                    return items
    if truncated:
        raise JsonReplyError("the JSON was cut off before it was closed (keep explanations shorter)")
    raise JsonReplyError(problem)


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


def validate_items(raw: list[Any], item_type: type[Item]) -> tuple[list[Item], list[str]]:
    """Items that fit the schema, and one short problem string per item that did not."""
    good: list[Item] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        try:
            good.append(item_type.model_validate(item))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ())) or "item"
            problems.append(f"item {i + 1}: {where}: {first.get('msg', 'invalid')}")
    return good, problems


# ---- asking until the reply fits ------------------------------------------------------------

Validator = Callable[[str], tuple[T | None, list[str]]]
"""reply -> (value, problems). A value that is not None is accepted; its problems are still recorded."""
Repair = Callable[[list[Message], str, list[str]], list[Message]]
"""(conversation just sent, the bad reply, its problems) -> the conversation for the next attempt."""


def follow_up(message: Callable[[list[str]], str]) -> Repair:
    """The usual repair: the bad reply stays in the conversation, followed by a user message
    (`message(problems)`) that says what was wrong with it."""

    def repair(conv: list[Message], reply: str, problems: list[str]) -> list[Message]:
        return [
            *conv,
            {"role": "assistant", "content": reply},
            {"role": "user", "content": message(problems)},
        ]

    return repair


class Asked(BaseModel, Generic[T]):
    """The outcome of `ask_with_repair`: the accepted value (None when no attempt gave one)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    value: T | None = None
    attempts: int = 0
    issues: list[list[str]] = []
    """What was wrong with each attempt, in order (empty for one with nothing wrong)."""
    replies: list[str] = []
    usage: Usage = Usage()

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def problems(self) -> list[str]:
        """One line per attempt that had something wrong: `attempt N: what`."""
        return [f"attempt {n}: " + " ".join(found) for n, found in enumerate(self.issues, 1) if found]


async def ask_with_repair(
    model: ChatModel,
    messages: list[Message],
    validate: Validator[T],
    repair: Repair,
    *,
    max_retries: int,
    sampling: SamplingParams,
    timeout_s: float | None = None,
    reseed: bool = False,
    who: str = "the model",
) -> Asked[T]:
    """Call `model` up to 1 + max_retries times until `validate` accepts a reply.

    A call that raises, times out or returns nothing is one failed attempt and the next one is the
    same request; a reply `validate` rejects goes through `repair`. `reseed` gives attempt k the
    seed + k, so a sampling model does not write the same reply again. `who` names the model in
    the problems ("the judge did not answer within 900 s").
    """
    out: Asked[T] = Asked()
    conv = list(messages)
    for attempt in range(max_retries + 1):
        out.attempts = attempt + 1
        params = sampling
        if reseed and sampling.seed is not None:
            params = sampling.model_copy(update={"seed": sampling.seed + attempt})
        t0 = time.perf_counter()
        try:
            with anyio.fail_after(timeout_s):
                completions = await model.chat(conv, tools=None, n=1, sampling=params)
        except TimeoutError:
            out.usage = out.usage + Usage(failed_calls=1, seconds=time.perf_counter() - t0)
            out.issues.append([f"{who} did not answer within {timeout_s:g} s"])
            continue
        except Exception as e:  # any backend error: record it and retry, never let it escape
            out.usage = out.usage + Usage(failed_calls=1, seconds=time.perf_counter() - t0)
            msg = " ".join(str(e).split())[:300]
            out.issues.append([f"{who} call failed: {type(e).__name__}: {msg}"])
            continue
        elapsed = time.perf_counter() - t0
        if not completions:
            out.usage = out.usage + Usage(failed_calls=1, seconds=elapsed)
            out.issues.append([f"{who} returned no completion"])
            continue
        reply = completions[0].text or ""
        out.replies.append(reply)
        out.usage = out.usage + call_usage(model, conv, completions[0]) + Usage(seconds=elapsed)
        value, problems = validate(reply)
        out.issues.append(list(problems))
        if value is not None:
            out.value = value
            return out
        conv = repair(conv, reply, problems)
    return out


class AskResult(BaseModel):
    """The outcome of `ask_items`: at most `want` usable items, and everything that went wrong."""

    items: list[Any] = []
    problems: list[str] = []
    """What went wrong along the way (parse failures, invalid items, model errors): for the report."""
    calls: int = 0
    usage: Usage = Usage()


_UNREADABLE = "unparseable reply"


async def ask_items(
    model: ChatModel,
    messages: list[Message],
    item_type: type[Item],
    *,
    want: int = 1,
    attempts: int = 3,
    sampling: SamplingParams | None = None,
    format_hint: str = "",
    keys: tuple[str, ...] = LIST_KEYS,
    accept: Callable[[Item], str | None] | None = None,
) -> AskResult:
    """Ask `model` for up to `want` items of `item_type`; retry with feedback while none are usable.

    `accept(item)` may return a reason to reject an item that is schema-valid but unusable (e.g. it
    names a tool); the reasons go into the retry message. An unreadable reply is not shown back
    (a small model tends to continue what it sees): the retry is the original request with a note
    quoting how the bad reply began. A readable reply with no usable item is shown back with what
    was wrong. Never raises on garbage: the caller gets fewer items and the problems."""

    def validate(text: str) -> tuple[list[Item] | None, list[str]]:
        try:
            raw = coerce_items(extract_json(text, item_list=True), keys)
        except JsonReplyError as e:
            return None, [f"{_UNREADABLE}: {e}"]
        good, problems = validate_items(raw, item_type)
        kept: list[Item] = []
        for item in good:
            reason = accept(item) if accept else None
            if reason:
                problems.append(reason)
            elif len(kept) < want:
                kept.append(item)
        return kept or None, problems

    def repair(conv: list[Message], reply: str, problems: list[str]) -> list[Message]:
        if problems and problems[0].startswith(_UNREADABLE):
            why = problems[0].removeprefix(f"{_UNREADABLE}: ")
            start = " ".join(reply.split())[:80]
            note = f"(A previous reply could not be used: {why}; it began {start!r}.) " if start else ""
            last = messages[-1]
            noted = {**last, "content": f"{last.get('content', '')}\n\n{note}Reply with only the JSON."}
            return [*messages[:-1], noted]
        issues = "; ".join(problems[:4]) or "no items in the reply"
        again = f"None of the items in your reply could be used: {issues}. Reply again with only the JSON, nothing else."
        return [
            *conv,
            {"role": "assistant", "content": reply[:1500]},
            {"role": "user", "content": f"{again} {format_hint}".strip()},
        ]

    asked = await ask_with_repair(
        model,
        messages,
        validate,
        repair,
        max_retries=attempts - 1,
        sampling=sampling or SamplingParams(temperature=0.7, max_new_tokens=768),
        reseed=True,
    )
    return AskResult(
        items=asked.value or [],
        problems=[p for found in asked.issues for p in found],
        calls=asked.attempts,
        usage=asked.usage,
    )
