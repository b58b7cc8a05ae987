"""The layers hold: every import in the packages points to its own layer or one below it.

    cli                      mcp_rl.cli, mcp_rl.__main__
    training                 the rest of mcp_rl: train, evaluate, grpo, rundir, export, serve, ...
    tasks | judges           scenario_gen, judges (peers: neither imports the other)
    rollout                  mcp_rl.rollout
    base                     servers, models, the task and trajectory records, structured output, errors
                             (and `mcp_rl` itself, whose __init__ re-exports only these)

Read from the source with `ast` (imports inside functions count too: a lazy import is still a
dependency), so it needs nothing imported and fails the moment someone adds an upward import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("mcp_rl", "scenario_gen", "judges")

BASE = (
    "mcp_rl.servers", "mcp_rl.models", "mcp_rl.task", "mcp_rl.answer_rule", "mcp_rl.trajectory",
    "mcp_rl.structured", "mcp_rl.usage", "mcp_rl.errors", "mcp_rl.faults", "mcp_rl.atomic", "mcp_rl.toolcalls", "mcp_rl.policy_prompt",
)  # fmt: skip
LAYERS = {"base": 0, "rollout": 1, "scenario_gen": 2, "judges": 2, "training": 3, "cli": 4}


def layer_of(module: str) -> str:
    if module == "mcp_rl":
        return "base"  # its __init__ re-exports base records only (errors, servers, trajectories)
    if module.startswith(("mcp_rl.cli", "mcp_rl.__main__")):
        return "cli"
    if any(module == b or module.startswith(b + ".") for b in BASE):
        return "base"
    if module.startswith("mcp_rl.rollout"):
        return "rollout"
    if module.startswith("scenario_gen"):
        return "scenario_gen"
    if module.startswith("judges"):
        return "judges"
    return "training"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import of our packages in the file."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return [(line, m) for line, m in out if m.split(".")[0] in PACKAGES]


def violations(root: Path = REPO) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            here = module_name(path) if root == REPO else ".".join(path.relative_to(root).with_suffix("").parts)
            mine = layer_of(here)
            for line, target in imports(path):
                theirs = layer_of(target)
                upward = LAYERS[theirs] > LAYERS[mine]
                peer = LAYERS[theirs] == LAYERS[mine] and theirs != mine  # tasks <-> judges
                if upward or peer:
                    found.append(f"{path.relative_to(root)}:{line} ({mine}) imports {target} ({theirs})")
    return found


def test_no_module_imports_from_a_layer_above_it():
    assert violations() == []


@pytest.mark.parametrize(
    ("where", "planted"),
    [
        ("judges/planted.py", "from scenario_gen.task_writer import x\n"),  # a peer
        ("mcp_rl/rollout/planted.py", "from judges import run_checks\n"),  # upward
        ("mcp_rl/servers/planted.py", "def f():\n    from mcp_rl.train import Trainer\n"),  # lazy, upward
        ("scenario_gen/planted.py", "import mcp_rl.cli.train_cmd\n"),
    ],
)
def test_a_planted_upward_import_is_caught(tmp_path, where, planted):
    # A copy of the packages with one upward import added: the check must name it.
    import shutil

    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / where).write_text(planted, encoding="utf-8")
    found = violations(tmp_path)
    assert len(found) == 1 and found[0].startswith(where), found
