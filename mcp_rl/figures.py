"""How a figure is written for a person: one way for every table (the CLI, the HTML report, the model card)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def rate_text(m: Mapping[str, Any], prefix: str = "success") -> str:
    """ "42% [25%, 61%] (n=24)" for a record's rate (`success`, `judged`), or "not measured" when no
    task had that kind of grading. The one way every table (CLI, report, model card) writes a rate."""
    if m.get(prefix) is None:
        return "not measured"
    return f"{pct(m[prefix])} [{pct(m[prefix + '_low'])}, {pct(m[prefix + '_high'])}] (n={m[prefix + '_n']})"
