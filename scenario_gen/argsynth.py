"""Arguments for exploratory calls, synthesized from a tool's schema and from values already seen.

Per parameter, candidate values come, best first, from: ids and names seen in earlier results
(`ValuePool`), enums and consts, defaults, `examples`, values quoted in the description
("e.g. 'Europe/London'"), format and pattern hints (date, HH:MM, email), then a plain value of the
right type. Optional parameters are mostly left out: the server's defaults are the likeliest to work.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jsonschema import Draft202012Validator

from mcp_rl.servers.tools import ToolSpec
from scenario_gen.values import ValuePool, is_id_like

_QUOTED = re.compile(r"'([^'\n]{1,60})'|\"([^\"\n]{1,60})\"|`([^`\n]{1,60})`")


@dataclass
class Candidate:
    value: Any
    weight: float
    step: int | None = None
    """The exploration step the value came from (chains are traced through this)."""
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
    return "string"


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
    desc = f"{schema.get('description', '')} {schema.get('title', '')}".lower()
    fmt = schema.get("format", "")
    now = datetime.now(UTC)
    if fmt == "date-time":
        return [Candidate(now.replace(microsecond=0).isoformat(), 1.0)]
    if fmt == "date" or name.lower().endswith("date"):
        return [Candidate(now.date().isoformat(), 1.0)]
    if "hh:mm" in desc or name.lower() == "time":
        return [Candidate(v, 1.0) for v in ("09:30", "14:00", "18:45")]
    if fmt == "email" or "email" in name.lower():
        return [Candidate("alex@example.com", 0.3, weak=True)]
    if fmt in ("uri", "url") or "url" in name.lower():
        return [Candidate("https://example.com", 0.3, weak=True)]
    if any(w in name.lower() for w in ("query", "search", "keyword", "text", "q")):
        return [Candidate("a", 0.4, weak=True)]
    return [Candidate("example", 0.1, weak=True)]


def _numeric_fallbacks(schema: dict[str, Any], integer: bool) -> list[Candidate]:
    lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
    hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 10))
    vals = sorted({lo + 1, min(hi, lo + 3), min(hi, lo + 5)})
    vals = [v for v in vals if lo <= v <= hi] or [lo]
    return [Candidate(int(v) if integer else float(v), 0.5, weak=True) for v in vals]


def param_candidates(name: str, schema: dict[str, Any], pool: ValuePool) -> list[Candidate]:
    """Candidate values for one parameter, strongest evidence first."""
    t = _type_of(schema)
    out: list[Candidate] = []
    if "const" in schema:
        return [Candidate(schema["const"], 5.0)]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return [Candidate(v, 3.0) for v in schema["enum"] if v is not None]
    for seen in pool.candidates(name):
        if not _matches_hints(seen.value, schema):
            continue
        if _fits(seen.value, t) or (t == "string" and isinstance(seen.value, int | float)):
            value = str(seen.value) if t == "string" else seen.value
            out.append(Candidate(value, 4.0, step=seen.step))
    if _is_query(name):
        # free-text search parameters: single words from names already seen ("Tent", "Kettle")
        for seen in pool.name_words()[:12]:
            out.append(Candidate(seen.value, 3.0, step=seen.step))
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
        return _numeric_fallbacks(schema, t == "integer")
    if t == "boolean":
        return [Candidate(False, 0.8), Candidate(True, 0.8)]
    if t == "array":
        inner = param_candidates(name.rstrip("s"), schema.get("items", {}) or {}, pool)
        return [Candidate([c.value], c.weight * 0.8, c.step, c.weak) for c in inner[:3]]
    if t == "object":
        sub = synthesize(schema, pool, random.Random(0), k=1)
        return [Candidate(p.arguments, 0.5, weak=p.weak) for p in sub]
    return [Candidate("example", 0.1, weak=True)]


def _same_twice(args: dict[str, Any]) -> bool:
    """Two parameters of one kind with one value (source_timezone == target_timezone): a call that
    answers nothing worth asking ("what is the difference between UTC and UTC?")."""
    items = [(k, v) for k, v in args.items() if isinstance(v, str)]
    for i, (k1, v1) in enumerate(items):
        for k2, v2 in items[i + 1 :]:
            s1, s2 = k1.rsplit("_", 1)[-1], k2.rsplit("_", 1)[-1]
            if v1 == v2 and s1 == s2 and len(s1) >= 3:
                return True
    return False


def _useful_optional(schema: dict[str, Any], options: list[Candidate]) -> bool:
    """An optional parameter is worth setting only with evidence-backed values other than its default."""
    default = schema.get("default")
    return any(o.weight >= 2.0 and not o.weak and o.value != default for o in options)


def synthesize(
    parameters: dict[str, Any], pool: ValuePool, rng: random.Random, k: int = 3, optional_rate: float = 0.25
) -> list[ArgProposal]:
    """Up to k distinct argument sets for a parameters schema."""
    props: dict[str, Any] = parameters.get("properties", {}) or {}
    required = [p for p in parameters.get("required", []) or [] if p in props]
    optional = [p for p in props if p not in required]
    if not props:
        return [ArgProposal({})]
    cands = {p: param_candidates(p, props[p] or {}, pool) for p in props}
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
            if c.step is not None:
                sources.append(c.step)
        key = repr(sorted(args.items(), key=lambda kv: kv[0]))
        if key in seen or _same_twice(args):
            continue
        seen.add(key)
        proposals.append(ArgProposal(args, sorted(set(sources)), "pool" if sources else "schema", weak))
        if len(proposals) >= k:
            break
    return proposals


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
