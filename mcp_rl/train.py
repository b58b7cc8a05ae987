"""The training loop, top to bottom.

    tasks  = load or generate (train / val / test, disjoint by reference call and entity)
    base   = evaluate the model without its adapter on val, and once on test
    repeat:  draw train tasks (those whose groups still differ first: curriculum.py)
             -> N episodes each against the live server -> RULER + checks -> rewards
             -> one GRPO step on the LoRA -> checkpoint -> every K steps evaluate on val
    until    val success has not improved by more than noise for P evaluations, or max_steps;
    best   = the checkpoint val chose, evaluated once on test: base vs best on test is the figure.

Every step is committed to the run directory (see `rundir.py`), so `--resume` continues after a
crash or kill -9 without losing a completed step.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from judges import JudgeCache, JudgeConfig, Ruler, Scorer, load_rubric
from mcp_rl.curriculum import TaskSampler
from mcp_rl.errors import ConfigError, TaskError
from mcp_rl.evaluate import (
    decide_all,
    decision_figure,
    improvement,
    reference_probe,
    score,
    summarize,
)
from mcp_rl.faults import fault_point
from mcp_rl.figures import rate_text
from mcp_rl.grpo import grpo_step, make_optimizer
from mcp_rl.models import close_models, load_model
from mcp_rl.models.base import ChatModel, TrainablePolicy
from mcp_rl.models.hardware import release_memory
from mcp_rl.phases import Phases
from mcp_rl.policy_prompt import ANSWER_CONVENTION, system_prompt
from mcp_rl.rollout import SessionPool, run_tasks
from mcp_rl.rundir import RunDir, RunState
from mcp_rl.servers import ServerSpec
from mcp_rl.task import Task
from mcp_rl.tracking import Tracker, check_trackers, open_trackers
from mcp_rl.train_config import TrainConfig
from mcp_rl.trajectory import Trajectory, load_trajectories

Say = Callable[[str], None]
HELPER_SLOTS = 4


class Trainer:
    def __init__(
        self,
        cfg: TrainConfig,
        spec: ServerSpec,
        run: RunDir,
        say: Say = print,
        policy: TrainablePolicy | None = None,
        phases: Phases | None = None,
    ) -> None:
        """`policy`: an already loaded TransformersModel to train instead of loading `cfg.model`.
        `phases`: how progress within a step is shown (default: not at all)."""
        self.cfg, self.spec, self.run, self.say = cfg, spec, run, say
        if run.redact is None:  # what the run writes passes through the server's redaction too
            run.redact = spec.redact
        self.phases = phases or Phases()
        self.policy: TrainablePolicy = policy  # type: ignore[assignment]  # set in load_models
        self.judge: ChatModel | None = None
        self.success_judge: ChatModel | None = None
        """Gives judged success (tasks without a reference) in evaluations; None with --judge none."""
        self.scorer = Scorer(reward=cfg.reward, judge_grounded=cfg.judge_grounded)
        self.cache = JudgeCache(run.judge_cache)
        self.trackers: list[Tracker] = []
        self._helpers: dict[str, ChatModel] = {}

    # --- setup -----------------------------------------------------------------------------
    async def tasks(self, pool: SessionPool) -> tuple[list[Task], list[Task], list[Task]]:
        from scenario_gen.io import load_tasks, save_tasks

        # Resuming: the run's own task set. An empty one (left by an older version after a failed
        # generation) is generated again rather than leaving a run that can never resume.
        report = None
        tasks = load_tasks(self.run.tasks_file) if self.run.tasks_file.exists() else []
        if not tasks:
            if self.cfg.tasks_file:
                tasks = load_tasks(self.cfg.tasks_file)
            else:
                tasks, report = await self._generate(pool)
            # Checked before it is saved: a task set that cannot train (0 tasks kept, a split empty)
            # leaves no tasks.jsonl, so the new run directory is removed and a resumed one generates again.
            held_out_splits(tasks)
            save_tasks(tasks, self.run.tasks_file)
        self._say_quality(tasks, [t.name for t in pool.tools], report)
        return held_out_splits(tasks)

    def _say_quality(self, tasks: list[Task], allowed: list[str], report: Any) -> None:
        """The task set's quality figures, before any training: a set that cannot measure success
        says so now, not after hours of steps."""
        from scenario_gen.quality import quality_figures, quality_lines

        for line in quality_lines(quality_figures(tasks, allowed, report)):
            self.say(line)

    async def _generate(self, pool: SessionPool) -> tuple[list[Task], Any]:
        from scenario_gen.generate import EXPLORE_RESULT_BUDGET, GenerateConfig, generate_tasks

        cfg = self.cfg
        self.say(f"writing {cfg.n_tasks} tasks with {cfg.generator} (no --tasks file given)")
        writer = self.model(cfg.generator)
        gen = GenerateConfig(
            n=cfg.n_tasks,
            seed=cfg.seed,
            grounded_share=cfg.grounded_share,
            val_fraction=cfg.val_fraction,
            test_fraction=cfg.test_fraction,
            instructions=cfg.instructions,
            allow_destructive=cfg.policy.allow_destructive,
        )
        async with pool.acquire() as ps:
            budget, ps.session.result_budget = ps.session.result_budget, EXPLORE_RESULT_BUDGET
            try:  # exploration reads whole results (a cut JSON result yields no facts)
                tasks, report = await generate_tasks(
                    ps.session, writer, gen, progress=lambda msg, _r: self.say(f"  {msg}"),
                    solvability=self._solvability(pool),
                )  # fmt: skip
            finally:
                ps.session.result_budget = budget
        grounded = sum(t.source == "grounded" for t in tasks)
        self.say(f"tasks: {len(tasks)} kept ({grounded} grounded), dropped {dict(report.dropped)}")
        return tasks, report

    def _solvability(self, pool: SessionPool) -> Any:
        """The solvability pass of the trainer's own generation (`--no-solvability`: none). Its
        episodes take the pool's other sessions while generation holds one."""
        from mcp_rl.solvability import check_solvability

        check = self.cfg.solvability
        if not check.enabled:
            return None
        checker = self.model(check.check_with or self.cfg.generator)

        async def hook(
            tasks: list[Task], say: Callable[[str], None], dropped: Callable[[Task, str], None], seen: str
        ) -> list[Task]:
            return await check_solvability(
                tasks,
                pool,
                checker,
                attempts=check.attempts,
                max_turns=check.max_turns,
                grounded=check.grounded,
                say=say,
                dropped=dropped,
                seen=seen,
            )

        return hook

    def model(self, name: str) -> ChatModel:
        """A helper model (task writer, judge), loaded once: the default writer and judge are the same."""
        if name not in self._helpers:
            # A judge or writer runs a few requests at a time: few KV-cache slots. With the default
            # 32, the 1.5B judge's cache alone grew to ~6 GB and the run was OOM-killed at 14.6 GB.
            self._helpers[name] = load_model(name, max_batch=HELPER_SLOTS, base_url=self.cfg.base_url)
        return self._helpers[name]

    def record_prompt(self, pool: SessionPool) -> None:
        """What the policy sees besides the task (system prompt, tool list), once per run: exports
        and `serve` must give the tuned model the same, since it learned to depend on them."""
        first = pool.first
        self.run.write_json(
            self.run.prompt_file,
            {
                "system_prompt": system_prompt(first.server_name, first.instructions),
                "server_name": first.server_name,
                "tools": [t.openai() for t in pool.tools],
                "answer_convention": ANSWER_CONVENTION,
            },
        )

    def load_models(self) -> None:
        cfg = self.cfg
        if self.policy is None:
            # One KV-cache slot per concurrent episode of a step (evaluation queues beyond that).
            loaded = load_model(cfg.model, max_batch=min(32, max(8, cfg.group_size * cfg.tasks_per_step)))
            if not isinstance(loaded, TrainablePolicy):
                close_models(loaded)
                raise ConfigError(
                    f"{cfg.model} cannot be trained here: its weights do not run in this process",
                    hint="train a local model (a built-in name, a HF directory or a .gguf file); API models "
                    "can be the judge or the task writer",
                )
            self.policy = loaded
        self.policy.attach_lora(
            r=cfg.lora.r,
            alpha=cfg.lora.alpha,
            dropout=cfg.lora.dropout,
            target_modules=cfg.lora.target_modules,
        )
        if cfg.judge == "none":
            return
        self.judge = self.model(cfg.judge)
        self.success_judge = self.model(cfg.success_judge or cfg.judge)
        rubric = load_rubric(cfg.rubric_file) if cfg.rubric_file else None
        jc = JudgeConfig(
            permutations=cfg.judge_permutations, seed=cfg.seed, **({"rubric": rubric} if rubric else {})
        )
        self.scorer.ruler = Ruler(self.judge, jc, cache=self.cache)

    def sampler(self, train: list[Task], completed: int) -> TaskSampler:
        """The train-task sampler, with the history of the steps already committed (on resume)."""
        sampler = TaskSampler(train, self.cfg.sampling, self.cfg.seed)
        for step in range(1, completed + 1):
            if self.run.step_file(step).exists():
                sampler.record(load_trajectories(self.run.step_file(step)))
        return sampler

    # --- the pieces of a step --------------------------------------------------------------
    async def episodes(
        self,
        pool: SessionPool,
        tasks: list[Task],
        n: int,
        step: int,
        temperature: float | None = None,
        phase: str = "rollouts",
    ) -> list[Trajectory]:
        update: dict[str, Any] = {"seed": self.cfg.seed * 100_003 + step}
        if temperature is not None:
            update["temperature"] = temperature
        rollout = self.cfg.rollout.model_copy(update=update)
        point = f"during-{phase.replace(' ', '-')}"
        with self.phases.phase(phase, len(tasks) * n) as advance:

            def ended(_t: Trajectory) -> None:
                advance(1)
                fault_point(point, step)  # a kill while the step's other episodes still run

            groups = await run_tasks(
                self.policy, pool, tasks, n, rollout, on_episode=ended, probe=reference_probe
            )
        trajs = [t for g in groups for t in g]
        for t in trajs:
            t.metadata["step"] = step
        return trajs

    async def evaluate(
        self, pool: SessionPool, tasks: list[Task], step: int, split: str = "val"
    ) -> dict[str, Any]:
        """Episodes of a held-out split with the current adapter (step 0: the base model, adapter off),
        graded: checked success, and judged success where a success judge exists."""
        t0 = time.monotonic()
        n, temp = self.cfg.eval_samples, self.cfg.eval_temperature
        label = ("base " if step == 0 else "") + ("eval" if split == "val" else "test")
        with self.policy.adapter_disabled() if step == 0 else contextlib.nullcontext():
            trajs = await self.episodes(pool, tasks, n, step, temp, phase=label)
        await decide_all(trajs, {t.id: t for t in tasks}, self.success_judge, self.cache)
        if split == "val":
            self.run.save_trajectories(trajs, self.run.eval_file(step))
            kind = "base_eval" if step == 0 else "eval"
        else:
            self.run.save_trajectories(trajs, self.run.test_file("base" if step == 0 else "best"))
            kind = "test_eval"
        return {
            "kind": kind,
            "step": step,
            "split": split,
            **({"model": "base" if step == 0 else "best"} if split == "test" else {}),
            **summarize(trajs),
            "seconds": time.monotonic() - t0,
        }

    async def judged(
        self, pool: SessionPool, trajs: list[Trajectory], tasks: dict[str, Task], groups: int
    ) -> dict[str, Any]:
        """RULER + checks -> a reward on every trajectory. Returns the judge's stats."""
        with self.phases.phase("judging", groups) as advance:
            return await score(trajs, tasks, pool.tools, self.scorer, on_group=lambda _g: advance(1))

    def trained(self, optimizer: torch.optim.Optimizer, trajs: list[Trajectory], step: int) -> dict[str, Any]:
        """One GRPO step on the LoRA. Returns its stats."""
        with self.phases.phase("training", len(trajs)) as advance:

            def progress(k: int) -> None:
                advance(k)
                if k:  # part of the batch's gradients accumulated, the update not yet made
                    fault_point("during-training", step)

            return grpo_step(
                self.policy.model, optimizer, trajs, self.cfg.grpo,
                pad_id=self.policy.pad_token_id, on_progress=progress,
            )  # fmt: skip

    # --- the loop --------------------------------------------------------------------------
    async def fit(self, resume: bool = False) -> dict[str, Any]:
        try:
            return await self._fit(resume)
        finally:
            self.close()

    def close(self) -> None:
        """Stop local generation workers (a worker left running aborts the interpreter at exit)."""
        close_models(self.policy, *self._helpers.values())
        for tracker in self.trackers:
            tracker.close()
        self.trackers = []

    def _record(self, metrics: dict[str, Any]) -> None:
        """A metrics record: into metrics.jsonl, then to the trackers asked for."""
        self.run.append_metrics(metrics)
        for tracker in self.trackers:
            tracker.log(metrics)

    async def _fit(self, resume: bool) -> dict[str, Any]:
        cfg, run = self.cfg, self.run
        state = run.load_state() if resume else RunState()
        removed = run.discard_uncommitted(state)
        if removed:
            self.say(f"redoing a half-written step: removed {', '.join(removed)}")
        torch.manual_seed(cfg.seed)
        committed = state.completed_step if state.base_evaluated else -1
        self.trackers = open_trackers(cfg.log_to, run.path, cfg.model_dump(mode="json"), committed)
        # the server first: a wrong command fails in a second, not after loading models (measured:
        # a mistyped --server took 17 s and 11 GB resident to say "command not found")
        async with SessionPool(self.spec, cfg.policy, size=cfg.group_size, stderr_dir=run.path) as pool:
            self.load_models()
            optimizer = make_optimizer(self.policy.model, cfg.grpo)
            if state.completed_step:
                ckpt = run.checkpoint(state.completed_step)
                self.policy.load_adapter(ckpt)
                optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", weights_only=True))
                self.say(f"resumed after step {state.completed_step} from {ckpt}")

            train, val, test = await self.tasks(pool)
            tasks = {t.id: t for t in [*train, *val]}  # test tasks never reach a training step
            self.record_prompt(pool)
            sampler = self.sampler(train, state.completed_step)
            if not state.base_evaluated:
                base = await self.evaluate(pool, val, step=0)
                self._record(base)
                state = state.model_copy(
                    update={"base_evaluated": True, "best_step": 0, "best_success": decision_figure(base)[1]}
                )
                self._write_best(base)
                run.commit(state)
                self.say(_line(base))
            if not state.test_base_done:
                state = await self._test(pool, test, state, best=False)

            for step in range(state.completed_step + 1, cfg.max_steps + 1):
                t0 = time.monotonic()
                batch = sampler.draw(step, cfg.tasks_per_step)  # the same tasks when a step is redone
                trajs = await self.episodes(pool, batch, cfg.group_size, step)
                fault_point("rollout", step)  # no-op unless a reliability test asks for a kill here
                t1 = time.monotonic()
                judge_stats = await self.judged(pool, trajs, tasks, sum(map(self.scorer.asks_judge, batch)))
                release_memory()
                t2 = time.monotonic()
                train_stats = self.trained(optimizer, trajs, step)
                fault_point("optimizer", step)
                release_memory()  # activations and logits of the step, back to the OS
                t3 = time.monotonic()

                run.save_trajectories(trajs, run.step_file(step))
                run.save_checkpoint(step, lambda d: self._save(d, optimizer))
                sampler.record(trajs)
                record = {
                    "kind": "step", "step": step, **summarize(trajs), **judge_stats, **train_stats,
                    "tasks_retired": sampler.retired(),
                    "rollout_s": t1 - t0, "judge_s": t2 - t1, "train_s": t3 - t2,
                }  # fmt: skip
                self._record(record)
                self.say(_line(record))

                if step % cfg.eval_every == 0 or step == cfg.max_steps:
                    ev = await self.evaluate(pool, val, step)
                    self._record(ev)
                    self.say(_line(ev))
                    state = self._track_best(state, ev)
                state = state.model_copy(update={"completed_step": step})
                if state.evals_without_improvement >= cfg.patience:
                    state = state.model_copy(update={"stopped": f"plateau after step {step}"})
                    run.commit(state)
                    break
                run.commit(state)
            else:
                state = state.model_copy(update={"stopped": "max_steps"})
                run.commit(state)
            if not state.test_best_done:
                state = await self._test(pool, test, state, best=True)
        return self.result(state)

    async def _test(self, pool: SessionPool, test: list[Task], state: RunState, best: bool) -> RunState:
        """The test split, run exactly twice: the base model, and the checkpoint val chose. When val
        chose the base itself, its one test run is the best's too (greedy: it would repeat itself)."""
        step = (state.best_step or 0) if best else 0
        if best and step == 0:
            ev = {**self._metric("test_eval", model="base"), "model": "best", "same_as_base": True}
        else:
            if best:
                self.policy.load_adapter(self.run.checkpoint(step))
            ev = await self.evaluate(pool, test, step, split="test")
        self._record(ev)
        self.say(_line(ev))
        if best:
            self._write_best(self._val_eval(step), test=ev, test_base=self._metric("test_eval", model="base"))
        state = state.model_copy(update={"test_best_done" if best else "test_base_done": True})
        self.run.commit(state)
        return state

    def _save(self, directory: Path, optimizer: torch.optim.Optimizer) -> None:
        self.policy.save_adapter(directory)
        torch.save(optimizer.state_dict(), directory / "optimizer.pt")

    def _metric(self, kind: str, step: int | None = None, model: str | None = None) -> dict[str, Any]:
        """The committed metrics record of that kind (at that step, of that model)."""
        return next(
            m for m in self.run.read_metrics()
            if m.get("kind") == kind and (step is None or m["step"] == step) and m.get("model") == model
        )  # fmt: skip

    def _val_eval(self, step: int) -> dict[str, Any]:
        return self._metric("base_eval" if step == 0 else "eval", step)

    def _write_best(self, val: dict[str, Any], **test: Any) -> None:
        """best.json: the checkpoint val chose, its val figures, and (at the end) base vs best on test."""
        step = val["step"]
        checkpoint = str(self.run.checkpoint(step)) if step else None
        self.run.write_json(self.run.best_file, {"step": step, "checkpoint": checkpoint, "val": val, **test})

    def _track_best(self, state: RunState, ev: dict[str, Any]) -> RunState:
        """Is this evaluation a new best on val? Judged on the same figure the base was (checked
        success where measured), by `evaluate.improvement`'s rule."""
        which, _, scores = decision_figure(ev)
        best_scores = decision_figure(self._val_eval(state.best_step or 0))[2]
        better, why = improvement(scores, best_scores, self.cfg.min_improvement)
        self.say(f"  val {which} success vs best (step {state.best_step or 0}): {why}")
        if better:
            self._write_best(ev)
            return state.model_copy(
                update={
                    "best_step": ev["step"],
                    "best_success": decision_figure(ev)[1],
                    "evals_without_improvement": 0,
                }
            )
        return state.model_copy(update={"evals_without_improvement": state.evals_without_improvement + 1})

    def result(self, state: RunState) -> dict[str, Any]:
        metrics = self.run.read_metrics()
        evals = {m["step"]: m for m in metrics if m.get("kind") in ("eval", "base_eval")}
        tests = {m.get("model"): m for m in metrics if m.get("kind") == "test_eval"}
        return {
            "state": state,
            "base": evals.get(0),
            "best": evals.get(state.best_step or 0),
            "test_base": tests.get("base"),
            "test_best": tests.get("best"),
            "run_dir": str(self.run.path),
        }


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:.0%}" if pct else (f"{v:.3f}" if isinstance(v, float) else str(v))


