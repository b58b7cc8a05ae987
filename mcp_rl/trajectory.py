"""A trajectory: one episode of the policy working one task against the live server.

It carries everything later stages need: the readable conversation (for judges and reports),
every tool call with its outcome (for checks), and the token ids with a mask of exactly the
tokens the model sampled plus their sampling log-probs (for GRPO).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_rl.atomic import parquet_bytes, write_atomic
from mcp_rl.servers.results import CallStatus

EpisodeEnd = Literal["answer", "max_turns", "context", "server_error", "error"]


class ToolCallRecord(BaseModel):
    turn: int
    name: str
    arguments: dict[str, Any] | None = None
    raw: str = ""
    """The text the call was parsed from."""
    tagged: bool = False
    """Written in `<tool_call>` tags, the form other runtimes parse (`ParsedCall.tagged`)."""
    valid: bool = True
    """Parsed, names a known allowed tool, passes its schema. Invalid calls are never sent."""
    status: CallStatus = CallStatus.INVALID
    result_text: str = ""
    """What the model was shown: the tool output, or why the call was invalid."""
    latency_s: float = 0.0


class Trajectory(BaseModel):
    id: str
    task_id: str
    group_id: str = ""
    """Trajectories sampled together for the same task (one GRPO group) share this."""
    task_text: str = ""
    model: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    final_answer: str | None = None
    end: EpisodeEnd = "answer"
    turns: int = 0
    token_ids: list[int] = Field(default_factory=list)
    sampled_mask: list[int] = Field(default_factory=list)
    """1 where token_ids[i] was sampled by the policy, 0 for prompt/tool/template tokens."""
    logprobs: list[float] = Field(default_factory=list)
    """Sampling log-prob of token_ids[i] where sampled_mask[i] == 1, else 0.0."""
    timings: dict[str, float] = Field(default_factory=dict)
    reward: float | None = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    judge_explanation: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def group_key(self) -> str:
        """The GRPO group this trajectory belongs to: its group id, else (a lone episode) its task."""
        return self.group_id or self.task_id

    @property
    def num_sampled_tokens(self) -> int:
        return sum(self.sampled_mask)


# --- serialization -------------------------------------------------------------------------
# Nested fields are stored as JSON strings in Parquet so the file schema stays flat and stable.
_JSON_FIELDS = ("messages", "tool_calls", "timings", "reward_components", "metadata")


def _to_row(t: Trajectory) -> dict[str, Any]:
    row = t.model_dump(mode="json")
    for f in _JSON_FIELDS:
        row[f] = json.dumps(row[f], ensure_ascii=False)
    return row


def _from_row(row: dict[str, Any]) -> Trajectory:
    row = dict(row)
    for f in _JSON_FIELDS:
        if isinstance(row.get(f), str):
            row[f] = json.loads(row[f])
    return Trajectory.model_validate(row)


_TOKEN_FIELDS = ("token_ids", "sampled_mask", "logprobs")


def redact_strings(value: Any, redact: Callable[[str], str]) -> Any:
    """`value` (JSON-like: dicts, lists, strings) with `redact` applied to every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_strings(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_strings(v, redact) for v in value]
    return value


def redacted(t: Trajectory, redact: Callable[[str], str]) -> Trajectory:
    """`t` with `redact` applied to every string it holds (token ids are numbers: tool results were
    already redacted before the model saw them, see `ServerSession.call`)."""
    data = t.model_dump(mode="json", exclude=set(_TOKEN_FIELDS))
    return Trajectory.model_validate(
        {**redact_strings(data, redact), **{f: getattr(t, f) for f in _TOKEN_FIELDS}}
    )


def save_trajectories(
    trajs: list[Trajectory], path: str | Path, redact: Callable[[str], str] | None = None
) -> Path:
    """Write to `.parquet` (polars) or `.jsonl` with `write_atomic` (whole or not at all). `redact`
    (the server's `ServerSpec.redact`) takes every known secret out of every string first."""
    import polars as pl

    path = Path(path)
    if path.suffix not in (".parquet", ".jsonl"):
        raise ValueError(f"unsupported trajectory file type {path.suffix!r}: use .parquet or .jsonl")
    if redact is not None:
        trajs = [redacted(t, redact) for t in trajs]
    if path.suffix == ".parquet":
        rows = [_to_row(t) for t in trajs]
        schema = {
            "token_ids": pl.List(pl.Int64),
            "sampled_mask": pl.List(pl.Int8),
            "logprobs": pl.List(pl.Float64),
        }
        df = pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None) if rows else pl.DataFrame()
        return write_atomic(path, parquet_bytes(df))
    return write_atomic(path, "".join(t.model_dump_json() + "\n" for t in trajs))


def load_trajectories(path: str | Path) -> list[Trajectory]:
    import polars as pl

    path = Path(path)
    if path.suffix == ".parquet":
        df = pl.read_parquet(path)
        return [_from_row(r) for r in df.iter_rows(named=True)]
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            return [Trajectory.model_validate_json(line) for line in f if line.strip()]
    raise ValueError(f"unsupported trajectory file type {path.suffix!r}: use .parquet or .jsonl")
