"""Task sets on disk: JSONL, Parquet, and a Hugging Face `datasets` layout.

- `tasks.jsonl`: one Task per line, nested as the record is.
- `tasks.parquet`: one row per task; nested fields (reference calls, rule, provenance, notes) are
  JSON strings, since tool arguments differ in shape from task to task and a columnar schema cannot
  hold them as structs.
- a directory: `train.jsonl` + `validation.jsonl` + `test.jsonl` (or `.parquet`) in that flat form
  (a split with no task has no file), with a README
  whose YAML header names the splits, so both `datasets.load_dataset(DIR)` and
  `datasets.load_dataset("json", data_files={"train": DIR/train.jsonl, ...})` read it.
`load_tasks` reads all three (and the flat form in JSONL) back into Task records.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import ValidationError

from mcp_rl.atomic import no_room, parquet_bytes, write_atomic
from mcp_rl.errors import OutputError, TaskError
from mcp_rl.task import MAX_ANSWER, MAX_TASK_RECORD, MAX_TASK_TEXT, TASK_SCHEMA_VERSION, Task

Format = Literal["jsonl", "parquet", "hf"]
_NESTED = ("reference_calls", "answer_rule", "provenance", "notes")
_HF_SPLITS = {"train": "train", "val": "validation", "test": "test"}


def flat_record(task: Task) -> dict[str, Any]:
    """A task as one row of scalars and string lists (nested fields as JSON text)."""
    d = task.model_dump(mode="json")
    for k in _NESTED:
        d[k] = json.dumps(d[k], ensure_ascii=False, sort_keys=True)
    return d


def _from_record(d: dict[str, Any], where: str) -> Task:
    d = dict(d)
    for k in _NESTED:
        if isinstance(d.get(k), str):
            try:
                d[k] = json.loads(d[k])
            except json.JSONDecodeError as e:
                raise TaskError(f"{where}: field {k!r} is not valid JSON: {e}") from None
        if d.get(k) is None:
            d.pop(k, None)
    version = d.get("schema_version", TASK_SCHEMA_VERSION)
    if isinstance(version, int) and version > TASK_SCHEMA_VERSION:
        raise TaskError(
            f"{where}: task schema version {version} is newer than this mcp-rl understands ({TASK_SCHEMA_VERSION})",
            hint="upgrade mcp-rl",
        )
    try:
        return Task.model_validate(d)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first.get("loc", ()))
        raise TaskError(
            f"{where}: not a valid task ({loc}: {first.get('msg')})",
            hint="task files are written by `mcp-rl generate`; check the file was not edited by hand",
        ) from None


def detect_format(path: Path) -> Format:
    if path.is_dir() or (path.suffix == "" and not path.is_file()):
        return "hf"
    if path.suffix == ".parquet":
        return "parquet"
    if path.suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    raise TaskError(
        f"cannot tell the format of {path}",
        hint="use a .jsonl or .parquet file name, or a directory for the datasets layout",
    )


def _write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    schema = {
        "schema_version": pl.Int64, "id": pl.Utf8, "text": pl.Utf8, "difficulty": pl.Int64, "source": pl.Utf8,
        "tools_expected": pl.List(pl.Utf8), "reference_calls": pl.Utf8, "reference_answer": pl.Utf8,
        "answer_rule": pl.Utf8, "answer_depends_on_state": pl.Boolean, "language": pl.Utf8, "split": pl.Utf8,
        "provenance": pl.Utf8, "notes": pl.Utf8,
    }  # fmt: skip
    write_atomic(path, parquet_bytes(pl.DataFrame(rows, schema=schema)))


def _readme(tasks: list[Task], ext: str) -> str:
    counts = {s: sum(t.split == s for t in tasks) for s in _HF_SPLITS}
    prov = tasks[0].provenance if tasks else None
    lines = ["---", "configs:", "- config_name: default", "  data_files:"]
    for split, hf in _HF_SPLITS.items():
        if counts[split]:
            lines += [f"  - split: {hf}", f"    path: {hf}.{ext}"]
    lines += [
        "---",
        "",
        "# mcp-rl task set",
        "",
        f"{len(tasks)} tasks ({counts['train']} train, {counts['val']} validation, {counts['test']} test) "
        "written by `mcp-rl generate`; no reference call or entity is shared between splits.",
    ]
    if prov:
        lines.append(
            f"Server: {prov.server_name} {prov.server_version}; generator: {prov.generator}; seed: {prov.seed}; "
            f"created: {prov.created_at}."
        )
    lines += [
        "",
        "Columns: `text` (the request), `difficulty` (1-5), `source` (written / grounded), `tools_expected`,",
        "`reference_calls` and `answer_rule` (JSON text: the real calls a grounded answer was read from, and",
        "how), `reference_answer`, `answer_depends_on_state` (re-run the calls to grade), `split`.",
        "Load with `datasets.load_dataset(DIR)` or `scenario_gen.load_tasks(DIR)`.",
        "",
    ]
    return "\n".join(lines)


def save_tasks(
    tasks: list[Task],
    path: str | Path,
    fmt: Format | None = None,
    hf_files: Literal["jsonl", "parquet"] = "jsonl",
) -> Path:
    """Write tasks to `path` in `fmt` (from the path when not given), whole or not at all: a file
    with `write_atomic`, a datasets directory staged beside `path` and swapped in once complete. An
    empty task set is refused (it would only ever replace something with nothing). `path` may be the
    file the tasks were read from. Returns the path written."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if not tasks:
        raise TaskError(
            f"no tasks to write to {path}: nothing was written", hint="an empty task set replaces nothing"
        )
    if fmt == "hf":
        return _save_directory(tasks, path, hf_files)
    if fmt == "parquet":
        _write_parquet([flat_record(t) for t in tasks], path)
    else:
        _write_jsonl([t.model_dump(mode="json") for t in tasks], path)
    return path


