"""The train-task sampler: uniform draws as before, and `signal` draws that favour tasks whose groups
still differ, retire tasks that stay flat, and rebuild their history from a run's step files."""

from __future__ import annotations

import random
from collections import Counter

from mcp_rl.curriculum import SamplingConfig, TaskSampler, flat_group
from mcp_rl.rundir import RunDir
from mcp_rl.servers import ServerSpec
from mcp_rl.task import Task
from mcp_rl.train import Trainer
from mcp_rl.train_config import TrainConfig
from mcp_rl.trajectory import Trajectory

TRAIN = [Task(id=f"t{i}", text=f"How many items are in category {i}?") for i in range(8)]
SIGNAL = SamplingConfig(task_sampling="signal")


def group(task_id: str, rewards: list[float], step: int = 1) -> list[Trajectory]:
    return [
        Trajectory(id=f"{task_id}-{step}-{i}", task_id=task_id, group_id=f"{task_id}-{step}", reward=r)
        for i, r in enumerate(rewards)
    ]


def test_uniform_draws_are_the_trainers_old_draws():
    sampler = TaskSampler(TRAIN, SamplingConfig(task_sampling="uniform"), seed=3)
    for step in (1, 2, 7):
        assert sampler.draw(step, 2) == random.Random(3 * 7919 + step).sample(TRAIN, 2)


def test_a_group_is_flat_when_its_rewards_are_all_equal():
    assert flat_group(group("a", [0.25, 0.25, 0.25, 0.25]))
    assert not flat_group(group("a", [0.25, 0.25, 1.0, 0.25]))


def test_tasks_flat_again_and_again_are_retired_and_the_rest_drawn_first():
    sampler = TaskSampler(TRAIN, SIGNAL, seed=0)
    flat = TRAIN[:5]
    for step in range(1, 4):  # retire_after = 3 flat groups in a row
        sampler.record([t for task in flat for t in group(task.id, [0.25] * 4, step)])
    sampler.record(group("t5", [0.0, 1.0, 0.0, 0.0]))
    assert sampler.retired() == 5
    for step in range(1, 30):
        assert {t.id for t in sampler.draw(step, 3)} == {"t5", "t6", "t7"}
    # one group with signal brings a task back
    sampler.record(group("t0", [0.0, 0.25, 0.0, 0.0], step=9))
    assert sampler.retired() == 4 and sampler.weight(TRAIN[0]) == 1.0


def test_decayed_tasks_are_drawn_less_often_than_those_with_signal():
    sampler = TaskSampler(TRAIN, SIGNAL, seed=0)
    sampler.record([t for task in TRAIN[:4] for t in group(task.id, [0.0] * 4)])
    sampler.record([t for task in TRAIN[:4] for t in group(task.id, [0.0] * 4, step=2)])  # weight 0.25
    counts = Counter(t.id for step in range(1, 401) for t in sampler.draw(step, 2))
    decayed = sum(counts[t.id] for t in TRAIN[:4])
    fresh = sum(counts[t.id] for t in TRAIN[4:])
    assert fresh > 2.5 * decayed > 0  # weights 1 against 0.25, drawn two at a time without replacement


def test_when_everything_is_retired_a_step_still_gets_its_tasks():
    sampler = TaskSampler(TRAIN[:3], SIGNAL, seed=0)
    for step in range(1, 4):
        sampler.record([t for task in TRAIN[:3] for t in group(task.id, [1.0] * 4, step)])
    assert sampler.retired() == 3
    drawn = sampler.draw(5, 2)
    assert len(drawn) == 2 and len({t.id for t in drawn}) == 2


def test_a_resumed_run_rebuilds_the_history_from_its_step_files(tmp_path):
    run = RunDir(tmp_path / "run")
    run.create({})
    steps = {
        1: group("t0", [0.0] * 4, 1) + group("t1", [0.0, 1.0, 0.0, 0.0], 1),
        2: group("t0", [0.0] * 4, 2) + group("t2", [0.5] * 4, 2),
        3: group("t0", [0.0] * 4, 3),
    }
    unbroken = TaskSampler(TRAIN, SIGNAL, seed=0)
    for step, trajs in steps.items():
        run.save_trajectories(trajs, run.step_file(step))
        unbroken.record(trajs)
    trainer = Trainer(TrainConfig(), ServerSpec.parse("python -m examples.servers.inventory"), run)
    resumed = trainer.sampler(TRAIN, completed=3)
    assert resumed.flat_in_a_row == unbroken.flat_in_a_row == {"t0": 3, "t1": 0, "t2": 1}
    assert [t.id for t in resumed.draw(4, 3)] == [t.id for t in unbroken.draw(4, 3)]
    assert "t0" not in {t.id for t in resumed.draw(4, 7)}  # retired, 7 others live
