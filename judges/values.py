"""Typed values written in text: numbers, dates, clock times, day and month names, ids.

One parser for everything in `judges` that reads values out of text: the answer grader
(`judges.answers`) and the faithfulness checks (`judges.faithful`) both call `extract_values`, so
"the answer states 20:05" means the same thing to both.

Rules of reading (each pass blanks what it took, so a later pass never reads the same characters):
1. ISO date-times ("2026-12-03T20:05:11+00:00") give a date and a clock time; their offset is no value.
2. Dates: ISO ("2026-12-03"), written ("December 3, 2026", "Dec 3rd", "3 December 2026", "Thursday,
   3 Dec 2026"; a weekday written with a date is also a day value, a written month a month value).
   "12/03/2026" is read only when just one reading (d/m or m/d) is a real date, or both agree.
3. Zone offsets ("UTC+9", "GMT-05:00", "+05:30") are no values.
4. Clock times: "18:30", "18:30:00", "6:30 pm", "6:30 PM", "6 p.m.", "6 o'clock in the evening",
   "half past six in the evening", "noon", "midnight". 12 am is 00:00, 12 pm is 12:00.
5. List markers (bullets, and "1. ", "2) " at line starts when there are two or more) and ordinals ("3rd") are no values.
6. Numbers with a unit glued on ("9.0h", "5km", "45%") are numbers.
7. Ids: a token with both a letter and a digit ("ITM-017", "SKU104", "6P"), case-insensitive.
8. Numbers: a sign, a currency sign, thousands separators, decimals ("-3", "$1,234.00", "+9.0").
   Digits glued to letters are part of an id, never a number by themselves.
9. Day and month names standing alone: full names ("Thursday"; "May" and "March" only capitalized,
   as they are also words), capitalized abbreviations ("Thu", "Dec").
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Literal

Kind = Literal["number", "date", "time", "day", "month", "id"]

_MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_DAY_NAMES = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS: dict[str, int] = {m: i + 1 for i, m in enumerate(_MONTH_NAMES)}
_MONTHS.update({m[:3]: i + 1 for i, m in enumerate(_MONTH_NAMES)} | {"sept": 9})
_DAYS: dict[str, int] = {d: i for i, d in enumerate(_DAY_NAMES)}
_DAYS.update({d[:3]: i for i, d in enumerate(_DAY_NAMES)} | {"tues": 1, "thur": 3, "thurs": 3})
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WD = "|".join(sorted(_DAYS, key=len, reverse=True))
_WORDS_AS_NUMBERS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
_HOUR_WORDS = {w: i for w, i in _WORDS_AS_NUMBERS.items() if 1 <= i <= 12}


@dataclass(frozen=True)
class Value:
    """One value written in a text. `key` is what equality compares (see `same`)."""

    kind: Kind
    text: str
    key: tuple[Any, ...]
    start: int = 0
    end: int = 0
    places: int = 0
    """Numbers: the decimal places written ("12.50" has 2)."""
    derived: bool = field(default=False, compare=False)
    """Not written but implied (the weekday of a date): supports, never claims."""

    def __str__(self) -> str:
        return self.text


def normalize(text: str) -> str:
    """Lower case, compatibility forms folded, `_` read as a space, punctuation other than the marks
    that live inside tokens (. , : / - % $) turned into spaces, white space collapsed."""
    text = unicodedata.normalize("NFKC", text).lower().replace("_", " ")
    text = re.sub(r"[^\w.,;:/%$\-\s]", " ", text)
    return " ".join(text.split())


def words(text: str) -> list[str]:
    """The words of a text, lower case, in order (tokens inside ids and names kept whole)."""
    return [w.strip(".-/") for w in re.findall(r"[a-z0-9]+(?:[.'/-][a-z0-9]+)*", normalize(text))]


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def same(ref: Value, v: Value) -> bool:
    """Does `v` state the value `ref` states?

    - numbers: an integer reference needs the same value ("100.0" = 100, "101" is not); a decimal one
      the value to its stated precision: equal ("12.50" = 12.5), or more digits that begin with the
      reference's and round back to it ("3.141" for 3.14; not "12.49" for 12.5, nor "3.1" for 3.14).
      A reference with more than 4 decimal places is a machine's float: it may be rounded to 2 or more.
    - dates: the same day; a date written without its year matches month and day.
    - times: the same hour and minute; seconds only when the reference states them.
    - days, months, ids: the same one (ids case-insensitive, whole: "ITM-017" is not "ITM-0170").
    """
    if ref.kind != v.kind:
        return False
    if ref.kind == "number":
        r, a = ref.key[0], v.key[0]
        if a == r:
            return True
        if ref.places == 0:
            return False
        quantum = Decimal(1).scaleb(-ref.places)
        if v.places > ref.places:
            begins = abs(a).quantize(quantum, rounding=ROUND_DOWN) == abs(r) and (a < 0) == (r < 0)
            if begins and a.quantize(quantum, rounding=ROUND_HALF_UP) == r:
                return True
        if ref.places > 4 and v.places >= 2:
            return r.quantize(Decimal(1).scaleb(-v.places), rounding=ROUND_HALF_UP) == a
        return False
    if ref.kind == "date":
        (ry, rm, rd), (ay, am, ad) = ref.key, v.key
        return (rm, rd) == (am, ad) and (ry is None or ay is None or ry == ay)
    if ref.kind == "time":
        (rh, rmin, rs), (ah, amin, asec) = ref.key, v.key
        return (rh, rmin) == (ah, amin) and (rs is None or asec == rs)
    return ref.key == v.key


# --- the passes ---------------------------------------------------------------------------------
_DATE_TIME = re.compile(
    r"(?<![\w-])(\d{4})-(\d{2})-(\d{2})[Tt ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?"
    r"(?:Z|[+-]\d{2}:?\d{2})?(?![\w:])"
)
_ISO_DATE = re.compile(r"(?<![\w/.-])(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?![\w/-]|\.\d)")
_WD_PREFIX = rf"(?:(?P<wd>{_WD})\.?,?\s+(?:the\s+)?)?"
_MONTH_FIRST = re.compile(
    rf"(?<![\w]){_WD_PREFIX}(?P<mon>{_MON})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?![\w:])"
    r"(?:,?\s+(?P<y>\d{4})(?![\w:]))?",
    re.IGNORECASE,
)
_DAY_FIRST = re.compile(
    rf"(?<![\w]){_WD_PREFIX}(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MON})\b\.?"
    r"(?:,?\s+(?P<y>\d{4})(?![\w:]))?",
    re.IGNORECASE,
)
_SLASH_DATE = re.compile(r"(?<![\w/])(\d{1,2})/(\d{1,2})/(\d{4})(?![\w/])")
_ZONE = re.compile(r"\b(?:UTC|GMT)\s?[+\-−]\s?\d{1,2}(?::?\d{2})?(?!\d)|(?<![\w:])[+\-−]\d{2}:\d{2}(?!\d)")
_AP = r"\s?(?P<ap>[ap])\.?\s?m\b\.?"
_PART = r"\s+(?P<part>in\s+the\s+(?:morning|afternoon|evening)|at\s+night)"
_MERIDIEM = rf"(?:{_AP}|{_PART})"
_CLOCK = re.compile(
    rf"(?<![\w:.+\-−])(?P<h>\d{{1,2}}):(?P<m>\d{{2}})(?::(?P<s>\d{{2}}))?(?![\d:]){_MERIDIEM}?",
    re.IGNORECASE,
)
_HOUR_ONLY = re.compile(
    rf"(?<![\w:.])(?P<h>\d{{1,2}}|{'|'.join(_HOUR_WORDS)})"
    rf"(?:{_AP}|\s+o'?clock(?:{_PART})?)",
    re.IGNORECASE,
)
_PAST = re.compile(
    rf"\b(?P<q>half|quarter)\s+(?P<dir>past|to)\s+(?P<h>\d{{1,2}}|{'|'.join(_HOUR_WORDS)})\b{_MERIDIEM}?",
    re.IGNORECASE,
)
_NOON = re.compile(r"\b(?:12\s+)?(?P<w>noon|midnight)\b", re.IGNORECASE)
_BULLET = re.compile(r"(?m)^\s*[-*•]\s+")
_NUMBERED = re.compile(r"(?m)^\s*\d{1,2}[.)]\s+")
_ORDINAL = re.compile(r"(?<![\w.])\d+(?:st|nd|rd|th)\b", re.IGNORECASE)
_NUM_BODY = (
    r"(?P<sign>[-+−])?(?P<cur>[$€£¥])?(?P<sign2>[-−])?(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<frac>\.\d+)?"
)
_UNIT_NUMBER = re.compile(
    rf"(?<![\w.]){_NUM_BODY}(?P<unit>%|(?:h|hrs?|km|kg|mb|gb|tb|kb|ms|lbs?|oz|ml|cm|mm)(?![\w]))",
    re.IGNORECASE,
)
_ID = re.compile(r"(?<![\w-])(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)[A-Za-z0-9]+(?:[-_./][A-Za-z0-9]+)*(?![\w-])")
_NUMBER = re.compile(rf"(?<![\w.]){_NUM_BODY}(?![\w]|\.\d)")
_NAME = re.compile(rf"\b(?:(?P<wd>{_WD})|(?P<mon>{_MON}))\b\.?", re.IGNORECASE)


def _valid_date(y: int | None, m: int, d: int) -> bool:
    try:
        date(2000 if y is None else y, m, d)  # 2000 is a leap year: "Feb 29" without a year is fine
    except ValueError:
        return False
    return True


def _hour24(h: int, ap: str | None, part: str | None) -> int | None:
    pm = (ap or "").lower() == "p" or bool(part and re.search(r"afternoon|evening|night", part, re.I))
    am = (ap or "").lower() == "a" or bool(part and "morning" in part.lower())
    if not (pm or am):
        return h if h < 24 else None
    if not 1 <= h <= 12:
        return None
    return (h % 12) + (12 if pm else 0)


def _hour_of(text: str) -> int:
    return int(text) if text.isdigit() else _HOUR_WORDS[text.lower()]


class _Reader:
    """Runs the passes over a text, blanking each span taken."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.masked = text
        self.values: list[Value] = []

    def take(self, start: int, end: int) -> None:
        self.masked = self.masked[:start] + " " * (end - start) + self.masked[end:]

    def add(
        self,
        kind: Kind,
        m: re.Match[str],
        key: tuple[Any, ...],
        span: tuple[int, int] | None = None,
        places: int = 0,
    ) -> None:
        start, end = span or m.span()
        self.values.append(Value(kind, self.text[start:end].strip(), key, start, end, places))

    def run(self, pattern: re.Pattern[str], handle: Any) -> None:
        for m in list(pattern.finditer(self.masked)):
            if handle(m) is not False:
                self.take(*m.span())


