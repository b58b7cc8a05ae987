"""BFCL's call strings and our tool calls, one into the other.

BFCL writes a call as Python source, e.g. "mv(source='a.txt', destination='temp')" (some pass
arguments by position: "sort('final_report.pdf')"); its checker `eval`s such strings against its own
backend instances. The oracle turns the ground truth into tool calls with `parse_call`; the grader
turns an episode's calls back into strings with `call_string`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from mcp_rl.errors import ConfigError


def parse_call(text: str, positional: Callable[[str], list[str]]) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) of one BFCL call string. `positional(name)` gives the method's parameter
    names in order, for arguments passed by position. Values are Python literals only."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise ConfigError(f"not a BFCL call: {text!r} ({e})") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ConfigError(f"not a BFCL call: {text!r}")
    name = node.func.id
    args: dict[str, Any] = {}
    if node.args:
        names = positional(name)
        for i, a in enumerate(node.args):
            args[names[i]] = ast.literal_eval(a)
    for kw in node.keywords:
        if kw.arg is None:
            raise ConfigError(f"not a BFCL call: {text!r} (** arguments)")
        args[kw.arg] = ast.literal_eval(kw.value)
    return name, args


def call_string(name: str, arguments: dict[str, Any] | None) -> str:
    """A tool call as BFCL's checker reads it: keyword arguments as Python literals."""
    parts = [f"{k}={v!r}" for k, v in (arguments or {}).items()]
    return f"{name}({', '.join(parts)})"
