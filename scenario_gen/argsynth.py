"""Arguments for exploratory calls, synthesized from a tool's schema and from values already seen.

Per parameter, candidate values come, best first, from: ids and names seen in earlier results
(`ValuePool`), enums and consts, defaults, `examples`, values quoted in the description
("e.g. 'Europe/London'"), format and pattern hints (date, HH:MM, email), then a value of the right
type within the stated range (`argshapes`). Every shape of schema is met: an array is built from its
item schema within `minItems`/`maxItems` (several names a listing showed, a series of numbers, objects
built field by field); a nested object field by field; `anyOf`/`oneOf` and `type` lists by each of
their alternatives; `$ref`s are inlined first. Optional parameters are mostly left out: the server's
defaults are the likeliest to work. Every proposal fits the schema (`schema_errors`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from mcp_rl.servers.schema import to_openai_parameters
from mcp_rl.servers.tools import ToolSpec
from scenario_gen.argshapes import (
    id_like,
    more_of_a_kind,
    number_series,
    numbers_in_range,
    string_for_format,
)
from scenario_gen.values import TIME_PARAM, ValuePool, is_id_like

_PATH_PARAM = re.compile(r"(^|_)(path|paths|dir|directory|folder|root|repo|repository)$", re.IGNORECASE)
_QUOTED = re.compile(r"'([^'\n]{1,60})'|\"([^\"\n]{1,60})\"|`([^`\n]{1,60})`")
_ARRAY_VARIANTS = 3


@dataclass
class Candidate:
    value: Any
    weight: float
    steps: tuple[int, ...] = ()
    """The exploration steps the value came from (chains are traced through these)."""
    weak: bool = False
    """A made-up placeholder rather than a value with evidence behind it."""


@dataclass
class ArgProposal:
    arguments: dict[str, Any]
    sources: list[int] = field(default_factory=list)
    origin: str = "schema"
    weak: bool = False


def _type_of(schema: dict[str, Any]) -> str:
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "string")
    if t:
        return str(t)
    if schema.get("enum"):
        return type(schema["enum"][0]).__name__.replace("str", "string").replace("int", "integer")
    if "properties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    return "string"


def _alternatives(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null alternatives of `anyOf`/`oneOf` or of a `type` list, each with the keys beside it
    (description, default); [schema] when it has one form."""
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            outer = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            alts = [{**outer, **o} for o in options if isinstance(o, dict) and o.get("type") != "null"]
            if alts:
                return alts
    t = schema.get("type")
    if isinstance(t, list) and len([x for x in t if x != "null"]) > 1:
        return [{**schema, "type": x} for x in t if x != "null"]
    return [schema]


def _fits(value: Any, t: str) -> bool:
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "array":
        return isinstance(value, list)
    if t == "object":
        return isinstance(value, dict)
    return True


def _matches_hints(value: Any, schema: dict[str, Any]) -> bool:
    """A seen value is only offered where it fits the parameter's pattern and format hints."""
    if not isinstance(value, str):
        return True
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            if not re.search(pattern, value):
                return False
        except re.error:
            pass
    if "hh:mm" in str(schema.get("description", "")).lower() and not re.fullmatch(r"\d{1,2}:\d{2}", value):
        return False
    fmt = schema.get("format")
    if fmt == "date" and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return False
    return not (fmt == "email" and "@" not in value)


def _is_query(name: str) -> bool:
    n = name.lower()
    return n in ("q", "query", "search", "keyword", "keywords", "term", "terms", "text") or n.endswith(
        "_query"
    )


def _string_fallbacks(name: str, schema: dict[str, Any]) -> list[Candidate]:
    hinted = string_for_format(name, schema)
    if hinted is not None:
        values, weak = hinted
        return [Candidate(v, 0.3 if weak else 1.0, weak=weak) for v in values]
    if any(w in name.lower() for w in ("query", "search", "keyword", "text", "q")):
        return [Candidate("a", 0.4, weak=True)]
    return [Candidate("example", 0.1, weak=True)]


def _numeric_fallbacks(name: str, schema: dict[str, Any], integer: bool) -> list[Candidate]:
    # A number in the stated range is a fair input to a computation; as an id or an index it is a guess.
    weak = id_like(name)
    return [Candidate(v, 0.5, weak=weak) for v in numbers_in_range(schema, integer)]


