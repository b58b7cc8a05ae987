"""Grounded tasks: a question whose answer was read out of real results.

From each successful exploration chain, `extract_facts` lists answers the last result holds; a few are
picked (spread over tools and kinds of fact), and the LLM only words a question for each. The wording
is checked: it must name what makes the answer unique (the item, the city, the time asked about), must
not give the answer away, and must not name a tool. Then `verify` re-runs the reference calls and
applies the rule again, so every kept reference answer is known to follow from what the server says.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, field_validator

from mcp_rl.answer_rule import apply_rule, format_value, parse_datetime, result_data
from mcp_rl.models.base import ChatModel, SamplingParams
from mcp_rl.servers.tools import ToolSpec
from mcp_rl.structured import ask_items
from mcp_rl.task import MAX_ANSWER, AnswerRule, ReferenceCall, Task
from scenario_gen import writer_prompts
from scenario_gen.context import server_context, state_context
from scenario_gen.explorer import ExplorableSession, ExploreResult, Step
from scenario_gen.facts import COUNT_KEY, Fact, extract_facts, list_kinds, name_parts
from scenario_gen.validate import leaked_names, strip_tool_mentions
from scenario_gen.values import ID_VALUE, TIME_PARAM, SeenValue


class QuestionItem(BaseModel):
    question: str

    @field_validator("question", mode="before")
    @classmethod
    def _strip(cls, v: Any) -> Any:
        return v.strip().strip('"').strip() if isinstance(v, str) else v


@dataclass
class Candidate:
    chain: list[Step]
    fact: Fact
    mentions: list[list[str]]


def _rule(c: Candidate) -> AnswerRule:
    return c.fact.rule.model_copy(update={"call_index": len(c.chain) - 1})


def grounded_id(c: Candidate) -> str:
    """The id of the task a candidate becomes, whatever its question: its calls and its answer rule."""
    key = repr([(s.tool, sorted(s.arguments.items())) for s in c.chain]) + repr(_rule(c).model_dump())
    return "g-" + hashlib.sha1(key.encode()).hexdigest()[:12]


def value_variants(value: Any, short: bool = True) -> list[str]:
    """Ways a user may write an argument value: 'Asia/Tokyo' -> Tokyo, '14:00' -> 2 pm, New_York -> New York.
    `short` False: a path only in full (its last part alone names nothing a solver could find)."""
    s = format_value(value)
    out = [s]
    if "/" in s and short:
        out.append(s.rsplit("/", 1)[1])
    m = re.fullmatch(r"(\d{1,2}):(\d{2})", s)
    if m:
        h, mm = int(m.group(1)), m.group(2)
        h12 = h % 12 or 12
        suffix = "am" if h < 12 else "pm"
        out += [f"{h}:{mm}", f"{h12}:{mm} {suffix}", f"{h12}:{mm}{suffix}"]
        if mm == "00":
            out += [f"{h12} {suffix}", f"{h12}{suffix}", f"{h} o'clock"]
    # the value as spelled comes first: "/srv/my repo" is no path a solver can use, and a context value
    # (`scenario_gen.context`) is found in a group by its spelling (2026-12-06: on a repository under
    # `s_p/`, every git question was refused for leaving out a path it was never shown right)
    return list(dict.fromkeys(v for x in out for v in (x, x.replace("_", " "))))


# Words a question about a field uses. A weak writer sometimes asks for the name when the answer is the
# price; requiring one of these words catches most of that.
_ASKS = {
    "price": ("price", "cost", "how much", "expensive", "cheap", "pay", "$"),
    "stock": ("stock", "unit", "available", "left", "how many", "inventory", "quantity", "have"),
    "rating": ("rating", "rated", "star", "score", "review"),
    "count": ("how many", "number of", "count", "total"),
    "total": ("how many", "number of", "count", "total"),
    "matches": ("how many", "number of", "count", "match"),
    "name": ("name", "called", "which", "what"),
    "title": ("title", "name", "called", "which"),
    "category": ("category", "kind", "type", "section", "which", "what"),
    "datetime": ("time", "date", "when"),
    "date": ("date", "day", "when"),
    "day": ("day",),
    "dst": ("daylight", "dst", "summer", "saving"),
    "difference": ("difference", "ahead", "behind", "offset", "hours"),
    "id": ("id", "identifier", "code", "number", "sku", "reference"),
    "timezone": ("time zone", "timezone", "zone"),
}
_FILLER = {"is", "has", "the", "of", "num", "get", "current", "value", "item", "items"}
# a key that is a preposition names the other end of a link (an edge's `from`/`to`, a mail's `from`):
# a question asks for it with who/which, and "Who is Anna Weber's friend?" has no word 'to' (2 of 7
# memory questions refused for "asked for something else" were right, 2026-12-07)
_LINK_KEYS = {"to", "from", "by", "at", "in", "on", "with", "for", "into", "source", "target"}
_LINK_ASKS = ("who", "whom", "which", "what", "where")
_KIND_ASKS = {
    "count": ("how many", "number of", "count", "total"),
    "names": ("which", "what", "list", "name"),
}


def asked_words(fact: Fact) -> tuple[str, ...]:
    """Words of which a question for this fact should use one (empty: anything goes)."""
    rule = fact.rule
    if rule.kind in _KIND_ASKS:
        return _KIND_ASKS[rule.kind]
    if rule.transform == "time_hhmm":
        return ("time", "clock", "when", "hour", "o'clock")
    if rule.transform == "date":
        return ("date",)
    key = next((p for p in reversed(rule.path) if isinstance(p, str)), "")
    if key.lower() in _LINK_KEYS:
        return _LINK_ASKS
    parts = name_parts(key)
    parts = [w.lower() for w in parts if w.lower() not in _FILLER] or [w.lower() for w in parts]
    out: list[str] = []
    for w in parts:
        out += _ASKS.get(w, (w,))
    return tuple(dict.fromkeys(out))


def field_named(question: str, fact: Fact) -> str | None:
    """A field name of several words that the question copies as written (`files_changed`,
    `addedLineCount`): the writer's prompt names the fact by its fields, and "how many entries in the
    `files_changed` list" is no user's question (2026-12-07, a git probe kept it). The key a count
    filters on too: "How many entries in `relations` have `relationType` 'works at'?" (2 of 20 memory
    tasks read by hand, 2026-12-07)."""
    where_key = (fact.rule.where or {}).get("key")
    keys = [p for p in fact.rule.path if isinstance(p, str)] + ([where_key] if isinstance(where_key, str) else [])
    for key in keys:
        if len(name_parts(key)) > 1 and re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", question, re.IGNORECASE):
            return key
    return None


def counted(fact: Fact) -> bool:
    """A whole number in a field named as a count (`added_line_count`, `total`, `num_items`): "what line
    was removed?" for a count of removed lines = 1 asks for a line, not how many (2026-12-07, a git
    probe kept it)."""
    if fact.rule.kind != "field" or fact.rule.transform != "none" or not fact.answer.isdigit():
        return False
    key = next((p for p in reversed(fact.rule.path) if isinstance(p, str)), "")
    return bool(COUNT_KEY.search(key))


_NUMBER = re.compile(r"^-?\d+([.,]\d+)?$")
_COMPARISON = re.compile(r"\b(since|between|compared?|comparing|comparison|differ(s|ence|ences)?|relative to)\b", re.I)
# a range filter's side, read off its parameter's name, and the words that ask for the other side
_UP_TO = re.compile(r"(^|_)(end|until|before|max|latest|to)(_|$)", re.IGNORECASE)
_FROM = re.compile(r"(^|_)(start|since|after|min|earliest|from)(_|$)", re.IGNORECASE)
# "between X and the latest commit" asks for what came after X: the log up to 2026-10-21 10:00 was
# asked that way, and answered 5 (the commits up to it; 2 came after), 1 of 20 git tasks, 2026-12-07
_AFTER_WORDS = re.compile(
    r"\b(after|since|later than|newer than)\b|\bbetween\b.{0,80}?\band (the )?(latest|last|most recent|newest|now|today|present|current)\b",
    re.IGNORECASE,
)
_BEFORE_WORDS = re.compile(
    r"\b(before|until|till|up to|earlier than|older than|prior to)\b|\bbetween (the )?(first|earliest|oldest|beginning|start)\b",
    re.IGNORECASE,
)
# A comparison with a commit is one with the present: a question must name the present side and not
# the commit's parent. With only a comparison word required, 3 of 20 git tasks still asked a
# commit's own changes: "What files were changed in the commit X since the previous commit?", "...
# when the commit X was made, compared to the same file in the previous commit?" (2026-12-07).
_PRESENT = re.compile(
    r"\b(now|current(ly)?|latest|today|present|head|since|working (tree|copy|directory))\b", re.IGNORECASE
)
# "in the commit that ... since the last commit" reads as the commit's own change too (1 of 20, evening)
_PARENT = re.compile(
    r"\b(previous|parent|preceding|prior (commit|version|revision)|when\b.{0,80}?\bwas made|"
    r"in (the|that|this) commit|since the last commit)\b",
    re.I,
)


def _backwards(asks: str, arguments: dict[str, Any], result: str = "") -> str:
    """A range filter asked the other way: the log up to a date (`end_timestamp`) asked as "after"
    it, 2 of 20 git tasks read (2026-12-07). Or asked with no side at all ("How many entries ...
    with the commit timestamp of 'Document the CSV format'?"), or with a strict word for a bound the
    result holds an entry at ("before 17:40" for a log up to 17:40 that lists the 17:40 commit): 2 more
    of 20 git tasks read (2026-12-07, evening). Returns the filter and what is wrong, or ""."""
    for key, value in arguments.items():
        # time filters only: `to`/`from` of a conversion and `max_count` of a log have no direction
        if not TIME_PARAM.search(key) or not isinstance(value, str | int | float) or isinstance(value, bool):
            continue
        up_to, since = _UP_TO.search(key) and not _FROM.search(key), _FROM.search(key) and not _UP_TO.search(key)
        at_bound = str(value) in result  # the result lists an entry at the bound itself: it is inclusive
        if up_to and _AFTER_WORDS.search(asks):
            return f"{key}={value}: up to it"
        if since and _BEFORE_WORDS.search(asks):
            return f"{key}={value}: from it on"
        if up_to and not _BEFORE_WORDS.search(asks) and not re.search(r"\bbetween\b", asks, re.I):
            return f"{key}={value}: say up to it (until, up to, between)"
        if since and not _AFTER_WORDS.search(asks) and not _FROM_ON.search(asks):
            return f"{key}={value}: say from it on (since, from ... on)"
        if up_to and at_bound and _STRICT_BEFORE.search(asks) and not _INCLUSIVE.search(asks):
            return f"{key}={value}: up to and including it (until, up to), not before it"
        if since and at_bound and _STRICT_AFTER.search(asks) and not _INCLUSIVE.search(asks):
            return f"{key}={value}: from it on, itself included (since, from ... on), not after it"
    return ""


_STRICT_BEFORE = re.compile(r"\b(before|earlier than|older than|prior to)\b", re.IGNORECASE)
_STRICT_AFTER = re.compile(r"\b(after|later than|newer than)\b", re.IGNORECASE)
_INCLUSIVE = re.compile(r"\b(on or (before|after)|up to and including|or (earlier|later)|inclusive|including)\b", re.I)
_FROM_ON = re.compile(r"\b(from|starting|as of)\b.{0,80}?\b(on|onwards?|forward)\b|\bstarting (at|from|on)\b", re.I)


_BETWEEN = re.compile(r"\b(between|among)\b", re.IGNORECASE)
"""Words that ask only for the entries that join given values, not every entry that touches one."""

_META = re.compile(
    r"\b(step \d|data \d|the (last |previous |first )?(result|output|response)|(?<!\.)json|the (tool|function)|field|"
    r"assistant|looked up|lookups?|the service|recorded|(the )?(given|above|provided|following) (list|data|output)|"
    r"the list above)\b",
    re.IGNORECASE,
)


def _norm(text: str) -> str:
    return " " + re.sub(r"[\s_]+", " ", text.lower()) + " "


def mentions_ok(question: str, groups: list[list[str]]) -> list[str]:
    """The groups the question fails to mention (empty when all are there)."""
    q = _norm(question)
    return [g[0] for g in groups if g and not any(_norm(x).strip() in q for x in g)]


_CLOCK = re.compile(r"\d{1,2}:\d{2}")


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")


def _without_values(question: str, mentions: list[list[str]], quoted: bool = True) -> str:
    """The question's own words: quoted text (unless `quoted` is False) and the values it was made to
    mention taken out."""
    q = _QUOTED.sub(" ", question) if quoted else question
    for m in sorted({m for g in mentions for m in g if m}, key=len, reverse=True):
        q = q.replace(m, " ")
    return q


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text.lower()) is not None


def gives_answer_away(question: str, answer: str, mentions: list[list[str]]) -> bool:
    a = answer.strip().lower()
    if a in ("yes", "no") or len(a) < 2:
        return False
    if any(a == m.lower() for g in mentions for m in g):
        return False
    if _CLOCK.fullmatch(a):  # "07:36" is given away by "7:36 AM" as well: the forms value_variants knows
        q = question.lower()
        return any(re.search(rf"(?<![\d:]){re.escape(v)}(?!\d)", q) for v in value_variants(a))
    if len(a) >= 5 and any(c.isdigit() for c in a):
        return a in question.lower()  # a date or an id inside a longer token still gives it away
    return _holds(question.lower(), a)


def _holds(text: str, value: str) -> bool:
    """`value` stands in `text` as a whole word or phrase (both lower case)."""
    return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w])", text) is not None


def _lists_its_answer(question: str, c: Candidate) -> bool:
    """A list asked for by naming every entry of it: "What are the local branches ..., including
    'feature/charts', 'fix/rounding', and 'main'?" (1 of 20 git tasks read, 2026-12-07)."""
    if c.fact.rule.kind != "names":
        return False
    given = {m.lower() for g in c.mentions for m in g}
    items = [a.strip().lower() for a in c.fact.answer.split(", ") if a.strip()]
    q = question.lower()
    return len(items) >= 2 and all(_holds(q, a) for a in items) and not set(items) <= given


_LABELS = (
    ("must mention", "did not name what it asks about"),
    ("must ask for", "asked for something else"),
    ("steps or results", "talked about the data, not as a user"),
    ("own answer", "gave the answer away"),
    ("names a tool", "named a tool"),
    ("empty", "empty"),
    ("unparseable", "unparseable reply"),
    ("model call failed", "model error"),
)


def _problem_label(problems: list[str]) -> str:
    for needle, label in _LABELS:
        if any(needle in p for p in problems):
            return label
    return "no usable reply"


def _signature(fact: Fact) -> str:
    return (
        fact.rule.kind
        + ":"
        + ".".join("*" if isinstance(p, dict) else str(p) for p in fact.rule.path)
        + fact.rule.transform
        + (f"?{fact.rule.where['key']}" if fact.rule.where else "")
    )


_MAX_GIVEN_VALUES = 12


def _argument_leaves(arguments: dict[str, Any]) -> list[tuple[str, str | int | float]]:
    """(parameter, value) for every scalar a call was given, inside arrays and objects too (the key of
    a value inside an object is its field's name)."""
    out: list[tuple[str, str | int | float]] = []

    def walk(key: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(str(k), v)
        elif isinstance(node, list):
            for v in node:
                walk(key, v)
        elif isinstance(node, str | int | float) and not isinstance(node, bool):
            out.append((key, node))

    for k, v in arguments.items():
        walk(k, v)
    return out


def _needless_arguments(step: Step, steps: list[Step]) -> bool:
    """Another call of the tool with fewer of these arguments returned the same: the extra ones
    changed nothing, and a question would have to state them for no reason. Measured on git: the log
    filtered by made-up dates ("2 weeks ago", "Jan 15 2024") returned the whole log, and each of its
    facts asked the writer to say those dates; 9 of 43 questions were kept."""
    args = step.arguments

    def fewer(other: dict[str, Any]) -> bool:
        return len(other) < len(args) and all(k in args and args[k] == v for k, v in other.items())

    return any(
        o.index != step.index and o.ok and not o.wrote and o.tool == step.tool
        and o.result_text == step.result_text and fewer(o.arguments)
        for o in steps
    )  # fmt: skip


def _fewest_mentions(candidates: list[Candidate], strictly_fewer: bool = False) -> list[Candidate]:
    """One candidate per fact: the one whose question must state the fewest values the call was given.
    Two candidates give the same fact when they read the same field to the same answer, the anchors
    of one are among the other's, and so are the given values (the same file, the same repository).
    Measured on git: 58 of 89 candidates came from logs filtered by a timestamp ("2026-10-15
    14:30:00+02:00") that a question had to copy, and most were a fact the unfiltered log gives with
    only the repository to name; the writer mostly failed to copy the stamp. `strictly_fewer`: a
    candidate only replaces one that needs more given values (across tools: two tools that read the
    same fact from the same values are two ways to ask, and both stay)."""

    # what each candidate names, read once (the pairwise check below reads it n^2 times)
    anchors = {id(c): {v for group in c.fact.mentions for v in group} for c in candidates}
    given = {id(c): [g for g in c.mentions if g not in c.fact.mentions] for c in candidates}

    def covers(k: Candidate, c: Candidate) -> bool:  # k, with no more given values, asks what c asks
        a, b = anchors[id(k)], anchors[id(c)]
        return (
            (_signature(k.fact), k.fact.answer) == (_signature(c.fact), c.fact.answer)
            and (a <= b or b <= a)
            and all(g in given[id(c)] for g in given[id(k)])
            and (not strictly_fewer or len(given[id(k)]) < len(given[id(c)]))
        )

    kept: list[Candidate] = []
    for c in sorted(candidates, key=lambda c: (len(given[id(c)]), len(c.mentions), -len(c.chain))):
        if not any(covers(k, c) for k in kept):
            kept.append(c)
    return kept


class GroundedWriter:
    def __init__(
        self,
        model: ChatModel,
        tools: list[ToolSpec],
        *,
        language: str = "en",
        seed: int = 0,
        concurrency: int = 4,
    ) -> None:
        self.model = model
        self.tools = {t.name: t for t in tools}
        self.language = language
        self.seed = seed
        self.rng = random.Random(seed)
        self.sem = asyncio.Semaphore(concurrency)
        self.problems: Counter[str] = Counter()
        self.context: dict[str, str] = {}
        """Values every question must state (`scenario_gen.context`), set by `candidates`."""
        self.examples: dict[str, list[str]] = {}
        """Per rejection reason, a few last questions the writer offered and why each was refused."""

    def _mentions(
        self, explore: ExploreResult, step: Step, fact: Fact, shown: set[Any], seen: list[SeenValue]
    ) -> list[list[str]]:
        """What the question must name: the fact's own anchors, then every value the call was given
        (each entry of an array argument too: a question about the top of 12, 7 and 19 must give
        them). An id found in an earlier result may be named by what it identifies instead."""
        groups = [list(g) for g in fact.mentions]
        for key, v in _argument_leaves(step.arguments):
            # A path no result ever showed (the repository `mcp-server-git` was started on) must be given
            # in full: git's questions said "in the repo" and left the policy no way to find it
            # (2026-12-05: 6 of 13 tasks of a git set). A listed path can be found again by its last part.
            group = value_variants(v, short=v in shown)
            # An id may be named by what it identifies (not when that is the answer asked for). An
            # opaque token (a hash) is found by value whatever key it was seen under (a `revision` or
            # `contains` argument is the `commit` of a log entry, named by its message) and its name
            # is offered first, since no one says a hash; other values only under their own key (a
            # price or a count found by value would be "named" by whatever item showed it).
            # (a path is no token: `/srv/c2/trips` has a digit but is said as it is, or as `trips`)
            opaque_value = isinstance(v, str) and bool(ID_VALUE.fullmatch(v)) and "/" not in v and not _NUMBER.match(v)
            opaque_value = opaque_value and parse_datetime(v) is None
            seen_as = seen if opaque_value else explore.pool.candidates(key) + explore.pool.by_key.get("id", [])
            names = [
                s.context_name for s in seen_as
                if s.value == v and s.context_name and s.step in step.sources
                and s.context_name.lower() != fact.answer.lower()
            ]  # fmt: skip
            group = names + group if opaque_value else group + names
            group = list(dict.fromkeys(group))
            if group not in groups:
                groups.append(group)
        return groups

    def candidates(self, explore: ExploreResult, want: int) -> list[Candidate]:
        """Up to `want` facts to ask about, spread over tools, fields and chains."""
        self.context = server_context(explore)
        shown = explore.pool.shown()  # once: every fact of every step asks it
        seen = [s for values in explore.pool.by_key.values() for s in values]  # the same
        kinds: dict[str, set[str]] = {}  # each list's kinds over the whole exploration
        for step in explore.steps:
            for k, ks in list_kinds(result_data(step.result_text) if step.ok else None).items():
                kinds.setdefault(k, set()).update(ks)
        per_tool: dict[str, list[Candidate]] = {}
        for step in explore.steps:
            if not step.ok or step.wrote or len(_argument_leaves(step.arguments)) > _MAX_GIVEN_VALUES:
                continue  # a call on more values than a question can state is no question
            if _needless_arguments(step, explore.steps):
                continue
            chain = explore.chain(step)
            for fact in extract_facts(step.result_text, step.arguments, known_kinds=kinds):
                per_tool.setdefault(step.tool, []).append(
                    Candidate(chain, fact, self._mentions(explore, step, fact, shown, seen))
                )
        per_tool = {t: _fewest_mentions(cs) for t, cs in per_tool.items()}
        # and across tools: the memory graph's `open_nodes` on six names gave the facts `read_graph` gives
        # with none, and its questions were refused for leaving out some of the six (most of the 41
        # "did not name what it asks about" of a 48-task set, 2026-12-07)
        fewest = {id(c) for c in _fewest_mentions([c for cs in per_tool.values() for c in cs], strictly_fewer=True)}
        per_tool = {t: [c for c in cs if id(c) in fewest] for t, cs in per_tool.items()}
        used: Counter[str] = Counter()
        picked: list[Candidate] = []
        pools = {t: list(c) for t, c in per_tool.items()}
        while len(picked) < want and any(pools.values()):
            for tool in sorted(pools, key=lambda t: self.rng.random()):
                options = pools[tool]
                if not options or len(picked) >= want:
                    continue
                # prefer facts of a kind not asked yet, and longer chains
                weights = [
                    c.fact.weight * len(c.chain) / (1 + 2 * used[tool + _signature(c.fact)]) for c in options
                ]
                choice = self.rng.choices(range(len(options)), weights)[0]
                c = options.pop(choice)
                used[tool + _signature(c.fact)] += 1
                picked.append(c)
        return picked

    def _difficulty(self, c: Candidate) -> int:
        d = len(c.chain)
        if any(isinstance(p, dict) for p in c.fact.rule.path) or c.fact.rule.kind in ("count", "names"):
            d += 1
        return max(1, min(5, d))

    async def write(self, c: Candidate) -> Task | None:
        """The grounded task for one candidate, or None (the reason counted in `problems`)."""
        if len(c.fact.answer) > MAX_ANSWER:  # a whole listing is no answer a reader could check
            self.problems["answer too long"] += 1
            return None
        last = c.chain[-1]
        calls = [(self.tools.get(s.tool), s.arguments, s.result_text) for s in c.chain]
        messages = writer_prompts.grounded_question(calls, c.fact.answer, c.fact.what, c.mentions, self.language)
        names = list(self.tools)

        refused: list[str] = []
        context = {k: v for k, v in self.context.items() if any(v in g for g in c.mentions)}

        def accept(item: QuestionItem) -> str | None:
            reason = _refusal(item)
            if reason:
                refused.append(f"{item.question.strip()!r}: {reason}")
            return reason

        def _refusal(item: QuestionItem) -> str | None:
            q = strip_tool_mentions(item.question, leaked_names(item.question, names))
            q = state_context(q, context)
            if len(q) < 10:
                return "the question is empty"
            if leaked_names(q, names):
                return "the question names a tool"
            if missing := mentions_ok(q, c.mentions):
                return "the question must mention " + " and ".join(repr(m) for m in missing)
            if gives_answer_away(q, c.fact.answer, c.mentions) or _lists_its_answer(q, c):
                return "the question contains its own answer"
            # on the question's own words: a file named `contacts.json` or a folder `results` is no talk
            # about the data (17 filesystem questions were refused for ".json", 2026-12-07)
            if _META.search(_without_values(q, c.mentions, quoted=False)):
                return "the question talks about steps or results (data, lookups, an assistant); ask as a user would"
            if field := field_named(q, c.fact):
                return f"the question talks about steps or results (the field name {field!r}); ask as a user would"
            words = asked_words(c.fact)
            if words and not any(w in q.lower() for w in words):
                return f"the question must ask for {c.fact.what} (use a word like {words[0]!r})"
            if counted(c.fact) and not any(w in q.lower() for w in _KIND_ASKS["count"]):
                return f"the question must ask how many: {c.fact.what} is a number of things"
            asks = _without_values(q, c.mentions)  # '/srv/files/trips' names no kind of entry
            if c.fact.of_kind and not any(_has_word(asks, w) for w in c.fact.of_kind):
                return f"the question must ask for {c.fact.what} (use a word like {c.fact.of_kind[-1]!r})"
            if other := [w for w in c.fact.avoid if _has_word(asks, w)]:
                return f"the question must ask for {c.fact.what}, not about {other[0]!r}"
            named_values = _without_values(q, c.mentions, quoted=False)
            if some := [v for v in c.fact.narrowing if _has_word(named_values, v.lower())]:
                return f"the question must ask for {c.fact.what}, all of them, not only those of {some[0]!r}"
            if c.fact.reaches and _BETWEEN.search(asks):
                return f"the question must ask for {c.fact.what}"
            if c.fact.compares and not (_COMPARISON.search(asks) and _PRESENT.search(asks) and not _PARENT.search(asks)):
                return f"the question must ask for {c.fact.what} (a comparison with now: use a word like 'since')"
            if wrong := _backwards(asks, c.chain[-1].arguments, c.chain[-1].result_text):
                return f"the question must ask for {c.fact.what} in the filter's direction ({wrong})"
            named = [kind[0] for kind in c.fact.kinds if any(_has_word(asks, w) for w in kind)]
            if named and len(named) < len(c.fact.kinds):
                every = " and ".join(kind[0] for kind in c.fact.kinds)
                return f"the question must ask for {c.fact.what} (all of them: {every}), not only {named[0]!r}"
            item.question = q
            return None

        async with self.sem:
            got = await ask_items(
                self.model, messages, QuestionItem, want=1, attempts=3, accept=accept,
                keys=("questions", "items"),
                sampling=SamplingParams(temperature=0.5, max_new_tokens=120, seed=self.seed + last.index),
                format_hint='Form: {"question": "..."}',
            )  # fmt: skip
        if not got.items:
            label = f"question rejected ({_problem_label(got.problems)})"
            self.problems[label] += 1
            if refused:  # the last three per reason are all the report shows
                kept = self.examples.setdefault(label, [])
                kept[:] = [*kept[-2:], refused[-1]]
            return None
        question = got.items[0].question
        rule = _rule(c)
        ref_calls = [
            ReferenceCall(tool=s.tool, arguments=s.arguments, result_text=s.result_text) for s in c.chain
        ]
        return Task(
            id=grounded_id(c),
            text=question,
            difficulty=self._difficulty(c),
            source="grounded",
            tools_expected=list(dict.fromkeys(s.tool for s in c.chain)),
            reference_calls=ref_calls,
            reference_answer=c.fact.answer,
            answer_rule=rule,
            answer_depends_on_state=c.fact.dated,
            language=self.language,
            notes={
                "answer_is": c.fact.what,
                "needs_reset": any(s.wrote for s in c.chain),
                "chain_len": len(c.chain),
            },
        )


class VerifyOutcome(BaseModel):
    status: str
    """stable: same answer on re-run; changed: a different answer now (time/state); failed: no answer."""
    fresh_answer: str | None = None
    detail: str = ""


async def verify(session: ExplorableSession, task: Task) -> VerifyOutcome:
    """Re-run a grounded task's reference calls and check the answer still follows from the results."""
    if task.answer_rule is None or not task.reference_calls:
        return VerifyOutcome(status="failed", detail="no reference calls or rule")
    if task.notes.get("needs_reset"):
        await session.reset()
    texts: list[str] = []
    for call in task.reference_calls:
        r = await session.call(call.tool, call.arguments)
        if not r.ok:
            return VerifyOutcome(status="failed", detail=f"{call.tool} -> {r.status.value}: {r.text[:120]}")
        texts.append(r.text)
    fresh = apply_rule(task.answer_rule, texts)
    if fresh is None:
        return VerifyOutcome(status="failed", detail="the answer rule no longer applies to the results")
    return VerifyOutcome(status="stable" if fresh == task.reference_answer else "changed", fresh_answer=fresh)
