"""Task sets on disk: JSONL, Parquet and the Hugging Face datasets layout, written and read back."""

from __future__ import annotations

import json

import pytest

from mcp_rl.errors import TaskError
from scenario_gen import AnswerRule, Provenance, ReferenceCall, Task, load_tasks, save_tasks, split_tasks


def _tasks() -> list[Task]:
    prov = Provenance(
        generator="fake", seed=3, server_name="inventory-example", server_version="0.1.0", created_at="now"
    )
    grounded = Task(
        id="g-1",
        text="How much does the Camp Kettle 1L cost?",
        difficulty=2,
        source="grounded",
        tools_expected=["search_items", "get_item"],
        reference_calls=[
            ReferenceCall(
                tool="search_items", arguments={"query": "kettle", "max_results": 3}, result_text='{"n": 1}'
            ),
            ReferenceCall(tool="get_item", arguments={"item_id": "ITM-014"}, result_text='{"price": 29.99}'),
        ],
        reference_answer="29.99",
        answer_rule=AnswerRule(kind="field", call_index=1, path=["price"]),
        provenance=prov,
        notes={"verified": "stable"},
    )
    clock = Task(
        id="g-2",
        text="What time is it in Tokyo?",
        source="grounded",
        tools_expected=["get_current_time"],
        reference_calls=[ReferenceCall(tool="get_current_time", arguments={"timezone": "Asia/Tokyo"})],
        reference_answer="20:15",
        answer_rule=AnswerRule(path=["datetime"], transform="time_hhmm"),
        answer_depends_on_state=True,
        provenance=prov,
    )
    written = [
        Task(
            id=f"w-{i}",
            text=f"Find me a tent for {i + 2} people under 300 dollars",
            difficulty=3,
            provenance=prov,
        )
        for i in range(6)
    ]
    return split_tasks([grounded, clock, *written], 0.3, seed=1)


@pytest.mark.parametrize("name", ["tasks.jsonl", "tasks.parquet", "hfdir", "hfdir-parquet"])
def test_round_trip(tmp_path, name):
    tasks = _tasks()
    if name == "hfdir-parquet":
        path = save_tasks(tasks, tmp_path / name, fmt="hf", hf_files="parquet")
    else:
        path = save_tasks(tasks, tmp_path / name)
    back = load_tasks(path)
    key = lambda t: t.id  # noqa: E731
    assert sorted(back, key=key) == sorted(tasks, key=key)
    assert {t.split for t in back} == {"train", "val", "test"}


def test_hf_layout_files(tmp_path):
    path = save_tasks(_tasks(), tmp_path / "ds")
    assert {p.name for p in path.iterdir()} == {
        "train.jsonl",
        "validation.jsonl",
        "test.jsonl",
        "README.md",
        "dataset_info.json",
    }
    readme = (path / "README.md").read_text()
    assert readme.startswith("---\nconfigs:") and "path: validation.jsonl" in readme
    # flat rows: every row has the same columns with the same types (what Arrow needs)
    rows = [json.loads(line) for line in (path / "train.jsonl").read_text().splitlines()]
    assert all(isinstance(r["reference_calls"], str) for r in rows)
    assert len({tuple(sorted(r)) for r in rows}) == 1


def test_hf_layout_loads_with_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    path = save_tasks(_tasks(), tmp_path / "ds")
    files = {s: str(path / f"{s}.jsonl") for s in ("train", "validation", "test")}
    ds = datasets.load_dataset("json", data_files=files)
    assert ds["train"].num_rows + ds["validation"].num_rows + ds["test"].num_rows == 8
    assert json.loads(ds["train"][0]["reference_calls"]) is not None
    by_dir = datasets.load_dataset(str(path))
    assert set(by_dir) == {"train", "validation", "test"}
    pq = save_tasks(_tasks(), tmp_path / "pq", fmt="hf", hf_files="parquet")
    assert datasets.load_dataset("parquet", data_files=str(pq / "train.parquet"))["train"].num_rows > 0


def test_bad_files_give_clear_errors(tmp_path):
    with pytest.raises(TaskError, match="not found"):
        load_tasks(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    good = _tasks()[0].model_dump_json()
    bad.write_text(good + "\n{not json\n")
    with pytest.raises(TaskError, match=r"bad.jsonl:2"):
        load_tasks(bad)
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(json.dumps({"id": "x", "text": "t", "difficulty": 9}) + "\n")
    with pytest.raises(TaskError, match="difficulty"):
        load_tasks(wrong)
    future = tmp_path / "future.jsonl"
    future.write_text(json.dumps({"id": "x", "text": "t", "schema_version": 99}) + "\n")
    with pytest.raises(TaskError, match="newer"):
        load_tasks(future)
    with pytest.raises(TaskError, match="format"):
        save_tasks([], tmp_path / "tasks.csv")
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(TaskError, match="no train/validation"):
        load_tasks(empty_dir)
