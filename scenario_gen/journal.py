"""What a generation has made so far, on disk as it is made: a run that stops (killed, a crash, the
machine restarted) loses nothing, and the same command again goes on from where it stopped.

A generation of 48 tasks takes an hour or more on two cores (59-78 min on the three third-party
servers, 2026-12-07), and before this journal all of it lived in memory until the last minute.

One JSON object per line, appended and flushed as each thing happens:

    {"run": {...}}            first line: what the run was asked (server, language, instructions)
    {"grounded": {task}}      a grounded question written; again, with `notes.verified`, once its
                              reference calls re-ran and agreed
    {"asked": "g-..."}        a grounded candidate that gave no usable question: not asked again
    {"written": {task}}       a written task that passed every check

A torn last line (the process killed mid-write) is ignored. The solvability pass is not journaled:
a run stopped during it attempts the tasks again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcp_rl.errors import TaskError
from mcp_rl.task import Task


class Journal:
    """Append-only record of one generation's kept work, read back on the next run."""

    def __init__(self, path: Path, run: dict[str, Any]) -> None:
        self.path = path
        self.grounded: dict[str, Task] = {}
        """Grounded tasks written before, by id; the verified ones carry `notes["verified"]`."""
        self.written: dict[str, Task] = {}
        self.asked: set[str] = set()
        """Ids of grounded candidates that were asked and gave nothing usable."""
        self.resumed = path.exists() and path.stat().st_size > 0
        if self.resumed:
            self._read(run)
        self._f = path.open("a", encoding="utf-8")
        if not self.resumed:
            self._append({"run": run})

    def _read(self, run: dict[str, Any]) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if n == len(lines):
                    break  # the line being written when the run stopped
                raise TaskError(
                    f"{self.path}:{n}: not valid JSON: this generation journal is damaged",
                    hint=f"delete {self.path} to start the generation over",
                ) from None
            if n == 1:
                if record.get("run") != run:
                    raise TaskError(
                        f"{self.path} holds the work of a generation asked something else "
                        f"({_difference(record.get('run'), run)})",
                        hint=f"run the earlier command again to go on with it, or delete {self.path} to start over",
                    )
            elif "grounded" in record:
                t = Task.model_validate(record["grounded"])
                self.grounded[t.id] = t
            elif "written" in record:
                t = Task.model_validate(record["written"])
                self.written[t.id] = t
            elif "asked" in record:
                self.asked.add(record["asked"])
                self.grounded.pop(record["asked"], None)

    def _append(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def add_grounded(self, task: Task) -> None:
        self.grounded[task.id] = task
        self._append({"grounded": task.model_dump(mode="json")})

    def add_asked(self, candidate_id: str) -> None:
        self.asked.add(candidate_id)
        self.grounded.pop(candidate_id, None)
        self._append({"asked": candidate_id})

    def add_written(self, task: Task) -> None:
        self.written[task.id] = task
        self._append({"written": task.model_dump(mode="json")})

    def close(self, remove: bool = False) -> None:
        self._f.close()
        if remove:
            self.path.unlink(missing_ok=True)

    @property
    def made(self) -> int:
        """The tasks on record (not an `__len__`: an empty journal must still be truthy)."""
        return len(self.grounded) + len(self.written)


def _difference(old: Any, new: dict[str, Any]) -> str:
    if not isinstance(old, dict):
        return "no run header"
    diff = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return ", ".join(f"{k}: {old.get(k)!r} then, {new.get(k)!r} now" for k in diff)
