"""Progress within a training step, phase by phase (rollouts, judging, training, evaluation).

The trainer says when a phase starts, how many units it has, and when each is done; how that is
shown is the caller's business. This base class shows nothing (library use, tests); the CLI passes
rich progress bars (`mcp_rl.cli.progress`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

Advance = Callable[[int], None]


class Phases:
    @contextmanager
    def phase(self, name: str, total: int) -> Iterator[Advance]:
        """`with phases.phase("rollouts", 8) as advance: ... advance(1) ...`"""
        yield lambda n=1: None