def _singular(name: str) -> str:
    n = name
    if n.endswith("ies"):
        return n[:-3] + "y"
    return n[:-1] if n.endswith("s") and not n.endswith("ss") else n


def _distinct(cands: list[Candidate]) -> list[Candidate]:
    seen: set[str] = set()
    out: list[Candidate] = []
    for c in cands:
        key = repr(c.value)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def param_candidates(name: str, schema: dict[str, Any], pool: ValuePool) -> list[Candidate]:
    """Candidate values for one parameter, strongest evidence first."""
    alts = _alternatives(schema)
    if alts != [schema]:
        return _distinct([c for alt in alts for c in param_candidates(name, alt, pool)])
    t = _type_of(schema)
    out: list[Candidate] = []
    if _is_query(name) and t == "string":
        # a word several entries share is searched first: its result lists them all, where a search for
        # one entry's name finds what a lookup by name found already
        out += [Candidate(seen.value, 3.5, steps=(seen.step,)) for seen in pool.shared_words()]
    if "const" in schema:
        return [Candidate(schema["const"], 5.0)]
    if isinstance(schema.get("enum"), list) and [v for v in schema["enum"] if v is not None]:
        return [Candidate(v, 3.0) for v in schema["enum"] if v is not None]
    if t == "array":
        return _array_candidates(name, schema, pool)
    if t == "object":
        return _object_candidates(schema, pool)
    # no value seen under the parameter's name: those of a key its description names, a little less sure
    found = pool.candidates(name)
    # (never for a time: "start timestamp for filtering commits" takes a time, not a commit)
    described = [] if found or TIME_PARAM.search(name) else pool.named_in(str(schema.get("description", "")))
    for seen in found + described:
        if not _matches_hints(seen.value, schema):
            continue
        if _fits(seen.value, t) or (t == "string" and isinstance(seen.value, int | float)):
            value = str(seen.value) if t == "string" else seen.value
            out.append(Candidate(value, 4.0 if found else 3.0, steps=(seen.step,)))
    if t == "string" and _PATH_PARAM.search(name):
        out += [Candidate(p, 3.5) for p in pool.launch_paths]
    if _is_query(name):
        # free-text search parameters: single words from names already seen ("Tent", "Kettle")
        for seen in pool.name_words()[:12]:
            out.append(Candidate(seen.value, 3.0, steps=(seen.step,)))
    if "default" in schema and schema["default"] is not None:
        out.append(Candidate(schema["default"], 2.0))
    for ex in schema.get("examples", []) or []:
        if _fits(ex, t):
            out.append(Candidate(ex, 2.5))
    if t == "string":
        for m in _QUOTED.finditer(str(schema.get("description", ""))):
            q = next(g for g in m.groups() if g)
            out.append(Candidate(q, 2.0))
    if out:
        return out
    if t == "string":
        return _string_fallbacks(name, schema)
    if t in ("integer", "number"):
        return _numeric_fallbacks(name, schema, t == "integer")
    if t == "boolean":
        return [Candidate(False, 0.8), Candidate(True, 0.8)]
    return [Candidate("example", 0.1, weak=True)]


def _object_candidates(schema: dict[str, Any], pool: ValuePool) -> list[Candidate]:
    """A nested object, built field by field like a tool's own arguments."""
    sub = synthesize(schema, pool, random.Random(0), k=3)
    return [Candidate(p.arguments, 4.0 if p.sources else 1.0, tuple(p.sources), p.weak) for p in sub]


def _array_size(schema: dict[str, Any]) -> int:
    """Three entries (enough to compare, few enough to write in a question), within min/maxItems."""
    lo = schema.get("minItems")
    hi = schema.get("maxItems")
    n = min(3, hi) if isinstance(hi, int) else 3
    return max(n, lo if isinstance(lo, int) else 0)


