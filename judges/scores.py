"""Check a RULER reply against the ids that were asked for: match by id, never by position.

The expected shape is `{"scores": [{"id": "t1", "explanation": "...", "score": 0.7}, ...]}`.
Harmless variations are accepted (a bare list, `"t1"` written as `"T1"` or `1`, a score given as a
numeric string); anything that would change the meaning is a *problem*: a missing, duplicate or
unknown id, a score that is not a number or lies outside [0, 1]. Problems are returned as
sentences so the repair prompt can quote them back to the judge.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from mcp_rl.structured import JsonReplyError, extract_json


class ScoreEntry(BaseModel):
    id: str
    score: float
    explanation: str = ""


class ScoreCheck(BaseModel):
    """The outcome of checking one reply: entries by id when valid, else the problems found."""

    entries: dict[str, ScoreEntry] = {}
    problems: list[str] = []

    @property
    def ok(self) -> bool:
        return not self.problems


def _norm_id(raw: Any, expected: set[str]) -> str:
    s = str(raw).strip().strip("#").strip()
    low = s.lower()
    if low in expected:
        return low
    # "1" or 1 for "t1": still matched by the label, not by where the entry sits in the list.
    if low.isdigit() and f"t{int(low)}" in expected:
        return f"t{int(low)}"
    return s


def _as_score(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _fmt_ids(ids: list[str]) -> str:
    return ", ".join(ids)


def check_scores(text: str, expected_ids: list[str]) -> ScoreCheck:
    """Parse `text` and check it holds exactly one score in [0, 1] for each of `expected_ids`."""
    expected = {i.lower() for i in expected_ids}
    try:
        obj = extract_json(text)
    except JsonReplyError as e:
        return ScoreCheck(problems=[f"Your reply could not be read as JSON: {e}."])

    items: Any
    if isinstance(obj, dict) and "scores" in obj:
        items = obj["scores"]
    elif isinstance(obj, list):
        items = obj
    else:
        keys = ", ".join(map(str, list(obj)[:5])) if isinstance(obj, dict) else ""
        seen = f"its keys were: {keys}" if keys else "it was empty"
        return ScoreCheck(problems=[f'The JSON object has no "scores" list ({seen}).'])
    if not isinstance(items, list):
        return ScoreCheck(
            problems=['"scores" must be a list of objects with "id", "explanation" and "score".']
        )

    problems: list[str] = []
    entries: dict[str, ScoreEntry] = {}
    unknown: list[str] = []
    duplicates: list[str] = []
    bad: set[str] = set()
    for n, item in enumerate(items, start=1):
        if not isinstance(item, dict) or "id" not in item:
            problems.append(f'Entry number {n} is not an object with an "id" field.')
            continue
        tid = _norm_id(item["id"], expected)
        if tid not in expected:
            unknown.append(tid)
            continue
        if tid in entries:
            duplicates.append(tid)
            continue
        score = _as_score(item.get("score"))
        if score is None or math.isnan(score):
            problems.append(f"The score for {tid} is not a number (got {item.get('score')!r}).")
            bad.add(tid)
            continue
        if not 0.0 <= score <= 1.0:
            problems.append(f"The score for {tid} is {score:g}, outside the allowed range 0 to 1.")
            bad.add(tid)
            continue
        entries[tid] = ScoreEntry(id=tid, score=score, explanation=str(item.get("explanation", "") or ""))

    if unknown:
        problems.append(f"These ids do not exist: {_fmt_ids(sorted(set(unknown)))}. Use only the ids shown.")
    if duplicates:
        problems.append(f"These ids were scored more than once: {_fmt_ids(sorted(set(duplicates)))}.")
    missing = [i for i in expected_ids if i.lower() not in entries and i.lower() not in bad]
    if missing:
        problems.append(f"Scores are missing for: {_fmt_ids(missing)}.")
    return ScoreCheck(entries=entries, problems=problems)
