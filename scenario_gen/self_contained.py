"""Is a written task answerable from its own text plus the server's tools?

A written task must carry the data it needs ("the mean of 4, 8 and 15") or name where the server holds
it ("the population of Lisbon"). Tasks like "the average of my friends' ages" or "the total for all
items in the store" (on a server with no item list) cannot be answered by anyone: a policy trained on
them learns to make things up, and only a lenient judge would call an attempt a success.

Two checks, cheapest first:
- `rule_reason(text, tools)`: deterministic rules over the wording and the tools' own vocabulary
  (names, descriptions, parameter names); no server is special-cased.
- `model_verdict(text, tools, model)`: a structured question to the writer model, which lists the
  inputs the task needs and where each comes from, then gives {answerable, missing}.

`unsupported_terms(text, known_text)`, used by the solvability pass once an attempt has run, names the
words a task speaks of that the server never said (a false premise: "the mother of Anna Weber").

`self_contained(task, tools, model)` runs the first two. A model that gives no readable verdict keeps the task
(reason "unchecked"): a weak writer's broken JSON must not empty the task set.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, field_validator

from mcp_rl.models.base import ChatModel, SamplingParams
from mcp_rl.servers.tools import ToolSpec
from mcp_rl.structured import JsonReplyError, ask_with_repair, extract_json, follow_up
from mcp_rl.task import Task
from scenario_gen import writer_prompts
from scenario_gen.split_keys import string_leaves

OWN_DATA = "not self-contained: the user's own data, never given"
ABSENT_DATA = "not self-contained: refers to data it does not give"
UNLISTED = "not self-contained: asks about all of something no tool lists"
MODEL_SAYS = "not self-contained: the writer model found an input missing"
UNCHECKED = "unchecked"
"""The model gave no readable verdict; the task is kept."""

# A computation over a collection: what makes data that is not given matter.
_COMPUTE = re.compile(
    r"\b(average|mean|median|sum|total|add(?:ing)? up|calculate|compute|convert|compare|sort|rank|"
    r"count|how many|maximum|minimum|highest|lowest|largest|smallest|biggest|difference|"
    r"percent(?:age)?|ratio|statistics|stats|standard deviation|variance|percentile)\b",
    re.IGNORECASE,
)
# "my friends' ages", "our monthly sales": the user's own collection
_OWN = re.compile(r"\b(?:my|our)\s+((?:[a-z][\w'-]*\s*){1,3})", re.IGNORECASE)
# "these numbers", "the following list", "the attached file": material the text points at
_POINTED = re.compile(
    r"\b(?:these|those|this|the\s+(?:following|attached|above|below|given|provided|uploaded))\s+"
    r"(?:\w+\s+)?(numbers|values|data|dataset|list|figures|file|table|readings|scores|measurements|"
    r"amounts|entries|records|samples|results|items|prices|expenses)\b",
    re.IGNORECASE,
)
# "for all items", "every product", "each of the orders"
_ALL = re.compile(
    r"\b(?:all|every|each)\s+(?:of\s+)?(?:the\s+|my\s+|our\s+|your\s+|their\s+)?([a-z][\w-]*)", re.IGNORECASE
)
_NOT_NOUNS = {
    "one", "ones", "other", "others", "time", "times", "day", "days", "way", "ways", "kind", "kinds", "sort",
    "that", "this", "these", "those", "them", "it", "of", "in", "at", "from", "to", "and", "or", "year",
    "years", "week", "weeks", "month", "months", "hour", "hours", "minute", "minutes", "right", "set",
}  # fmt: skip
_LISTS = re.compile(
    r"\b(list|lists|search|searches|find|filter|query|browse|all|every|known|titles|catalog)\b"
)
# Concrete values the text gives: a number, a quoted string, or a list written out ("a, b and c")
_VALUE = re.compile(r"\d|\"[^\"]+\"|'[^']{2,}'|\b\w+,\s*\w+,?\s+(?:and|or)\s+\w+")


def _stem(word: str) -> str:
    w = word.lower().strip("'-")
    w = re.sub(r"'s?$", "", w)
    for suffix, repl in (("ies", "y"), ("ses", "s"), ("xes", "x"), ("s", "")):
        if len(w) > 3 and w.endswith(suffix) and not w.endswith("ss"):
            return w[: -len(suffix)] + repl
    return w


def _words(text: str) -> set[str]:
    """Stems of the words of `text`, with snake_case and camelCase split."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ").replace("-", " ")
    return {_stem(w) for w in re.findall(r"[A-Za-z]{3,}", spaced)}


