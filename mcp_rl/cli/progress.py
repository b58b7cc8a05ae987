"""Rich progress bars for the phases of a training step (shown only on a terminal)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mcp_rl.phases import Advance, Phases


class RichPhases(Phases):
    def __init__(self, console: Console) -> None:
        self.console = console

    @contextmanager
    def phase(self, name: str, total: int) -> Iterator[Advance]:
        if not self.console.is_terminal:  # a log file gets the step lines only, no bar residue
            yield lambda n=1: None
            return
        # transient: the bar goes away when the phase ends, leaving the step's one summary line.
        with Progress(
            TextColumn("{task.description:>10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        ) as bar:
            task = bar.add_task(name, total=total)
            yield lambda n=1: bar.advance(task, n)
