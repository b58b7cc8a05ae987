"""How a grounded task's answer is read out of its reference calls' results (`AnswerRule`).

Every layer needs this: the task writer records the rule, the grader re-applies it to the results an
episode saw (or to a fresh re-run of the reference calls), the trainer grades with it. So it lives
at the bottom, beside the task record, and imports nothing of ours above it.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from mcp_rl.task import AnswerRule

_ISO_DT = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")


def result_json(text: str) -> Any | None:
    """The JSON value of a result text, or None when the result is plain text.

    A tool returning a list often comes back as one content block per element, rendered as JSON
    values one after another: those are read as one list."""
    t = text.strip()
    if not t or t[0] not in "[{":
        return None
    try:
        return json.loads(t)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    while pos < len(t):
        try:
            value, end = decoder.raw_decode(t, pos)
        except json.JSONDecodeError:
            return None  # cut off or not JSON after all: no partial answers from a partial result
        values.append(value)
        pos = end
        while pos < len(t) and t[pos] in " \t\r\n,":
            pos += 1
    return values if len(values) > 1 else (values[0] if values else None)


def format_value(value: Any) -> str:
    """Canonical text of an answer value."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value)
    return str(value).strip()


def parse_datetime(value: Any) -> datetime | None:
    if not isinstance(value, str) or not _ISO_DT.match(value.strip()):
        return None
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def transform_value(value: Any, transform: str) -> Any:
    """A value as the rule's transform writes it: a clock time HH:MM or an ISO date of a date-time."""
    if transform == "none":
        return value
    dt = parse_datetime(value)
    if dt is None:
        return None
    return dt.strftime("%H:%M") if transform == "time_hhmm" else dt.date().isoformat()


def _select(node: Any, step: str | int | dict[str, Any]) -> Any:
    if isinstance(step, dict):
        if not isinstance(node, list):
            return None
        key, want = step.get("key"), step.get("equals")
        return next((x for x in node if isinstance(x, dict) and x.get(key) == want), None)
    if isinstance(step, int):
        return node[step] if isinstance(node, list) and -len(node) <= step < len(node) else None
    return node.get(step) if isinstance(node, dict) else None


def apply_rule(rule: AnswerRule, result_texts: list[str]) -> str | None:
    """The answer the rule reads out of the calls' result texts, or None when it cannot."""
    try:
        text = result_texts[rule.call_index]
    except IndexError:
        return None
    if rule.kind == "text":
        t = text.strip()
        return t or None
    node = result_json(text)
    for step in rule.path:
        node = _select(node, step)
        if node is None:
            return None
    if rule.kind == "count":
        return str(len(node)) if isinstance(node, list) else None
    if rule.kind == "names":
        if not isinstance(node, list):
            return None
        names = [x.get(rule.name_key) for x in node if isinstance(x, dict)]
        return ", ".join(str(n) for n in names if n is not None) or None
    value = transform_value(node, rule.transform)
    if value is None or (isinstance(value, dict | list) and not value):
        return None
    return format_value(value)
