"""The BFCL data as the installed `bfcl-eval` package ships it: multi-turn entries, their ground
truth, the function docs of each backend class, and the backend classes themselves.

The package pins many heavy dependencies that its data, backends and checker never import, so it is
installed without them (`INSTALL`); every reader here fails with that command when it is missing.
"""

from __future__ import annotations

import importlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from mcp_rl.errors import ConfigError

INSTALL = 'pip install --no-deps "bfcl-eval==2026.3.23" mpmath'
"""How to install the benchmark without the pins it does not need here (the `bench` extra)."""

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
"""The multi-turn categories: executable backends, graded by state and responses."""

BACKENDS = (
    "GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI",
    "VehicleControlAPI",
)  # fmt: skip
"""The backend classes of the multi-turn categories (BFCL's own names)."""


class BfclEntry(BaseModel):
    """One multi-turn entry: the user turns in order, the state each backend starts in, and the
    calls BFCL counts as right for each turn."""

    id: str
    category: str
    turns: list[str]
    """One user message per turn (BFCL gives each turn as a list of messages; they are joined)."""
    initial_config: dict[str, Any] = Field(default_factory=dict)
    involved_classes: list[str]
    excluded_function: list[str] = Field(default_factory=list)
    ground_truth: list[list[str]]
    """Per turn, BFCL's call strings, e.g. "cd(folder='document')"."""
    raw: dict[str, Any] = Field(default_factory=dict, exclude=True)
    """The entry as BFCL wrote it: the checker reads it."""


def require_bfcl() -> Path:
    """The installed package's directory, or a ConfigError naming the install command."""
    try:
        module = importlib.import_module("bfcl_eval")
    except ImportError:
        raise ConfigError(
            "the BFCL benchmark is not installed (package bfcl-eval)",
            hint=f"{INSTALL}   (or pip install -e '.[bench]'; it needs no other dependency)",
        ) from None
    return Path(module.__file__).parent


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check_category(category: str) -> str:
    if category not in CATEGORIES:
        raise ConfigError(f"unknown BFCL category {category!r}", hint="one of: " + ", ".join(CATEGORIES))
    return category


def check_backend(name: str) -> str:
    if name not in BACKENDS:
        raise ConfigError(f"unknown BFCL backend {name!r}", hint="one of: " + ", ".join(BACKENDS))
    return name


@cache
def _category_rows(category: str) -> tuple[list[dict[str, Any]], dict[str, list[list[str]]]]:
    root = require_bfcl() / "data"
    rows = _jsonl(root / f"BFCL_v4_{category}.json")
    answers = {a["id"]: a["ground_truth"] for a in _jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")}
    return rows, answers


def _turn_text(turn: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content", "")) for m in turn if m.get("role") == "user")


def load_entries(category: str, *, backend: str | None = None, limit: int | None = None) -> list[BfclEntry]:
    """The entries of a category in BFCL's order; with `backend`, only those involving that class."""
    check_category(category)
    if backend is not None:
        check_backend(backend)
    rows, answers = _category_rows(category)
    out: list[BfclEntry] = []
    for row in rows:
        if backend is not None and backend not in row["involved_classes"]:
            continue
        out.append(
            BfclEntry(
                id=row["id"],
                category=category,
                turns=[_turn_text(t) for t in row["question"]],
                initial_config=row.get("initial_config") or {},
                involved_classes=list(row["involved_classes"]),
                excluded_function=list(row.get("excluded_function") or []),
                ground_truth=answers[row["id"]],
                raw=row,
            )
        )
        if limit is not None and len(out) >= limit:
            break
    return out


def find_entry(entry_id: str) -> BfclEntry:
    """An entry by id (its category is the id without the trailing number)."""
    category = entry_id.rsplit("_", 1)[0]
    for e in load_entries(category):
        if e.id == entry_id:
            return e
    raise ConfigError(f"no BFCL entry {entry_id!r}", hint=f"ids look like {category}_0")


@cache
def func_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """BFCL's function docs of one backend class (name, description, parameters in BFCL's types)."""
    check_backend(class_name)
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    path = require_bfcl() / "data" / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    return tuple(_jsonl(path))


def backend_class(class_name: str) -> type:
    check_backend(class_name)
    require_bfcl()
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    return getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)


def new_backend(class_name: str, config: dict[str, Any] | None, long_context: bool = False) -> Any:
    """An instance of a backend class in the state `config` gives (BFCL's `_load_scenario`), the way
    BFCL's own executor makes one; stateless classes take no state."""
    import copy

    from bfcl_eval.constants.executable_backend_config import STATELESS_CLASSES

    instance = backend_class(class_name)()
    if class_name not in STATELESS_CLASSES:
        instance._load_scenario(copy.deepcopy(config or {}), long_context=long_context)
    return instance