def _tool_text(tool: ToolSpec) -> str:
    props = (tool.parameters.get("properties") or {}) if isinstance(tool.parameters, dict) else {}
    params = " ".join(
        f"{k} {(v or {}).get('description', '')}" for k, v in props.items() if isinstance(v, dict)
    )
    return f"{tool.name} {tool.description} {params}"


def _enumerates(tool: ToolSpec) -> bool:
    """A tool that can produce a collection unprompted: it needs no input, or says it lists or searches."""
    required = tool.parameters.get("required") if isinstance(tool.parameters, dict) else None
    return not required or bool(_LISTS.search(f"{tool.name.replace('_', ' ')} {tool.description}".lower()))


def rule_reason(text: str, tools: list[ToolSpec]) -> str | None:
    """Why the wording alone shows the task cannot be answered (None when no rule fires).

    - a computation over the user's own collection ("my X") the text gives no values of, and no
      tool's vocabulary mentions;
    - a pointer to material that is not there ("these numbers") in a text that gives no values;
    - "all / every X" where no tool that mentions X can enumerate it."""
    vocab: set[str] = set().union(*(_words(_tool_text(t)) for t in tools)) if tools else set()
    gives_values = bool(_VALUE.search(text))
    if not gives_values and _COMPUTE.search(text):
        for m in _OWN.finditer(text):
            nouns = {_stem(w) for w in re.findall(r"[A-Za-z]{3,}", m.group(1))} - _NOT_NOUNS
            if nouns and not nouns & vocab:
                return OWN_DATA
    if not gives_values and _POINTED.search(text):
        return ABSENT_DATA
    for m in _ALL.finditer(text):
        noun = m.group(1).lower()
        if noun in _NOT_NOUNS or len(noun) < 3:
            continue
        stem = _stem(noun)
        if not any(stem in _words(_tool_text(t)) and _enumerates(t) for t in tools):
            return UNLISTED
    return None