def _line(m: dict[str, Any]) -> str:
    """One summary line per step or evaluation."""
    if m["kind"] == "step":
        return (
            f"step {m['step']:>3}  reward {_fmt(m['reward_mean'])}  checked success {_fmt(m['success'], True)}  "
            f"valid calls {_fmt(m['valid_call_rate'], True)}  dropped groups {m.get('groups_dropped', 0)}  "
            f"unscored {m.get('unscored_groups', 0)}  "
            f"rollout {m['rollout_s']:.0f}s judge {m['judge_s']:.0f}s train {m['train_s']:.0f}s"
        )
    if m["kind"] == "test_eval" and m.get("same_as_base"):
        return f"test best  = test base: val found no checkpoint better than the base ({rate_text(m)})"
    if m["kind"] == "test_eval":
        label = f"test {m.get('model', '')}"
    else:
        label = "base eval" if m["kind"] == "base_eval" else f"eval @{m['step']}"
    judged = f"  judged {rate_text(m, 'judged')}" if m.get("judged_n") or m.get("judged") is not None else ""
    return (
        f"{label:>9}  checked success {rate_text(m)}{judged}  valid calls {_fmt(m['valid_call_rate'], True)}"
        f"  pasted {_fmt(m.get('pasted_rate'), True)}  turns {m['mean_turns']:.1f}  ({m['seconds']:.0f}s)"
    )