def _array_candidates(name: str, schema: dict[str, Any], pool: ValuePool) -> list[Candidate]:
    """Arrays built from the item schema: distinct entries, pool values (with their steps) first."""
    n = _array_size(schema)
    if n == 0:
        return [Candidate([], 1.0)]
    prefix = schema.get("prefixItems")
    if isinstance(prefix, list) and prefix:
        return _tuple_candidates(name, prefix, pool)
    item = schema.get("items")
    item = item[0] if isinstance(item, list) and item else item
    item = item if isinstance(item, dict) else {}
    item_alt = _alternatives(item)[0]
    t = _type_of(item_alt)
    if t == "object":
        return [_objects(item_alt, pool, n, v) for v in range(_ARRAY_VARIANTS)]
    inner = _distinct(param_candidates(_singular(name), item, pool))
    sourced = [c for c in inner if c.steps]
    if t in ("integer", "number") and len(sourced) < n:
        series = [number_series(item_alt, t == "integer", n, 3 * v) for v in range(_ARRAY_VARIANTS)]
        return [Candidate(s, 1.0) for s in series if len(s) == n]
    lo = max(1, schema.get("minItems", 1) if isinstance(schema.get("minItems"), int) else 1)
    if sourced:
        # entries of one listing together (the cities one call returned), so the chain has one source
        by_step: dict[tuple[int, ...], list[Candidate]] = {}
        for c in sourced:
            by_step.setdefault(c.steps, []).append(c)
        groups = [g for g in by_step.values() if len(g) >= lo] or [sourced]
        out = [w for g in groups for w in _windows(g, min(n, len(g)), False)]
        if out:
            return _distinct(out)[: 2 * _ARRAY_VARIANTS]
    values = inner
    if len(values) == 1 and len(values) < n and isinstance(values[0].value, str):
        values = [Candidate(w, values[0].weight) for w in more_of_a_kind(values[0].value, n)]
    if not values:
        return []
    repeat = len(values) < n
    if repeat:
        if schema.get("uniqueItems"):
            return []
        values = [values[i % len(values)] for i in range(n)]  # a repeat: the schema allows it
    return _distinct(_windows(values, n, repeat))


def _windows(values: list[Candidate], n: int, weak_repeat: bool) -> list[Candidate]:
    """Up to three arrays of `n` entries: consecutive runs of the values when there are enough for
    runs that do not overlap, else the values rotated by one, by two."""
    out: list[Candidate] = []
    shift = n if len(values) >= 2 * n else 1
    for v in range(min(_ARRAY_VARIANTS, len(values))):
        at = (v * shift) % len(values)
        window = (values[at:] + values[:at])[:n]
        steps = tuple(sorted({s for c in window for s in c.steps}))
        weak = weak_repeat or any(c.weak for c in window)
        weight = 4.0 if steps else 0.3 if weak else 1.5
        out.append(Candidate([c.value for c in window], weight, steps, weak))
    return out


def _tuple_candidates(name: str, prefix: list[Any], pool: ValuePool) -> list[Candidate]:
    columns = [
        param_candidates(f"{name}_{i}", p if isinstance(p, dict) else {}, pool) for i, p in enumerate(prefix)
    ]
    if not all(columns):
        return []
    out = []
    for v in range(_ARRAY_VARIANTS):
        picked = [col[v % len(col)] for col in columns]
        steps = tuple(sorted({s for c in picked for s in c.steps}))
        out.append(
            Candidate([c.value for c in picked], 4.0 if steps else 1.0, steps, any(c.weak for c in picked))
        )
    return _distinct(out)


def _objects(item: dict[str, Any], pool: ValuePool, n: int, variant: int) -> Candidate:
    """`n` objects for an array, field by field: entry j takes each field's j-th value, so the entries
    differ (labels monday, tuesday, ...; values from a series) instead of repeating one object."""
    props: dict[str, Any] = item.get("properties", {}) or {}
    required = [p for p in item.get("required", []) or [] if p in props] or list(props)[:2]
    columns: dict[str, list[Candidate]] = {}
    for p in required:
        sub = props[p] or {}
        cands = _distinct(param_candidates(p, sub, pool))
        t = _type_of(_alternatives(sub)[0])
        if t in ("integer", "number") and not any(c.steps or c.weight >= 2.0 for c in cands):
            series = number_series(_alternatives(sub)[0], t == "integer", n, variant * 3)
            cands = [Candidate(x, 1.0) for x in series] or cands
        elif len(cands) == 1 and isinstance(cands[0].value, str) and not cands[0].steps:
            cands = [
                Candidate(w, cands[0].weight, weak=cands[0].weak) for w in more_of_a_kind(cands[0].value, n)
            ]
        columns[p] = cands
    entries: list[dict[str, Any]] = []
    steps: set[int] = set()
    weak = False
    for j in range(n):
        entry: dict[str, Any] = {}
        for p, cands in columns.items():
            if cands:
                c = cands[(j + variant) % len(cands)]
                entry[p] = c.value
                steps.update(c.steps)
                weak = weak or c.weak
        entries.append(entry)
    return Candidate(entries, 4.0 if steps else 1.0, tuple(sorted(steps)), weak)


