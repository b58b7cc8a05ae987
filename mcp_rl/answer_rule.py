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
# `Key: value` (a colon then a space or the line's end: "12:30", "C:\\x" and URLs are no keys)
_KEY_LINE = re.compile(r"^([A-Za-z][\w .()/-]{0,39}?)\s*:(?:\s+(.*))?$")
# `[FILE] a.txt`, `[DIR] docs`: a tag in brackets, then the entry
_TAG_LINE = re.compile(r"^\[([A-Za-z][\w -]{0,19})\]\s+(\S.*)$")
_PATCH_LINE = re.compile(r"^(@@ -\d|\+\+\+ |--- (a/|/dev/null)|diff --git )")
# a unified diff's file header (`--- a/x` over `+++ b/x`) and hunk header (`@@ -5,4 +5,4 @@`)
_DIFF_HEADER = re.compile(r"^--- \S.*\n\+\+\+ \S", re.MULTILINE)
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# a list marker before an entry: markdown bullets, and git's "* " before the current branch ("* main"
# was offered as a branch's name, 2026-12-05); a "-" glued to a digit is a sign, not a marker
_BULLET = re.compile(r"^[-*\u2022]\s+(?=\S)")
_NUMBER = re.compile(r"^-?(0|[1-9]\d{0,15})(\.\d+)?$")
_MAX_LINE_CHARS = 200
DIFF_KEY = "files_changed"
"""Where `result_data` puts the files a unified diff changes."""


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


def result_data(text: str) -> Any | None:
    """What a result holds, JSON or not: the one view of a result every reader of data shares.

    Rules, in order (deterministic: a grader re-reads a fresh result the same way):
    - JSON (see `result_json`): that value, unchanged.
    - blocks separated by blank lines, every line of them `Key: value`: one dict per block (a list of
      dicts; one block is a dict). Keys are snake_case (`Last Modified`, `lastModified` -> `last_modified`); a value in matching quotes
      loses them; plain integers and decimals become numbers, true/false booleans, an empty value "".
    - one entry per line (two or more lines, no blank line between, none longer than 200 characters,
      not a unified diff):
      a list of strings; a first line ending in ":" is a heading, not an entry; when every line is
      `[TAG] entry`, a list of {"type": TAG, "name": entry}; a list marker ("- ", "* ", a bullet) before
      an entry is not part of it; a CSV or TSV table with a header line, a
      list of one dict per row.
    - a unified diff (`git show`, `git diff`, an edit's preview), whatever precedes it:
      {"files_changed": [{"file", "added_line_count", "removed_line_count"}, ...]} in the diff's order; a
      created or deleted file is named by the side that is not /dev/null. (`file`, not `path`: the
      names are relative to the repository, and a `repo_path` argument given one fails.)
    - anything else (one plain line, prose): None; only the whole text answers then."""
    data = result_json(text)
    if data is not None:
        return data
    if _DIFF_HEADER.search(text.replace("\r\n", "\n")):
        files = _diff_files(text.replace("\r\n", "\n").split("\n"))
        if files:
            return {DIFF_KEY: files}
    blocks = [b for b in re.split(r"\n[ \t]*\n", text.strip().replace("\r\n", "\n")) if b.strip()]
    parsed = [_key_block(b) for b in blocks]
    if parsed and all(p is not None for p in parsed):
        dicts = [p for p in parsed if p is not None]
        return dicts[0] if len(dicts) == 1 else dicts
    if len(blocks) != 1:
        return None
    lines = [ln.strip() for ln in blocks[0].splitlines()]
    if len(lines) < 2 or any(not ln or len(ln) > _MAX_LINE_CHARS for ln in lines):
        return None
    if lines[0].endswith(":"):
        lines = lines[1:]  # a heading ("Allowed directories:") is not an entry
    if any(_PATCH_LINE.match(ln) for ln in lines):
        return None  # a unified diff's lines are no entries ("+0.1.0" was offered as a file, 2026-12-05)
    lines = [_BULLET.sub("", ln, count=1) for ln in lines]
    tagged = [_TAG_LINE.match(ln) for ln in lines]
    if lines and all(tagged):
        return [{"type": m.group(1), "name": m.group(2).strip()} for m in tagged if m]
    return _table(lines) or lines or None


