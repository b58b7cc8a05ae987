"""Every prompt the generator sends, in one place.

Written for small local models first (Qwen2.5-Coder-1.5B writes simple JSON reliably when shown the
exact form): short rules, one concrete JSON example, nothing to continue but the JSON itself.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_rl.models.base import Message
from mcp_rl.servers.tools import ToolSpec

LANGUAGE_NAMES = {
    "en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese",
    "nl": "Dutch", "ru": "Russian", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "ar": "Arabic",
}  # fmt: skip


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


def _param_line(name: str, schema: dict[str, Any], required: bool) -> str:
    t = schema.get("type", "any")
    extra = ""
    if schema.get("enum"):
        extra = " one of " + ", ".join(json.dumps(v) for v in schema["enum"][:8])
    desc = str(schema.get("description", "")).strip()
    return f"    - {name} ({t}{', required' if required else ''}){extra}{': ' + desc if desc else ''}"


def describe_tool(tool: ToolSpec) -> str:
    params = tool.parameters.get("properties", {}) or {}
    required = set(tool.parameters.get("required", []) or [])
    a = tool.annotations
    kind = " [read-only]" if a.read_only else (" [changes data]" if a.read_only is False else "")
    lines = [f"- {tool.name}{kind}: {tool.description.strip()[:300]}"]
    lines += [_param_line(p, s or {}, p in required) for p, s in params.items()]
    return "\n".join(lines)


def describe_tools(tools: list[ToolSpec]) -> str:
    return "\n".join(describe_tool(t) for t in tools)


def written_example(tools: list[ToolSpec]) -> str:
    """The JSON form asked for, with this server's tool names (a themed example gets copied)."""
    names = [t.name for t in tools[:2]] or ["tool_name"]
    items = [
        {"task": "...", "difficulty": 2, "tools": [names[0]]},
        {"task": "...", "difficulty": 4, "tools": names},
    ]
    return json.dumps({"tasks": items})


# Rotated per batch: without them a small writer converges on one phrasing ("What time is it in X?").
REQUEST_STYLES = (
    "a quick factual question",
    "a request with a practical reason behind it (planning, buying, deciding, scheduling)",
    "a comparison between two or more things",
    "a request that needs two or three lookups combined",
    "a casual question from a newcomer, in everyday words",
    "a precise request from an expert, with exact values",
    "a request that asks for a short list or a summary",
    "a what-if question about a concrete situation",
)


def written_tasks(
    tools: list[ToolSpec],
    count: int,
    *,
    focus: list[str],
    instructions: str = "",
    server_instructions: str = "",
    resources: list[str] | None = None,
    known_values: dict[str, list[str]] | None = None,
    language: str = "en",
    difficulties: list[int] | None = None,
    styles: list[str] | None = None,
) -> list[Message]:
    """Ask for `count` tasks a real user of this server would type."""
    parts = [
        "You write realistic requests that users type to an AI assistant. The assistant can use the tools "
        "of a service, listed below, to do the work.",
        "",
        "Tools:",
        describe_tools(tools),
    ]
    if server_instructions:
        parts += ["", "About the service: " + server_instructions.strip()[:800]]
    if resources:
        parts += ["", "Resources the service offers: " + "; ".join(resources[:10])]
    if known_values:
        vals = "; ".join(f"{k}: {', '.join(v[:8])}" for k, v in list(known_values.items())[:8])
        parts += ["", f"Real values that exist on the service (use them so requests can succeed): {vals}"]
    rules = [
        f"Write {count} different requests in {language_name(language)}.",
        "Each request is what a user would say, self-contained, with concrete values (names, ids, places, numbers).",
        "Never mention tool or function names, parameters or JSON in a request.",
        "Difficulty 1 = one simple lookup, 3 = two or three steps, 5 = several tools combined with reasoning.",
    ]
    if difficulties:
        rules.append("Use these difficulties in order: " + ", ".join(str(d) for d in difficulties) + ".")
    if styles:
        rules.append("Write them as " + "; or as ".join(styles) + ".")
    rules.append("Every request must ask something different, about different values.")
    if focus:
        rules.append("Each request must need at least one of these tools: " + ", ".join(focus) + ".")
    if instructions:
        rules.append("Theme from the user: " + instructions.strip())
    rules.append(f"Reply with only JSON in this form, with {count} items: {written_example(tools)}")
    parts += ["", "Rules:", *(f"- {r}" for r in rules)]
    return [
        {"role": "system", "content": "You are a careful test writer. You reply with JSON only."},
        {"role": "user", "content": "\n".join(parts)},
    ]