def _number_key(m: re.Match[str]) -> tuple[tuple[Any, ...], int] | None:
    value = _decimal(m.group("int") + (m.group("frac") or ""))
    if value is None:
        return None
    if m.group("sign") in ("-", "−") or m.group("sign2"):
        value = -value
    places = len(m.group("frac")) - 1 if m.group("frac") else 0
    return (value,), places


def extract_values(text: str) -> list[Value]:
    """Every value written in `text`, in reading order (rules in the module docstring)."""
    r = _Reader(text)

    def date_time(m: re.Match[str]) -> bool:
        y, mo, d, h, mi = (int(m.group(i)) for i in range(1, 6))
        if not _valid_date(y, mo, d) or h > 23 or mi > 59:
            return False
        s = int(m.group(6)) if m.group(6) else None
        r.add("date", m, (y, mo, d), (m.start(1), m.end(3)))
        r.add("time", m, (h, mi, s), (m.start(4), m.end(6) if m.group(6) else m.end(5)))
        return True

    def iso_date(m: re.Match[str]) -> bool:
        y, mo, d = (int(m.group(i)) for i in range(1, 4))
        if not _valid_date(y, mo, d):
            return False
        r.add("date", m, (y, mo, d))
        return True

    def written(m: re.Match[str]) -> bool:
        mon = m.group("mon")
        y = int(m.group("y")) if m.group("y") else None
        if mon.lower() in ("may", "march") and not mon[0].isupper() and y is None:
            return False  # "4 may be": a verb, not a month
        mo, d = _MONTHS[mon.lower()], int(m.group("d"))
        if not _valid_date(y, mo, d):
            return False
        r.add("date", m, (y, mo, d))
        r.add("month", m, (mo,), m.span("mon"))
        if m.group("wd"):
            r.add("day", m, (_DAYS[m.group("wd").lower()],), m.span("wd"))
        return True

    def slash(m: re.Match[str]) -> bool:
        a, b, y = (int(m.group(i)) for i in range(1, 4))
        readings = {(y, mo, d) for mo, d in ((a, b), (b, a)) if _valid_date(y, mo, d)}
        if len(readings) == 1:
            r.add("date", m, readings.pop())
        return True  # an ambiguous date is no value, and not three numbers either

    def clock(m: re.Match[str]) -> bool:
        h = _hour24(int(m.group("h")), m.group("ap"), m.group("part"))
        mi = int(m.group("m"))
        if h is None or mi > 59:
            return False
        r.add("time", m, (h, mi, int(m.group("s")) if m.group("s") else None))
        return True

    def hour_only(m: re.Match[str]) -> bool:
        ap, part = m.group("ap"), m.groupdict().get("part")
        h = _hour24(_hour_of(m.group("h")), ap, part)
        if h is None:
            return False
        r.add("time", m, (h, 0, None))
        return True

    def past(m: re.Match[str]) -> bool:
        h = _hour_of(m.group("h"))
        minute = 30 if m.group("q").lower() == "half" else 15
        if m.group("dir").lower() == "to":
            h, minute = (h - 1) or 12, 60 - minute
        h24 = _hour24(h, m.group("ap"), m.group("part"))
        if h24 is None:
            return False
        r.add("time", m, (h24, minute, None))
        return True

    def noon(m: re.Match[str]) -> bool:
        r.add("time", m, (12 if m.group("w").lower() == "noon" else 0, 0, None))
        return True

    def number(m: re.Match[str]) -> bool:
        parsed = _number_key(m)
        if parsed is None:
            return False
        r.add("number", m, parsed[0], places=parsed[1])
        return True

    def ident(m: re.Match[str]) -> bool:
        r.add("id", m, (m.group().upper(),))
        return True

    def name(m: re.Match[str]) -> bool:
        word = m.group().rstrip(".")
        full = word.lower() in _MONTH_NAMES or word.lower() in _DAY_NAMES
        if not word[0].isupper() and (not full or word.lower() in ("may", "march")):
            return False  # "sun", "mar", "may": words first
        span = (m.start(), m.start() + len(word))
        if m.group("wd"):
            r.add("day", m, (_DAYS[word.lower()],), span)
        else:
            r.add("month", m, (_MONTHS[word.lower()],), span)
        return True

    r.run(_DATE_TIME, date_time)
    r.run(_ISO_DATE, iso_date)
    r.run(_MONTH_FIRST, written)
    r.run(_DAY_FIRST, written)
    r.run(_SLASH_DATE, slash)
    r.run(_ZONE, lambda m: True)
    r.run(_CLOCK, clock)
    r.run(_PAST, past)
    r.run(_HOUR_ONLY, hour_only)
    r.run(_NOON, noon)
    r.run(_BULLET, lambda m: True)
    if len(_NUMBERED.findall(r.masked)) >= 2:  # "1. " and "2. " make a list; one "6. " may be an answer
        r.run(_NUMBERED, lambda m: True)
    r.run(_ORDINAL, lambda m: True)
    r.run(_UNIT_NUMBER, number)
    r.run(_ID, ident)
    r.run(_NUMBER, number)
    r.run(_NAME, name)
    return sorted(r.values, key=lambda v: (v.start, v.end))