def _diff_files(lines: list[str]) -> list[dict[str, Any]]:
    """The files of a unified diff with the lines each adds and removes. A hunk's body is read by the
    line counts its header gives, so a removed line that reads "--- x" is not taken for a header."""
    files: list[dict[str, Any]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        hunk = _HUNK.match(line)
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _diff_path(line[4:]), _diff_path(lines[i + 1][4:])
            files.append({"file": new or old or "", "added_line_count": 0, "removed_line_count": 0})
            i += 2
        elif hunk and files:
            old_left = int(hunk[1]) if hunk[1] is not None else 1
            new_left = int(hunk[2]) if hunk[2] is not None else 1
            i += 1
            while i < len(lines) and (old_left > 0 or new_left > 0):
                tag = lines[i][:1]
                if tag == "+":
                    files[-1]["added_line_count"] += 1
                    new_left -= 1
                elif tag == "-":
                    files[-1]["removed_line_count"] += 1
                    old_left -= 1
                elif tag != "\\":  # "\ No newline at end of file" counts on neither side
                    old_left, new_left = old_left - 1, new_left - 1
                i += 1
        else:
            i += 1
    return [f for f in files if f["file"]]


def _diff_path(raw: str) -> str | None:
    """`a/budget/report.py` -> budget/report.py; /dev/null (the side of a created or deleted file) -> None."""
    path = raw.split("\t")[0].strip()
    if path == "/dev/null" or not path:
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def _table(lines: list[str]) -> list[dict[str, Any]] | None:
    """CSV or TSV text with a header line: one dict per row. Every line must have the header's number
    of fields (2 or more) and the header's names must be distinct; quoted fields are not split."""
    for sep in (",", "\t"):
        rows = [ln.split(sep) for ln in lines]
        header = [h.strip() for h in rows[0]]
        if (
            len(rows) >= 2 and len(header) >= 2 and all(len(r) == len(header) for r in rows)
            and len(set(header)) == len(header) and all(h and not _NUMBER.match(h) for h in header)
            and not any('"' in ln for ln in lines)
        ):  # fmt: skip
            return [{h: _text_scalar(v) for h, v in zip(header, r, strict=True)} for r in rows[1:]]
    return None


def _key_block(block: str) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for line in block.strip().splitlines():
        m = _KEY_LINE.match(line.strip())
        if m is None:
            return None
        key = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", m.group(1).strip())  # isDirectory -> is_directory
        key = re.sub(r"[\s-]+", "_", key).lower()
        if key in out:
            return None  # a repeated key is a list written another way: not a record
        out[key] = _text_scalar(m.group(2) or "")
    return out


def _text_scalar(raw: str) -> Any:
    v = raw.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    if _NUMBER.match(v):
        return float(v) if "." in v else int(v)
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


def format_value(value: Any) -> str:
    """Canonical text of an answer value."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value)
    return str(value).strip()


# JavaScript's Date.toString(), what Node servers print: "Fri Dec 04 2026 15:07:51 GMT+0000 (UTC)"
_JS_DT = re.compile(r"^[A-Z][a-z]{2} ([A-Z][a-z]{2} \d{2} \d{4} \d{2}:\d{2}:\d{2}) GMT([+-]\d{4})(?: \(.*\))?$")


def parse_datetime(value: Any) -> datetime | None:
    if isinstance(value, str) and (js := _JS_DT.match(value.strip())):
        try:
            return datetime.strptime(f"{js[1]} {js[2]}", "%b %d %Y %H:%M:%S %z")
        except ValueError:
            return None
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
    node = result_data(text)
    for step in rule.path:
        node = _select(node, step)
        if node is None:
            return None
    if rule.where is not None and rule.kind in ("count", "names"):
        if not isinstance(node, list):
            return None
        key, want = rule.where.get("key"), rule.where.get("equals")
        node = [x for x in node if isinstance(x, dict) and x.get(key) == want]
    if rule.kind == "count":
        return str(len(node)) if isinstance(node, list) else None
    if rule.kind == "names":
        if not isinstance(node, list):
            return None
        if rule.name_key is None:  # a list of plain entries (names, paths): the entries themselves
            names = [x for x in node if isinstance(x, str | int | float) and not isinstance(x, bool)]
        else:
            names = [x.get(rule.name_key) for x in node if isinstance(x, dict)]
        return ", ".join(str(n) for n in names if n is not None) or None
    value = transform_value(node, rule.transform)
    if value is None or (isinstance(value, dict | list) and not value):
        return None
    return format_value(value)
