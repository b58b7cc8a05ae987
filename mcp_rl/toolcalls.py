"""Find the tool calls in what a model wrote.

Small models do not all follow their chat template's call format: Qwen2.5-Coder-0.5B, for one,
answers with a bare JSON object or a ```json fence and never with `<tool_call>` tags. So the
parser accepts every common form and is explicit about where a call ends and prose begins.

The boundary (what counts as a call attempt):

1. Everything inside `<tool_call> ... </tool_call>` is a call attempt (an unclosed tag at the end
   of a cut-off message too). What is inside must parse as JSON of call shape, else the attempt is
   an invalid call.
2. Anywhere else in the message (code fences included), a JSON object of call shape is a call;
   a JSON list of such objects is several calls. Call shape is one of
     {"name": N, "arguments": A}   {"name": N, "parameters": A}   {"function": {"name": N, ...}}
     {"type": "function", "function": {...}}   {"tool_calls": [...]}
   with A a JSON object or a string holding one, or {"name": N} alone when N names a known tool.
   Other JSON (data a model shows in an answer) is not a call.
3. Text that starts like a call object (`{"name":`, `{'name':`, `{"function":`) but does not parse
   is an invalid call: the model meant to call and got the syntax wrong, and must be told.
4. A message with no call attempt is a final answer. Python-style calls (`f(x=1)`) are prose.

Whether the named tool exists and the arguments fit its schema is checked by the caller against the
live server (`ServerSession.check_call`); here only the form is judged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from typing import Any

from pydantic import BaseModel

from mcp_rl.structured import FENCE

_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
# A fragment that was meant to be a call object: an opening brace (or a list of them) then a name key.
_CALL_START = re.compile(r"""\[?\s*\{\s*["']?(name|function|tool_calls)["']?\s*:""")
_MAX_RAW = 600
_FORM = 'write exactly {"name": "<tool name>", "arguments": {<argument>: <value>, ...}} with double quotes'
_DECODER = json.JSONDecoder()


class ParsedCall(BaseModel):
    """One call attempt. `error` is None when the form is right (name and an arguments object)."""

    name: str = ""
    arguments: dict[str, Any] | None = None
    raw: str = ""
    error: str | None = None
    tagged: bool = False
    """Written inside `<tool_call>` tags: the Hermes form, native to Qwen2.5's chat template and the
    only form llama.cpp's server (`--jinja`), vLLM's `hermes` parser and Ollama's Qwen templates turn
    into OpenAI `tool_calls`. The parser reads the other forms too; this says which one was used."""

    @property
    def ok(self) -> bool:
        return self.error is None


class ParsedMessage(BaseModel):
    calls: list[ParsedCall]

    @property
    def is_final(self) -> bool:
        """No call attempt at all: the message is the episode's answer."""
        return not self.calls


def parse_message(text: str, tool_names: Collection[str] = ()) -> ParsedMessage:
    """All call attempts in `text`, in the order they appear."""
    return ParsedMessage(calls=list(_scan(text, set(tool_names))))


def _scan(text: str, known: set[str]) -> Iterator[ParsedCall]:
    pos = 0
    for m in _TAG.finditer(text):
        yield from _scan_loose(text[pos : m.start()], known)
        for call in _parse_tag_body(m.group(1), m.group(0), known):
            call.tagged = True
            yield call
        pos = m.end()
    yield from _scan_loose(text[pos:], known)


def _parse_tag_body(body: str, raw: str, known: set[str]) -> Iterator[ParsedCall]:
    raw = raw.strip()[:_MAX_RAW]
    inner = body.strip()
    fence = FENCE.fullmatch(inner)
    if fence:  # some models put a fence inside the tags
        inner = fence.group(2).strip()
    if not inner:
        yield ParsedCall(
            raw=raw, error="empty <tool_call> block: put a JSON object with name and arguments inside"
        )
        return
    values, err = _decode_all(inner)
    if err is not None:
        yield ParsedCall(
            raw=raw, name=_guess_name(inner), error=f"the tool call is not valid JSON ({err}); {_FORM}"
        )
        return
    for value in values:
        items = value if isinstance(value, list) else [value]
        for item in items:
            yield from _from_value(item, _item_raw(item, raw, value), known, strict=True)


def _decode_all(s: str) -> tuple[list[Any], str | None]:
    """Decode whitespace-separated JSON values filling all of `s`."""
    values: list[Any] = []
    i = 0
    while i < len(s):
        if s[i].isspace():
            i += 1
            continue
        try:
            value, end = _DECODER.raw_decode(s, i)
        except json.JSONDecodeError as e:
            return values, _json_problem(e)
        values.append(value)
        i = end
    return values, None


def _scan_loose(text: str, known: set[str]) -> Iterator[ParsedCall]:
    """Call-shaped JSON anywhere in free text (fences included; their markers are skipped)."""
    i = 0
    n = len(text)
    while i < n:
        j = _next_open(text, i)
        if j < 0:
            return
        try:
            value, end = _DECODER.raw_decode(text, j)
        except json.JSONDecodeError as e:
            if _CALL_START.match(text, j):
                frag = _fragment(text, j)
                yield ParsedCall(
                    raw=frag,
                    name=_guess_name(frag),
                    error=f"the tool call is not valid JSON ({_json_problem(e)}); {_FORM}",
                )
                # The rest of the fragment belongs to the broken call; resume after it.
                i = j + len(frag) if frag else j + 1
                continue
            i = j + 1
            continue
        raw = text[j:end]
        items = value if isinstance(value, list) else [value]
        found = [c for v in items for c in _from_value(v, _item_raw(v, raw, value), known, strict=False)]
        yield from found
        # JSON that is not a call is skipped whole: a call-looking object nested in data is data.
        i = end if found or isinstance(value, (dict, list)) else j + 1


def _item_raw(item: Any, raw: str, value: Any) -> str:
    """Each call of a JSON list gets its own text; a lone object keeps what the model wrote."""
    return json.dumps(item, ensure_ascii=False) if isinstance(value, list) else raw


def _next_open(text: str, i: int) -> int:
    a, b = text.find("{", i), text.find("[", i)
    if a < 0:
        return b
    if b < 0:
        return a
    return min(a, b)


def _fragment(text: str, j: int) -> str:
    """The broken call's text: up to a closing fence, a blank line, or the end."""
    rest = text[j:]
    stops = [k for k in (rest.find("```"), rest.find("\n\n")) if k > 0]
    return rest[: min(stops)] if stops else rest[:_MAX_RAW]


def _guess_name(fragment: str) -> str:
    """The tool a broken call meant, for the record (quoted or not: `"name": get_item` is common)."""
    m = re.search(r"""["']?name["']?\s*:\s*["']?([A-Za-z_][\w\-.]{0,99})""", fragment)
    return m.group(1) if m else ""


def _json_problem(e: json.JSONDecodeError) -> str:
    """The decoder's message and the text where it failed, so the model can see its mistake."""
    at = e.doc[e.pos : e.pos + 20].replace("\n", " ")
    return f"{e.msg} at {at!r}" if at.strip() else f"{e.msg} at the end (is something missing?)"


def _from_value(value: Any, raw: str, known: set[str], strict: bool) -> list[ParsedCall]:
    """The calls `value` holds when it has call shape; [] when it is not a call (strict: never [])."""
    raw = raw.strip()[:_MAX_RAW]
    if not isinstance(value, dict):
        if strict:
            return [ParsedCall(raw=raw, error="a tool call must be a JSON object with name and arguments")]
        return []
    if isinstance(value.get("tool_calls"), list) and "name" not in value:
        return [c for v in value["tool_calls"] for c in _from_value(v, raw, known, strict)]
    outer = _args_key(value)
    fn = value.get("function")
    if isinstance(fn, dict) and "name" in fn:
        inner = _args_key(fn)
        args = fn[inner] if inner else (value[outer] if outer else None)
        return [_make(fn.get("name"), args, raw)]
    if outer is not None and "name" in value:
        return [_make(value.get("name"), value[outer], raw)]
    name = value.get("name")
    if isinstance(name, str) and name in known and set(value) <= {"name", "id", "type"}:
        return [_make(name, {}, raw)]
    if strict:
        if "name" not in value:
            return [ParsedCall(raw=raw, error='the tool call has no "name" field')]
        return [_make(name, None, raw)]
    return []


def _args_key(d: dict[str, Any]) -> str | None:
    for key in ("arguments", "parameters"):
        if key in d:
            return key
    return None


def _make(name: Any, args: Any, raw: str) -> ParsedCall:
    if not isinstance(name, str) or not name.strip():
        return ParsedCall(raw=raw, error='the tool call\'s "name" must be a non-empty string')
    name = name.strip()
    if args is None:
        args = {}
    if isinstance(args, str):
        text = args.strip()
        if not text:
            args = {}
        else:
            try:
                args = json.loads(text)
            except json.JSONDecodeError as e:
                return ParsedCall(
                    name=name, raw=raw, error=f"the arguments string is not valid JSON: {e.msg}"
                )
    if not isinstance(args, dict):
        return ParsedCall(
            name=name, raw=raw, error=f"the arguments must be a JSON object, not {type(args).__name__}"
        )
    return ParsedCall(name=name, arguments=args, raw=raw)