def masked_text(text: str, fill: str = " ") -> str:
    """`text` with every value's characters replaced by `fill`: what is left are its plain words."""
    out = text
    for v in extract_values(text):
        out = out[: v.start] + fill * (v.end - v.start) + out[v.end :]
    return out


def number_words(text: str) -> list[Value]:
    """Numbers written as words ("six", zero to twenty): read only where a text writes no digits."""
    return [
        Value("number", m.group(), (Decimal(_WORDS_AS_NUMBERS[m.group().lower()]),), m.start(), m.end())
        for m in re.finditer(rf"\b(?:{'|'.join(_WORDS_AS_NUMBERS)})\b", text, re.IGNORECASE)
    ]


def implied(values: list[Value]) -> list[Value]:
    """Values a text implies without writing them: the weekday and the month of each full date."""
    out: list[Value] = []
    for v in values:
        if v.kind == "date" and v.key[0] is not None:
            d = date(*v.key)
            out.append(Value("day", v.text, (d.weekday(),), v.start, v.end, derived=True))
            out.append(Value("month", v.text, (d.month,), v.start, v.end, derived=True))
    return out


def json_leaves(node: Any) -> list[Any]:
    """Every scalar inside a JSON value."""
    if isinstance(node, dict):
        return [x for v in node.values() for x in json_leaves(v)]
    if isinstance(node, list):
        return [x for v in node for x in json_leaves(v)]
    return [node]


def json_list_lengths(node: Any) -> list[int]:
    """The length of every list inside a JSON value (a count an answer may state)."""
    out: list[int] = []
    if isinstance(node, list):
        out.append(len(node))
        for v in node:
            out += json_list_lengths(v)
    elif isinstance(node, dict):
        for v in node.values():
            out += json_list_lengths(v)
    return out
