"""Values every task must state because nothing on the server reveals them.

`mcp-server-git --repository R` accepts one `repo_path`, R, and no tool's result ever names it. A task
that says "my project" or "the repo" then cannot be done by anyone: measured 2026-12-05, 35 of 37
written git tasks failed the solvability pass that way, and 5 of 11 grounded questions said "the
repo". Such a value is found from exploration alone (no server is special-cased): a parameter whose
every OK call used one path the server was started on, a path no result showed. A task that does
not state it gets it added, as a user would give it: "... (repo path: R)".
"""

from __future__ import annotations

from scenario_gen.explorer import ExploreResult


def server_context(explore: ExploreResult) -> dict[str, str]:
    """{parameter: value} for each parameter whose only accepted value is an unrevealed launch path."""
    shown = explore.pool.shown()
    used: dict[str, set[str]] = {}
    for step in explore.steps:
        if step.ok:
            for k, v in step.arguments.items():
                if isinstance(v, str):
                    used.setdefault(k, set()).add(v)
    launch = set(explore.pool.launch_paths)
    return {
        k: next(iter(vs))
        for k, vs in sorted(used.items())
        if len(vs) == 1 and vs <= launch and not vs & shown
    }


def state_context(text: str, context: dict[str, str]) -> str:
    """`text` with each context value it does not state added at the end."""
    missing = [(k, v) for k, v in context.items() if v not in text]
    if not missing:
        return text
    given = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in missing)
    return f"{text.rstrip()} ({given})"