def _save_directory(tasks: list[Task], path: Path, hf_files: Literal["jsonl", "parquet"]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        out = stage / path.name
        out.mkdir()
        for split, hf in _HF_SPLITS.items():
            rows = [flat_record(t) for t in tasks if t.split == split]
            if rows:  # a split with no task has no file
                (_write_jsonl if hf_files == "jsonl" else _write_parquet)(rows, out / f"{hf}.{hf_files}")
        write_atomic(out / "README.md", _readme(tasks, hf_files))
        info = {"num_tasks": len(tasks), "schema_version": TASK_SCHEMA_VERSION, "format": hf_files}
        write_atomic(out / "dataset_info.json", json.dumps(info, indent=2) + "\n")
        old = stage / "old"
        if path.is_dir():
            os.replace(path, old)  # a directory cannot be renamed over a non-empty one
        try:
            os.replace(out, path)
        except OSError:
            if old.exists():
                os.replace(old, path)
            raise
    except OSError as e:
        if no_room(e):
            raise OutputError(
                f"no room left on the disk while writing {path}: {e.strerror or e}",
                hint="free some space and run the command again (nothing was written)",
            ) from e
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return path


def _read_jsonl(path: Path) -> list[Task]:
    tasks = []
    with path.open(encoding="utf-8") as f:
        n = 0
        # readline with a limit: a huge line is refused after MAX_TASK_RECORD characters, not read whole
        while line := f.readline(MAX_TASK_RECORD + 1):
            n += 1
            if len(line) > MAX_TASK_RECORD:
                raise TaskError(
                    f"{path}:{n}: this task is over {MAX_TASK_RECORD:,} characters long (a task's text may "
                    f"have at most {MAX_TASK_TEXT:,}, its answer {MAX_ANSWER:,})",
                    hint="a task is a request a user would type; check the file is a task set",
                )
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise TaskError(
                    f"{path}:{n}: not valid JSON ({e.msg})", hint="each line must be one JSON task"
                ) from None
            if not isinstance(record, dict):
                raise TaskError(f"{path}:{n}: expected a JSON object per line")
            tasks.append(_from_record(record, f"{path}:{n}"))
    return tasks


def _read_parquet(path: Path) -> list[Task]:
    try:
        df = pl.read_parquet(path)
    except Exception as e:
        raise TaskError(f"cannot read Parquet file {path}: {e}") from None
    return [_from_record(r, f"{path} row {i}") for i, r in enumerate(df.to_dicts())]


def load_tasks(path: str | Path) -> list[Task]:
    """Tasks from a .jsonl/.parquet file or a datasets-layout directory."""
    path = Path(path)
    if not path.exists():
        raise TaskError(
            f"task file not found: {path}", hint="create one with `mcp-rl generate --server ... -o FILE`"
        )
    fmt = detect_format(path)
    if fmt == "parquet":
        return _read_parquet(path)
    if fmt == "jsonl":
        return _read_jsonl(path)
    tasks: list[Task] = []
    found = False
    for split, hf in _HF_SPLITS.items():
        for ext, reader in (("jsonl", _read_jsonl), ("parquet", _read_parquet)):
            f = path / f"{hf}.{ext}"
            if f.is_file():
                found = True
                tasks += [t.model_copy(update={"split": split}) for t in reader(f)]
    if not found:
        raise TaskError(
            f"{path} holds no train/validation/test files",
            hint="expected train.jsonl / validation.jsonl / test.jsonl (or .parquet)",
        )
    return tasks