# Words any request may use whatever the server holds: what to do, asking, quantity, order, time, money.
_GENERAL = frozenset(
    re.findall(
        r"\w+",
        """
        about above across actual add added adding after again against all along also among amount
        another answer anyone anything appear around ask asked available average based because been
        before begin begins being below best better between bigger biggest both bought bring buy
        calculate call called can carry change cheap cheaper check choice choose combine compare
        complete compute console contain contained contains content contents cost costs could count
        create created current currently data date describe described detail details determine differ
        different display does doing dollar dollars done double dozen each eight either eleven else
        empty end ends enough entire euro euros every everyone everything exact exactly exceed exceeds
        exist existing exists expensive explain fetch fewer field fields filter find first five
        following four from full fully general get getting give given going good greater half have
        having help here higher highest hundred identify include included includes including indicating
        info information into item items just keep kind know known large largest last latest least left
        less letter like list located longer look lower lowest made make many matching maximum mean
        mention mentioned minimum money more most much must name named names need new newer newest next
        nine note nothing number numbers object objects often older oldest once one only open option
        options order other over overview people please present price prices print product products
        provide provided put read recent recently recommend record records related remaining remove
        report request retrieve return same save screen search see sell seven shorter should show shown
        similar single six smaller smallest sold some somebody someone something sort specific spend
        spent start starting state stating stored such suggest summarize summary tell ten than that
        their them then there these they thing things this those thousand three through time today total
        twelve twenty twice two type types under update using value values view want what when where
        whether which while whole will with within without worst would your
        """,
    )
)
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']{2,}'|`[^`]*`")
_PATHLIKE = re.compile(r"\S*[\w)][/\\.:@#][\w(]\S*")  # a path, file name, address or id: a value, not a word


def _root(word: str) -> str:
    """A crude English root: "lives", "living" and "live" all give "liv"; "teaches" gives "teach"."""
    for suffix in ("ies", "ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _supported(word: str, known: set[str], roots: set[str], heads: set[str]) -> bool:
    """`word` (lower case), a word of the same root, or one sharing its first five letters ("teaches",
    "teacher") is known; `roots` and `heads` are the known words' roots and five-letter beginnings."""
    return word in known or _root(word) in roots or (len(word) >= 5 and word[:5] in heads)


def said(result_text: str, arguments: dict[str, Any] | None) -> str:
    """What a read's result says of the server, less the call's own string arguments: a search result
    that echoes its query ("query": "supplier paid winter") says nothing of suppliers."""
    out = result_text
    for value in string_leaves(arguments or {}):
        if len(value) >= 3:
            out = out.replace(value, " ")
    return out


def unsupported_terms(text: str, known_text: str) -> list[str]:
    """Words of a task (four letters or more, outside its quoted values, not a word any request uses)
    that `known_text` never mentions: what the task speaks of that the server did not describe or
    return. `known_text` is the tools' own words plus what exploration and one attempt at the task got
    back (see `said`); the solvability pass fails a judged success at a task with such words.

    Why: the writer's false premises and requests no tool can serve passed both the writer model's
    self-contained verdict and the solvability pass's judge, 2026-12-07 on the memory graph server
    ("What is the city where Anna Weber teaches?", "I want to know who is the mother of Anna Weber.",
    "Schedule a meeting between Paul Moreau and Anna Weber.": each kept, each solved "always")."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", known_text).replace("_", " ")
    known = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", spaced)}
    roots, heads = {_root(k) for k in known}, {k[:5] for k in known if len(k) >= 5}  # once, not per word
    asked = re.findall(r"[A-Za-z]{4,}", _PATHLIKE.sub(" ", _QUOTED.sub(" ", text)))
    out: list[str] = []
    for w in asked:
        low = w.lower()
        superlative = low.endswith("est") and len(low) > 6  # "cheapest", "lightest": an order, not a thing
        if (
            low not in _GENERAL
            and not superlative
            and not _supported(low, known, roots, heads)
            and low not in out
        ):
            out.append(low)
    return out


class Answerability(BaseModel):
    """The writer model's verdict. Lenient about shapes: "yes"/"no" read as booleans."""

    answerable: bool
    missing: str = ""
    inputs: list[Any] = Field(default_factory=list)

    @field_validator("answerable", mode="before")
    @classmethod
    def _yes_no(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() in ("yes", "no", "true", "false"):
            return v.strip().lower() in ("yes", "true")
        return v

    @field_validator("missing", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        if isinstance(v, list):
            return ", ".join(str(x) for x in v)
        return "" if v is None else str(v)


def _parse(reply: str) -> tuple[Answerability | None, list[str]]:
    try:
        obj = extract_json(reply, want=dict)
    except JsonReplyError as e:
        return None, [f"Your reply could not be read as JSON: {e}."]
    try:
        return Answerability.model_validate(obj), []
    except ValueError:
        return None, ['"answerable" must be true or false.']


async def model_verdict(
    text: str, tools: list[ToolSpec], model: ChatModel, language: str = "en"
) -> Answerability | None:
    """The writer model's verdict on one task, or None when it gave none that could be read."""
    asked = await ask_with_repair(
        model,
        writer_prompts.self_contained_question(text, tools, language),
        _parse,
        follow_up(
            lambda problems: (
                " ".join(problems) + ' Reply with only the JSON: {"answerable": ..., "missing": "..."}'
            )
        ),
        max_retries=1,
        # greedy: the same task gets the same verdict on every run
        sampling=SamplingParams(temperature=0.0, max_new_tokens=200, seed=0),
        who="the writer",
    )
    return asked.value


async def self_contained(task: Task, tools: list[ToolSpec], model: ChatModel | None) -> tuple[bool, str]:
    """(ok, reason): the rules first, then (with a model) its verdict. The reason of a drop says which
    check failed (one of the module's constants, so drops are counted by kind); the missing input the
    model names is added after a colon. ok with reason "" passed both; UNCHECKED: no readable verdict."""
    reason = rule_reason(task.text, tools)
    if reason:
        return False, reason
    if model is None:
        return True, ""
    verdict = await model_verdict(task.text, tools, model, task.language)
    if verdict is None:
        return True, UNCHECKED
    if not verdict.answerable:
        return False, f"{MODEL_SAYS}: {verdict.missing}" if verdict.missing.strip() else MODEL_SAYS
    return True, ""