def _same_twice(args: dict[str, Any]) -> bool:
    """Two parameters of one kind with one value (source_timezone == target_timezone, scale_from ==
    scale_to): a call that answers nothing worth asking ("what is the difference between UTC and UTC?")."""
    items = [(k, v) for k, v in args.items() if isinstance(v, str)]
    for i, (k1, v1) in enumerate(items):
        for k2, v2 in items[i + 1 :]:
            if v1 != v2 or "_" not in k1 or "_" not in k2:
                continue
            s1, s2 = k1.rsplit("_", 1)[-1], k2.rsplit("_", 1)[-1]
            p1, p2 = k1.split("_", 1)[0], k2.split("_", 1)[0]
            if (s1 == s2 and len(s1) >= 3) or (p1 == p2 and len(p1) >= 3):
                return True
    return False


def _useful_optional(schema: dict[str, Any], options: list[Candidate]) -> bool:
    """An optional parameter is worth setting only with evidence-backed values other than its default."""
    default = schema.get("default")
    return any(o.weight >= 2.0 and not o.weak and o.value != default for o in options)


def synthesize(
    parameters: dict[str, Any],
    pool: ValuePool,
    rng: random.Random,
    k: int = 3,
    optional_rate: float = 0.25,
    context: str = "",
) -> list[ArgProposal]:
    """Up to k distinct argument sets for a parameters schema, each of which fits it. `context`: the
    tool's description, read for a required parameter that nothing else fills (git's `show(revision)`
    "shows the contents of a commit": the commits a log showed)."""
    if _has_ref(parameters):
        parameters = to_openai_parameters(parameters)
    props: dict[str, Any] = parameters.get("properties", {}) or {}
    required = [p for p in parameters.get("required", []) or [] if p in props]
    optional = [p for p in props if p not in required]
    if not props:
        return [ArgProposal({})]
    cands = {p: param_candidates(p, props[p] or {}, pool) for p in props}
    for p in required if context else []:
        if all(c.weak for c in cands[p]):
            described = param_candidates(p, {**(props[p] or {}), "description": context}, pool)
            cands[p] = described if not all(c.weak for c in described) else cands[p]
    proposals: list[ArgProposal] = []
    seen: set[str] = set()
    for i in range(k * 4):
        args: dict[str, Any] = {}
        sources: list[int] = []
        weak = False
        chosen = list(required)
        # the first proposal keeps only required params; later ones sometimes add strong optional ones
        if i > 0:
            chosen += [
                p
                for p in optional
                if _useful_optional(props[p] or {}, cands[p]) and rng.random() < optional_rate
            ]
        for p in chosen:
            options = cands[p]
            if not options:
                continue
            # the i-th proposal walks the best candidates first, then samples by weight
            if p in optional:
                options = [o for o in options if o.value != (props[p] or {}).get("default")] or options
            c = (
                options[i % len(options)]
                if i < len(options)
                else rng.choices(options, [o.weight for o in options])[0]
            )
            args[p] = c.value
            weak = weak or c.weak
            sources += c.steps
        key = repr(sorted(args.items(), key=lambda kv: kv[0]))
        if key in seen or _same_twice(args) or schema_errors(parameters, args):
            seen.add(key)
            continue
        seen.add(key)
        proposals.append(ArgProposal(args, sorted(set(sources)), "pool" if sources else "schema", weak))
        if len(proposals) >= k:
            break
    return proposals


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def schema_errors(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """Why `arguments` break `schema` (empty when they fit). A broken schema is the server's
    problem, not a reason to skip the call: the server has the last word."""
    try:
        validator = Draft202012Validator(schema or {"type": "object"})
        return [e.message for e in validator.iter_errors(arguments)][:3]
    except Exception:
        return []


def tool_takes_ids(tool: ToolSpec) -> bool:
    """True when a required parameter looks like an id (so the tool needs values from other results)."""
    props = tool.parameters.get("properties", {}) or {}
    return any(is_id_like(p) for p in tool.parameters.get("required", []) or [] if p in props)
