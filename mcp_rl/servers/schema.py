"""MCP input schemas -> what a model can read, and argument validation against the original.

Servers send JSON Schema with `$ref`/`$defs`, `anyOf` with null, `type` arrays, missing
descriptions and empty `properties`. Small models read a flat, explicit schema best, so the
converted form inlines references and simplifies nullables. Validation always uses the
schema exactly as the server sent it: the server is the authority on what it accepts.
"""

from __future__ import annotations

import copy
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

_DROP_KEYS = {"$schema", "$id", "$defs", "definitions", "$comment"}


def _resolve_ref(ref: str, root: dict[str, Any]) -> dict[str, Any] | None:
    if not ref.startswith("#/"):
        return None  # remote refs are never fetched
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, dict) else None


def _simplify(node: Any, root: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    if isinstance(node, list):
        return [_simplify(x, root, seen) for x in node]
    if not isinstance(node, dict):
        return node

    if "$ref" in node:
        ref = node["$ref"]
        target = _resolve_ref(ref, root) if ref not in seen else None
        if target is None:
            # Unresolvable or recursive: degrade to "any object" rather than fail the tool.
            return {"type": "object", "description": node.get("description", f"(see {ref})")}
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _simplify(merged, root, (*seen, ref))

    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP_KEYS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _simplify(sub, root, seen) for name, sub in value.items()}
        elif isinstance(value, dict | list):
            out[key] = _simplify(value, root, seen)
        else:
            out[key] = value

    # anyOf/oneOf [X, null] -> X, nullable: models see one clear type.
    for key in ("anyOf", "oneOf"):
        options = out.get(key)
        if isinstance(options, list):
            non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(non_null) == 1 and len(non_null) < len(options):
                del out[key]
                inner = non_null[0]
                out = {**inner, **out}
                out["nullable"] = True

    # type: ["string", "null"] -> type: "string", nullable
    t = out.get("type")
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        if len(non_null) < len(t):
            out["nullable"] = True
        out["type"] = non_null[0] if len(non_null) == 1 else non_null or "string"
    return out


def to_openai_parameters(input_schema: dict[str, Any] | None) -> dict[str, Any]:
    """Convert a tool's input schema into an OpenAI function `parameters` object."""
    root = copy.deepcopy(input_schema) if isinstance(input_schema, dict) else {}
    params = _simplify(root, root)
    if not isinstance(params, dict):
        params = {}
    params.setdefault("type", "object")
    if params["type"] != "object":
        params = {"type": "object", "properties": {}}
    props = params.setdefault("properties", {})
    if not isinstance(props, dict):
        params["properties"] = props = {}
    for name, prop in props.items():
        if isinstance(prop, dict) and not prop.get("description"):
            prop["description"] = prop.get("title") or name.replace("_", " ")
        if isinstance(prop, dict):
            prop.pop("title", None)
    params.pop("title", None)
    required = params.get("required")
    if required is not None:
        params["required"] = [r for r in required if r in props]
    return params


def schema_problem(input_schema: dict[str, Any] | None) -> str | None:
    """Why a schema cannot be used for validation, or None when it is fine."""
    if input_schema is None:
        return None
    if not isinstance(input_schema, dict):
        return f"inputSchema is a {type(input_schema).__name__}, not an object"
    try:
        Draft202012Validator.check_schema(input_schema)
    except SchemaError as e:
        return f"invalid JSON Schema: {e.message}"
    return None


def validate_arguments(input_schema: dict[str, Any] | None, arguments: Any) -> list[str]:
    """Every way `arguments` breaks the tool's schema, as short messages a model can act on."""
    if not isinstance(arguments, dict):
        return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    if not input_schema or schema_problem(input_schema):
        return []  # nothing reliable to check against: let the server decide
    validator = Draft202012Validator(input_schema)
    errors = []
    for err in sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path)
        errors.append(f"{where}: {err.message}" if where else err.message)
    return errors[:5]