def check_config(cfg: TrainConfig) -> None:
    """What can fail before a model loads or a run directory exists, checked now."""
    check_trackers(cfg.log_to)
    from mcp_rl.models.registry import check_model_name

    check_model_name(cfg.model)  # the policy: local, never sent to --base-url
    helpers = [cfg.judge if cfg.judge.lower() != "none" else None, cfg.success_judge]
    if not cfg.tasks_file:
        helpers.append(cfg.generator)
    for name in filter(None, helpers):
        check_model_name(name, base_url=cfg.base_url)
    if cfg.rollout.temperature <= 0:
        raise ConfigError("training needs sampling: --temperature must be above 0", hint="the default is 1.0")
    if cfg.tasks_file:  # read it now: a bad file should fail before models load or a run dir exists
        from scenario_gen.io import load_tasks

        held_out_splits(load_tasks(cfg.tasks_file))


def held_out_splits(tasks: list[Task]) -> tuple[list[Task], list[Task], list[Task]]:
    """The train, val and test splits; training needs all three."""
    train, val, test = ([t for t in tasks if t.split == s] for s in ("train", "val", "test"))
    if not train or not val or not test:
        raise TaskError(
            f"the task set needs train, val and test tasks (has {len(train)} train, {len(val)} val, "
            f"{len(test)} test)",
            hint="give more tasks (--n-tasks), or re-split a task file with `mcp-rl split TASKS -o OUT`",
        )
    return train, val, test