def grounded_question(
    calls: list[tuple[ToolSpec | None, dict[str, Any], str]],
    answer: str,
    what: str,
    must_mention: list[list[str]],
    language: str = "en",
) -> list[Message]:
    """Ask for the wording of one question whose answer is `answer`, given the calls that produced it.
    Tools are described by what they do, not by name, so their names do not leak into the question."""
    lines = ["Data from a service:"]
    for i, (tool, args, result) in enumerate(calls, 1):
        action = tool.description.split(".")[0].strip() if tool and tool.description else "Data"
        arg_text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) or "nothing"
        lines.append(f"{i}. {action} (with {arg_text}) gave:\n{result.strip()[:900]}")
    lines += [
        "",
        f"Write one question a user could ask whose correct answer is exactly: {answer}",
        f"(the answer is {what}, in data {len(calls)}).",
    ]
    if must_mention:
        need = "; ".join(" or ".join(repr(x) for x in group[:3]) for group in must_mention)
        lines.append(f"The question must mention: {need}.")
    lines += [
        f"Write it in {language_name(language)}, as a user would ask it: directly for that value, without",
        "talking about data, lookups, tools or an assistant, and without giving the answer away.",
        "Leave out dates and timestamps unless the question is about one.",
        'Reply with only JSON: {"question": "..."}',
    ]
    return [
        {
            "role": "system",
            "content": "You write clear questions for a quiz about a data service. You reply with JSON only.",
        },
        {"role": "user", "content": "\n".join(lines)},
    ]


def arguments_example(tool: ToolSpec) -> str:
    props = tool.parameters.get("properties", {}) or {}
    required = [p for p in tool.parameters.get("required", []) or [] if p in props] or list(props)[:2]
    one = {p: "..." for p in required}
    return json.dumps({"arguments": [one, one]})


def propose_arguments(
    tool: ToolSpec,
    known_values: dict[str, list[str]],
    recent: list[str],
    *,
    server_instructions: str = "",
    instructions: str = "",
    results: list[str] | None = None,
) -> list[Message]:
    """Ask for argument objects likely to succeed: from the tool's description and schema, what the
    server and the user say it is for, values seen so far and what other tools returned."""
    vals = "; ".join(f"{k}: {', '.join(v[:8])}" for k, v in list(known_values.items())[:10]) or "none yet"
    lines = ["Propose arguments for a call to this tool of a data service:", describe_tool(tool)]
    if len(tool.description.strip()) > 300:  # describe_tool shows the first 300 characters
        lines.append("Its full description: " + tool.description.strip()[:1200])
    props = (tool.parameters.get("properties") or {}).values()
    if any(isinstance(p, dict) and p.get("type") in ("object", "array") for p in props):
        # nested parameters: the one-line summary above does not show their shape
        lines.append(f"Parameter schema: {json.dumps(tool.parameters, ensure_ascii=False)[:1500]}")
    if server_instructions.strip():
        lines.append("About the service: " + server_instructions.strip()[:600])
    if instructions.strip():
        lines.append("What the user works on: " + instructions.strip()[:600])
    lines += ["", f"Values seen on the service so far: {vals}"]
    if results:
        lines.append("Other calls and what they returned: " + " | ".join(results))
    if recent:
        lines.append("Earlier attempts and what came back: " + " | ".join(recent))
    lines += [
        "Give 3 argument objects that are likely to succeed: use real values seen above (names, paths,",
        "ids the service returned, or that the user named), realistic data where the tool computes over",
        "what it is given, and values different from the earlier attempts.",
        f"Reply with only JSON in this form: {arguments_example(tool)}",
    ]
    return [
        {"role": "system", "content": "You are an API tester. You reply with JSON only."},
        {"role": "user", "content": "\n".join(lines)},
    ]


def rewrite_without_names(text: str, names: list[str], language: str = "en") -> list[Message]:
    return [
        {"role": "system", "content": "You edit requests. You reply with JSON only."},
        {
            "role": "user",
            "content": (
                f"Rewrite this request so it does not mention {', '.join(names)} (those are internal "
                f"function names a user would not know), keeping its meaning and all concrete values, "
                f"in {language_name(language)}:\n{text}\n"
                'Reply with only JSON: {"task": "..."}'
            ),
        },
    ]


SELF_CONTAINED_ASK = "Can this request be done using only what it says and these tools?"
"""The opening of the self-contained question (fakes of the writer recognize the prompt by it)."""


def self_contained_question(text: str, tools: list[ToolSpec], language: str = "en") -> list[Message]:
    """Ask whether a request carries the inputs it needs or a tool can provide them. The model lists
    the inputs first: a small model that names them judges "answerable" far better than one asked for
    a bare yes or no."""
    lines = [
        f"Request ({language_name(language)}): {text.strip()}",
        "",
        "Tools:",
        describe_tools(tools),
        "",
        SELF_CONTAINED_ASK,
        "List each input the request needs (a number, a list of values, a name, an id, a unit, a time zone).",
        'For each, say where it comes from: "text" (the request states it), "tool" (a tool above can look',
        'it up without being given it first) or "missing" (neither).',
        'answerable is false when any input is missing; "missing" names it.',
        'Reply with only JSON: {"inputs": [{"input": "...", "from": "text"}], "answerable": true, "missing": ""}',
    ]
    return [
        {"role": "system", "content": "You review requests for a tool-using assistant. You reply with JSON only"},
        {"role": "user", "content": "\n".join(lines)},
    ]
