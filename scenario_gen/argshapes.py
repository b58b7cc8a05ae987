"""Values a schema itself allows, for when no result and no example says more.

Numbers inside the stated range (`minimum`, `maximum`, `exclusive*`, `multipleOf`), strings in the
stated format, and the entries of an array: a varied series of numbers, or more words of the kind an
example shows ('monday' -> the other weekdays). Everything is deterministic: the same schema gives
the same values, so an exploration replays.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = [
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
]  # fmt: skip
# a series that reads like measurements: distinct, unsorted, with a clear maximum and minimum
_SERIES = [12.0, 7.0, 19.0, 3.0, 15.0, 9.0, 21.0, 5.0, 17.0, 11.0]
_ID_NAME = re.compile(r"(^|_)(id|ids|key|sku|code|slug|uuid|ref|index|idx)$", re.IGNORECASE)


def _bounds(schema: dict[str, Any]) -> tuple[float | None, bool, float | None, bool]:
    """(low, low is exclusive, high, high is exclusive), from either JSON Schema draft's spelling."""
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    lo_x = hi_x = False
    if isinstance(xlo, bool):  # draft 4: a flag on `minimum`
        lo_x = xlo and lo is not None
    elif isinstance(xlo, int | float) and (lo is None or xlo >= lo):
        lo, lo_x = xlo, True
    if isinstance(xhi, bool):
        hi_x = xhi and hi is not None
    elif isinstance(xhi, int | float) and (hi is None or xhi <= hi):
        hi, hi_x = xhi, True
    return lo, lo_x, hi, hi_x


def number_ok(value: float, schema: dict[str, Any]) -> bool:
    """Whether `value` lies within the schema's bounds and step."""
    lo, lo_x, hi, hi_x = _bounds(schema)
    if lo is not None and (value < lo or (lo_x and value == lo)):
        return False
    if hi is not None and (value > hi or (hi_x and value == hi)):
        return False
    step = schema.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        q = value / step
        return math.isclose(q, round(q), abs_tol=1e-9)
    return True


def numbers_in_range(schema: dict[str, Any], integer: bool, count: int = 3) -> list[int | float]:
    """Up to `count` distinct numbers the schema allows, the likeliest to mean something first: the
    middle, a quarter and nine tenths of a closed range; small steps past a lone bound; 1, 3, 5."""
    lo, _, hi, _ = _bounds(schema)
    if lo is not None and hi is not None:
        raw = [lo + (hi - lo) * f for f in (0.5, 0.25, 0.9, 0.1, 0.75)]
    elif lo is not None:
        raw = [lo + d for d in (1, 3, 5, 10, 2)]
    elif hi is not None:
        raw = [hi - d for d in (1, 3, 5, 10, 2)]
    else:
        raw = [1, 3, 5, 10, 2]
    step = schema.get("multipleOf")
    out: list[int | float] = []
    for x in raw:
        if isinstance(step, int | float) and step > 0:
            x = round(x / step) * step
        v: int | float = round(x) if integer else float(round(x, 2))
        if number_ok(v, schema) and v not in out:
            out.append(v)
    if not out and lo is not None:
        # a range too narrow for the rounded picks (exclusive bounds one apart): its midpoint
        mid = (lo + hi) / 2 if hi is not None else lo + 0.5
        if number_ok(mid, schema) and not integer:
            out.append(mid)
    return out[:count]


def number_series(schema: dict[str, Any], integer: bool, n: int, variant: int = 0) -> list[int | float]:
    """`n` distinct numbers for an array's entries: the fixed series, rotated by `variant`, mapped into
    the item schema's range when it has one."""
    lo, _, hi, _ = _bounds(schema)
    base = _SERIES[variant % len(_SERIES) :] + _SERIES[: variant % len(_SERIES)]
    out: list[int | float] = []
    for x in base:
        if lo is not None and hi is not None:
            x = lo + (hi - lo) * (x - 2) / 20  # the series spans 3..21: into the range, clear of its ends
        elif lo is not None:
            x = lo + x
        elif hi is not None:
            x = hi - x
        v: int | float = round(x) if integer else float(round(x, 2))
        if number_ok(v, schema) and v not in out:
            out.append(v)
        if len(out) == n:
            break
    return out


def id_like(name: str) -> bool:
    return bool(_ID_NAME.search(name))


def string_for_format(name: str, schema: dict[str, Any]) -> tuple[list[str], bool] | None:
    """(values, weak) for a string parameter whose format or name says what it holds, else None.
    `weak`: a placeholder the server is unlikely to hold (an email, a URL), not evidence."""
    desc = f"{schema.get('description', '')} {schema.get('title', '')}".lower()
    fmt = str(schema.get("format", ""))
    n = name.lower()
    now = datetime.now(UTC)
    if fmt == "date-time":
        return [now.replace(microsecond=0).isoformat()], False
    if fmt == "date" or n.endswith("date"):
        return [now.date().isoformat()], False
    if fmt == "time":
        return ["14:30:00", "09:15:00"], False
    if "hh:mm" in desc or n == "time":
        return ["09:30", "14:00", "18:45"], False
    if fmt == "email" or "email" in n:
        return ["alex@example.com"], True
    if fmt in ("uri", "url", "iri") or "url" in n:
        return ["https://example.com"], True
    if fmt == "uuid":
        return ["123e4567-e89b-42d3-a456-426614174000"], True
    if fmt == "ipv4":
        return ["127.0.0.1"], True
    if fmt == "hostname":
        return ["example.com"], True
    return None


def more_of_a_kind(value: str, n: int) -> list[str]:
    """`value` and n-1 more words of its kind (weekdays, months), in the same case; else [value]."""
    for words in (_WEEKDAYS, _MONTHS):
        if value.lower() in words:
            i = words.index(value.lower())
            picked = [words[(i + j) % len(words)] for j in range(min(n, len(words)))]
            return [w.capitalize() if value[:1].isupper() else w for w in picked]
    return [value]
