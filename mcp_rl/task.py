"""The task record: what a user asks, and (for grounded tasks) how to check the answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

TASK_SCHEMA_VERSION = 1

# Sizes, declared once. A task is a request a user would type and its answer a statement: both far
# below these (the longest written by the offline writer are a few hundred characters). A 50 MB
# task text was once accepted, grew the process to 10 GB and was copied into the run directory.
MAX_TASK_TEXT = 20_000
"""Characters of a task's text (about 5,000 tokens: more than a whole default episode's context)."""
MAX_ANSWER = 20_000
"""Characters of a reference answer."""
MAX_TASK_RECORD = 2_000_000
"""Characters of one task as stored (its reference calls keep whole results): a line of a task
file longer than this is refused before it is parsed."""


class ReferenceCall(BaseModel):
    """A real call made while grounding a task; re-run it to refresh the answer when the world moves."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result_text: str = ""
    """What the call returned when the task was written."""


class AnswerRule(BaseModel):
    """How the reference answer is read out of the reference calls' results, so a grader can re-run the
    calls and re-derive the answer when it depends on time or state (see `scenario_gen.facts.apply_rule`).

    `path` walks the JSON of one result: a key, a list index, or a selector {"key": k, "equals": v}
    picking the list element whose field k equals v."""

    kind: Literal["field", "count", "names", "text"] = "field"
    call_index: int = -1
    path: list[str | int | dict[str, Any]] = Field(default_factory=list)
    transform: Literal["none", "time_hhmm", "date"] = "none"
    name_key: str | None = None
    """For kind "names": the field listed from each element (e.g. "name")."""
    where: dict[str, Any] | None = None
    """For kinds "count" and "names": only the elements whose field `key` equals `equals` ("how many
    commits did Lena Park make?" counts the log's entries with author 'Lena Park')."""


class Provenance(BaseModel):
    generator: str = ""
    seed: int | None = None
    server_name: str = ""
    server_version: str = ""
    created_at: str = ""


class Task(BaseModel):
    schema_version: int = TASK_SCHEMA_VERSION
    id: str
    text: str = Field(max_length=MAX_TASK_TEXT)
    difficulty: int = Field(default=2, ge=1, le=5)
    source: Literal["written", "grounded"] = "written"
    tools_expected: list[str] = Field(default_factory=list)
    reference_calls: list[ReferenceCall] = Field(default_factory=list)
    reference_answer: str | None = Field(default=None, max_length=MAX_ANSWER)
    answer_rule: AnswerRule | None = None
    """For grounded tasks: how `reference_answer` follows from the results of `reference_calls`."""
    answer_depends_on_state: bool = False
    """True when the answer changes with time or server state: re-run `reference_calls` to grade."""
    language: str = "en"
    split: Literal["train", "val", "test"] = "train"
    """train: rollouts; val: plateau and best checkpoint; test: the figure reported (see `split_tasks`)."""
    provenance: Provenance = Field(default_factory=Provenance)
    notes: dict[str, Any] = Field(default_factory=dict)
    """Free-form marks, e.g. {"policy_solve_rate": 0.0} from a solvability pass."""

    @property
    def grounded(self) -> bool:
        return self.source == "grounded" and self.reference_answer is not None
