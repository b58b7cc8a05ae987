"""The quality figures of a task set: computed from a known task list (and a generation report when
there is one), printed by `generate` and at the start of `train`, with a warning below the floor."""

from __future__ import annotations

import anyio
import pytest

from conftest import INVENTORY
from mcp_rl.rollout.pool import SessionPool
from mcp_rl.servers import ServerSpec, ToolPolicy
from mcp_rl.task import ReferenceCall, Task
from scenario_gen.gen_report import GenReport
from scenario_gen.io import save_tasks
from scenario_gen.quality import GROUNDED_FLOOR, quality_figures, quality_lines
from scenario_gen.self_contained import MODEL_SAYS, OWN_DATA

TOOLS = ["list_categories", "get_item", "search_items", "filter_items"]


def _grounded(i: int, calls: list[str], difficulty: int = 2) -> Task:
    return Task(
        id=f"g{i}", text=f"grounded question {i}", source="grounded", reference_answer="6",
        reference_calls=[ReferenceCall(tool=c) for c in calls], tools_expected=calls, difficulty=difficulty,
    )  # fmt: skip


def _written(i: int, tools: list[str], difficulty: int = 3, mark: str = "passed") -> Task:
    return Task(
        id=f"w{i}", text=f"written request {i}", tools_expected=tools, difficulty=difficulty,
        notes={"self_contained": mark},
    )  # fmt: skip


KNOWN = [
    _grounded(1, ["list_categories"], 1),
    _grounded(2, ["search_items", "get_item"], 3),  # a chain
    _grounded(3, ["filter_items", "get_item"], 4),  # a chain
    _written(1, ["search_items"], 2),
    _written(2, [], 2, mark="unchecked"),
    _written(3, ["not_a_tool"], 5),
]


def test_quality_figures_from_a_known_task_list_and_its_report():
    report = GenReport(
        dropped={OWN_DATA: 3, MODEL_SAYS: 1, "duplicate": 2},
        self_contained={"checked": 7, "passed": 2, "unchecked": 1},
    )
    f = quality_figures(KNOWN, TOOLS, report)
    assert (f.tasks, f.grounded, f.chained, f.written) == (6, 3, 2, 3)
    assert f.grounded_share == 0.5 and f.chain_share == pytest.approx(1 / 3)
    # 7 written tasks checked, 4 of them dropped as not self-contained (duplicates do not count)
    assert (f.self_contained_checked, f.self_contained_passed) == (7, 3)
    assert f.self_contained_share == pytest.approx(3 / 7) and f.self_contained_unchecked == 1
    assert f.tools_used == TOOLS and f.coverage == 1.0  # a tool no server has does not count
    assert f.difficulty == {1: 1, 2: 2, 3: 1, 4: 1, 5: 1}
    assert f.dropped == report.dropped and f.warnings == []
    text = "\n".join(quality_lines(f))
    assert "grounded            50% (3 of 6)" in text
    assert "chained (2+ calls)  33% (2 of 6)" in text
    assert "self-contained      43% (3 of 7); 1 kept without a readable verdict" in text
    assert "tool coverage       100% (4 of 4)" in text
    assert f"{OWN_DATA} (3)" in text and "warning" not in text


def test_a_loaded_task_file_gets_the_same_figures_minus_the_drops():
    f = quality_figures(KNOWN[:4], [*TOOLS, "place_order"], None)
    assert (f.grounded, f.chained) == (3, 2) and f.dropped is None
    assert (f.self_contained_checked, f.self_contained_passed) == (1, 1)  # from the tasks' marks
    assert f.coverage == pytest.approx(4 / 5)
    text = "\n".join(quality_lines(f))
    assert "dropped             not known (a loaded task file)" in text
    assert "unused: place_order" in text and "of those kept" in text


def test_a_grounded_share_below_the_floor_warns_and_says_what_to_do():
    few = [_grounded(1, ["get_item"]), *(_written(i, ["search_items"]) for i in range(4))]
    f = quality_figures(few, TOOLS, GenReport())
    assert f.grounded_share < GROUNDED_FLOOR
    (warning,) = f.warnings
    for what in ("1 of 5 tasks (20%) are grounded", "--instructions", "--allow-tools", "resetCommand"):
        assert what in warning, what
    assert any(line.startswith("warning: only 1 of 5") for line in quality_lines(f))
    # at the floor, no warning
    assert quality_figures([*few[:1], _grounded(2, ["get_item"]), *few[1:3]], TOOLS).warnings == []
    # and an empty set says it measures nothing rather than printing 0%
    empty = quality_figures([], TOOLS)
    assert empty.grounded_share is None and "not measured" in quality_lines(empty)[1]


def test_train_prints_the_quality_figures_of_a_loaded_task_file_before_training(tmp_path):
    from mcp_rl.rundir import RunDir
    from mcp_rl.train import Trainer
    from mcp_rl.train_config import TrainConfig

    tasks = [
        _grounded(1, ["list_categories"]).model_copy(update={"split": "val"}),
        *(_written(i, ["search_items"]).model_copy(update={"split": s}) for i, s in enumerate(["train", "test", "train"])),
    ]  # fmt: skip
    save_tasks(tasks, tmp_path / "tasks.jsonl")
    cfg = TrainConfig(tasks_file=str(tmp_path / "tasks.jsonl"))
    run = RunDir(tmp_path / "run")
    run.create(cfg.model_dump(mode="json"))
    said: list[str] = []
    trainer = Trainer(cfg, ServerSpec.parse(INVENTORY), run, say=said.append)

    async def go():
        async with SessionPool(ServerSpec.parse(INVENTORY), ToolPolicy(allow=TOOLS)) as pool:
            return await trainer.tasks(pool)

    train, val, test = anyio.run(go)
    assert (len(train), len(val), len(test)) == (2, 1, 1)
    text = "\n".join(said)
    assert "Task set quality (4 tasks)" in text and "grounded            25% (1 of 4)" in text
    assert "tool coverage       50% (2 of 4)" in text
    assert "warning: only 1 of 4 tasks (25%) are grounded" in text
