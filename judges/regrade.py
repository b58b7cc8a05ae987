"""Grade against the world as it is now: re-run a task's reference calls and refresh its answer.

For tasks whose answer depends on time or state (`task.answer_depends_on_state`), the stored
reference answer may be out of date. `refresh_reference` re-runs the reference calls through any
`call(name, arguments) -> ToolResult` (sync or async, e.g. `ServerSession.call`), so it needs no
trainer and no particular server class. When results changed, values that appear in the reference
answer are carried over to their new values where the correspondence is unambiguous (same JSON
path, or same position in an otherwise identical text); otherwise the reference is reported
stale and should not be used to grade (success then falls back to the judge's verdict).
A task that records how its answer was read out of the results (`task.answer_rule`, written by
scenario_gen for grounded tasks) gets the rule re-applied instead: exact, no guessing.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from mcp_rl.answer_rule import apply_rule
from mcp_rl.servers.results import CallStatus, ToolResult
from mcp_rl.task import Task
from mcp_rl.trajectory import ToolCallRecord

Caller = Callable[[str, dict[str, Any]], ToolResult | Awaitable[ToolResult]]

_NUM_TOKEN = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


class FreshReference(BaseModel):
    reference_answer: str | None
    """The answer to grade against now; None when it cannot be trusted."""
    changed: bool = False
    """The reference calls returned something different from when the task was written."""
    stale: bool = False
    """Changed, and the answer could not be brought up to date."""
    results: list[ToolResult] = []
    reason: str = ""


def _nums(text: str) -> list[float]:
    return [float(t.replace(",", "")) for t in _NUM_TOKEN.findall(text)]


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_leaves(v, f"{path}/{k}"))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_leaves(v, f"{path}/{i}"))
        return out
    return {path: value}


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _changes(old: str, new: str) -> dict[float, float] | None:
    """Old number -> new number for values that moved, or None when the mapping is unclear."""
    pairs: list[tuple[float, float]] = []
    old_j, new_j = _json(old), _json(new)
    if old_j is not None and new_j is not None:
        lo, ln = _leaves(old_j), _leaves(new_j)
        for path, v in lo.items():
            if isinstance(v, bool) or not isinstance(v, int | float):
                if path in ln and ln[path] != v:
                    return None  # a non-numeric value changed: cannot carry it over safely
                continue
            if path not in ln or isinstance(ln[path], bool) or not isinstance(ln[path], int | float):
                return None
            pairs.append((float(v), float(ln[path])))
    else:
        if _NUM_TOKEN.sub("#", old) != _NUM_TOKEN.sub("#", new):
            return None
        pairs = list(zip(_nums(old), _nums(new), strict=True))
    mapping: dict[float, float] = {}
    for a, b in pairs:
        if a == b:
            continue
        if mapping.get(a, b) != b:
            return None  # the same old value went two ways: ambiguous
        mapping[a] = b
    return mapping


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def _apply(reference: str, mapping: dict[float, float]) -> str:
    def sub(m: re.Match[str]) -> str:
        try:
            value = float(m.group(0).replace(",", ""))
        except ValueError:
            return m.group(0)
        return _fmt(mapping[value]) if value in mapping else m.group(0)

    return _NUM_TOKEN.sub(sub, reference)


async def refresh_reference(task: Task, call: Caller) -> FreshReference:
    """Re-run `task.reference_calls` through `call` and return the reference answer valid now."""
    if not task.reference_calls or task.reference_answer is None:
        return FreshReference(reference_answer=task.reference_answer, reason="no reference calls to re-run")
    results: list[ToolResult] = []
    for rc in task.reference_calls:
        res = call(rc.tool, dict(rc.arguments))
        if inspect.isawaitable(res):
            res = await res
        results.append(res)
        if not res.ok:
            return FreshReference(
                reference_answer=None,
                changed=True,
                stale=True,
                results=results,
                reason=f"reference call {rc.tool} now fails ({res.status}): {res.text[:200]}",
            )
    olds = [rc.result_text.strip() for rc in task.reference_calls]
    news = [r.text.strip() for r in results]
    if olds == news:
        return FreshReference(
            reference_answer=task.reference_answer, results=results, reason="results unchanged"
        )
    if task.answer_rule is not None:
        # The task knows how its answer was read out of the results: read it again, exactly.
        fresh = apply_rule(task.answer_rule, news)
        if fresh is not None:
            return FreshReference(
                reference_answer=fresh, changed=True, results=results, reason="answer rule re-applied"
            )
    mapping: dict[float, float] = {}
    for old, new in zip(olds, news, strict=True):
        part = _changes(old, new)
        if part is None or any(mapping.get(k, v) != v for k, v in part.items()):
            return FreshReference(
                reference_answer=None,
                changed=True,
                stale=True,
                results=results,
                reason="results changed in a way the reference answer cannot follow",
            )
        mapping.update(part)
    ref_values = set(_nums(task.reference_answer))
    if not (ref_values & set(mapping)):
        # The values that moved do not appear in the answer: it still holds.
        return FreshReference(
            reference_answer=task.reference_answer,
            changed=True,
            results=results,
            reason="changes do not touch it",
        )
    updated = _apply(task.reference_answer, mapping)
    return FreshReference(
        reference_answer=updated, changed=True, results=results, reason="values carried over"
    )


def _same_arguments(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    return json.dumps(a or {}, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def reference_from_episode(task: Task, calls: list[ToolCallRecord]) -> str | None:
    """The reference answer read out of the episode's own results: when the episode made every one of
    the task's reference calls (same tool, same arguments, an OK result), the task's answer rule is
    applied to what those calls returned to the episode. That is the answer in the world the episode
    saw, exact even when the answer moves with time (a clock that ticked over between the episode's
    call and a later refresh). None when there is no rule or a reference call is missing."""
    if task.answer_rule is None or not task.reference_calls:
        return None
    texts: list[str] = []
    for rc in task.reference_calls:
        match = next(
            (
                c
                for c in calls
                if c.valid and c.status == CallStatus.OK and c.name == rc.tool
                and _same_arguments(c.arguments, rc.arguments)
            ),
            None,
        )  # fmt: skip
        if match is None:
            return None
        texts.append(match.result_text)
    return apply_rule(task.answer_rule, texts)


def episode_references(task: Task | None, calls: list[ToolCallRecord], probe: Any = None) -> list[str | None]:
    """The reference answers that may grade one episode, best first (the one place that decides it).

    A task without a reference: none. A fixed answer: the task's own. An answer that moves with time
    or state: the answer read from the episode's own reference calls (`reference_from_episode`), and the
    one the reference calls gave right after the episode on its own session (`probe`, as the trainer's
    reference probe records it: {"reference": str | None, ...}); the episode is right if it matches
    either. When neither exists the reference is stale and the episode cannot be checked ([])."""
    if task is None or not (task.reference_answer and task.reference_answer.strip()):
        return []
    if not (task.answer_depends_on_state and task.reference_calls):
        return [task.reference_answer]
    out: list[str | None] = [reference_from_episode(task, calls)]
    if isinstance(probe, dict):
        out.append(probe.get("reference"))
    return [r for r in out if r is not None and r.strip()]


def graded_reference(references: list[str | None], answer: str | None) -> str | None:
    """Of an episode's references, the one its answer matches, else the first (None: none usable)."""
    from judges.answers import answer_matches

    usable = [r for r in references if r is not None and r.strip()]
    return next((r for r in usable if answer_matches(answer, r).correct), usable[0] if usable else None)
