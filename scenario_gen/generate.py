"""From a live server and a task-writing model to a validated, split task set.

    tasks, report = await generate_tasks(session, model, GenerateConfig(n=100, seed=0))

Order of work: explore the server (real calls), write grounded questions about what came back and
re-run their calls to check the answers, then fill the rest with written tasks; every candidate is
validated and de-duplicated against everything kept so far; then an optional solvability pass, the
split and provenance. Grounded tasks come first in the set: they are the ones a weak judge can grade.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_rl.models.base import ChatModel
from mcp_rl.structured import ask_items
from mcp_rl.task import Provenance, Task
from scenario_gen import writer_prompts
from scenario_gen.context import server_context, state_context
from scenario_gen.dedup import Similarity, default_similarity
from scenario_gen.explorer import ExplorableSession, Explorer
from scenario_gen.gen_report import GenReport, count_problems
from scenario_gen.grounded import GroundedWriter, grounded_id, verify
from scenario_gen.journal import Journal
from scenario_gen.self_contained import MODEL_SAYS, UNCHECKED, said, self_contained
from scenario_gen.split import split_report, split_tasks
from scenario_gen.validate import Verdict, check_task, drop_near_duplicates, leaked_names, strip_tool_mentions
from scenario_gen.writer import TaskWriter, WrittenItem, task_id

ProgressFn = Callable[[str, GenReport], None]
SolvabilityFn = Callable[
    [list[Task], Callable[[str], None], Callable[[Task, str], None], str], Awaitable[list[Task]]
]
"""Takes the kept tasks, returns those to keep (with `notes` marks); see `mcp_rl.solvability`."""


# Large enough that exploration reads whole results: a cut JSON result yields no facts.
EXPLORE_RESULT_BUDGET = 20000


class GenerateConfig(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)

    n: int = Field(default=100, ge=1)
    grounded_share: float = Field(default=0.5, ge=0.0, le=1.0)
    """The share of grounded tasks aimed at (written tasks fill whatever grounding cannot)."""
    language: str = "en"
    instructions: str = ""
    seed: int = 0
    val_fraction: float = Field(default=0.2, ge=0.0, lt=1.0)
    test_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    """The share held out for the test split. 0 here, so a caller that knows only train and val (the
    trainer's own generation) gets what it expects; `mcp-rl generate` asks for 0.3."""
    allow_destructive: bool = False
    explore_calls: int = Field(default=60, ge=0)
    batch_size: int = Field(default=5, ge=1, le=20)
    max_rounds: int | None = None
    """Writer batches before giving up; default scales with n."""
    concurrency: int = Field(default=4, ge=1)
    verify_grounded: bool = True
    self_contained_model: bool = True
    """Ask the writer model whether each written task can be done from its text and the tools (the
    deterministic rules of `scenario_gen.self_contained` always run)."""

    @model_validator(mode="after")
    def _room_for_train(self) -> GenerateConfig:
        if self.val_fraction + self.test_fraction >= 1.0:
            raise ValueError("val_fraction + test_fraction must be below 1: train needs tasks")
        return self


async def _resources(session: Any) -> list[str]:
    try:
        items = await session.list_resources()
    except Exception:
        return []
    return [
        f"{getattr(r, 'uri', '')} ({getattr(r, 'description', '') or getattr(r, 'name', '')})" for r in items
    ][:10]


class _Run:
    def __init__(
        self,
        session: ExplorableSession,
        model: ChatModel,
        config: GenerateConfig,
        progress: ProgressFn | None,
        similarity: Similarity,
        journal: Journal | None = None,
    ) -> None:
        self.session = session
        self.journal = journal
        self.model = _Counted(model)
        self.cfg = config
        self.progress = progress or (lambda msg, report: None)
        self.similarity = similarity
        self.report = GenReport(requested=config.n, similarity=similarity.name)
        self.tool_names = [t.name for t in session.tools]
        self.kept: list[Task] = []
        self._gw: GroundedWriter | None = None
        self._queue: list[Any] = []
        self._reserve: list[Task] = []

    def _say(self, msg: str) -> None:
        self.report.llm_calls = self.model.calls
        self.progress(msg, self.report)

    def _admit(self, candidates: list[Task]) -> list[Task]:
        """Validate candidates and keep those that are not near-duplicates of anything kept."""
        verdict = Verdict()
        fresh: list[Task] = []
        for t in candidates:
            reason = check_task(t, self.tool_names, self.cfg.language)
            if reason:
                verdict.drop(reason, t.text)
            else:
                fresh.append(t)
        survivors = drop_near_duplicates(self.kept + fresh, verdict, self.similarity)
        known = {t.id for t in self.kept}
        added = [t for t in survivors if t.id not in known]
        self.kept = survivors
        for reason, n in verdict.dropped.items():
            self.report.drop(reason, n, (verdict.examples.get(reason) or [None])[0])
        self.report.kept = len(self.kept)
        return added

    async def explore(self) -> Any:
        t0 = time.monotonic()
        self._say("exploring the server")

        def on_step(step: Any, stats: Any) -> None:
            self.report.exploration = stats
            # every failure, and every 10th call: enough for a live line, not a flood for a log
            if not step.ok or stats.calls % 10 == 0:
                self._say(f"exploring: {stats.calls} calls; last {step.tool} -> {step.status.value}")

        explorer = Explorer(
            self.session, model=self.model, allow_destructive=self.cfg.allow_destructive,
            max_calls=self.cfg.explore_calls, seed=self.cfg.seed, on_step=on_step,
            instructions=self.cfg.instructions,
        )  # fmt: skip
        result = await explorer.run()
        self.report.exploration = result.stats
        self._say(f"explored: {result.stats.calls} calls, {result.stats.ok} ok")
        self.report.timings["explore"] = time.monotonic() - t0
        return result

    async def _write_grounded(self, page: list[Any]) -> list[Task]:
        """Questions for a page of candidates, each checked by re-running its reference calls."""
        assert self._gw is not None
        self._say(f"writing {len(page)} grounded questions")
        tally = Counter[str]()

        async def write(c: Any) -> Task | None:
            assert self._gw is not None
            task = await self._gw.write(c)
            if self.journal and task is not None:  # at once: a page is most of an hour
                self.journal.add_grounded(task)
            elif self.journal:
                self.journal.add_asked(grounded_id(c))
            tally["done"] += 1
            tally["usable"] += task is not None
            if tally["done"] % 5 == 0:  # a page takes 30-60 min on 1 CPU thread: a sign of life
                self._say(
                    f"grounded questions: {tally['done']} of {len(page)} written, {tally['usable']} usable"
                )
            return task

        written = await asyncio.gather(*(write(c) for c in page))
        self.report.candidates_grounded += len(page)
        return await self._verified([t for t in written if t is not None])

    async def _verified(self, tasks: list[Task]) -> list[Task]:
        """The grounded tasks whose reference calls, re-run, agree (those verified before pass)."""
        checked = []
        for t in tasks:
            if self.cfg.verify_grounded and "verified" not in t.notes:
                outcome = await verify(self.session, t)
                v = self.report.verification
                v[outcome.status] = v.get(outcome.status, 0) + 1
                if outcome.status == "failed":
                    self.report.drop(
                        "reference did not check out on re-run", example=f"{t.text} ({outcome.detail})"
                    )
                    if self.journal:
                        self.journal.add_asked(t.id)
                    continue
                t.notes["verified"] = outcome.status
                if outcome.status == "changed":
                    # the server answered differently a moment later: grading must re-run the calls
                    t.answer_depends_on_state = True
                if self.journal:
                    self.journal.add_grounded(t)
            checked.append(t)
        return checked

    async def grounded(self, explore: Any, want: int) -> None:
        """Keep up to `want` more grounded tasks. Verified tasks beyond that wait in a reserve (room is
        left for written tasks, which cover what exploration cannot); a later call uses them first."""
        t0 = time.monotonic()
        if self._gw is None:
            self._gw = GroundedWriter(
                self.model, self.session.tools, language=self.cfg.language, seed=self.cfg.seed,
                concurrency=self.cfg.concurrency,
            )  # fmt: skip
            # a resumed run asks no candidate twice: what it wrote before is in the reserve
            done = (self.journal.asked | set(self.journal.grounded)) if self.journal else set()
            queue = self._gw.candidates(explore, self.cfg.n * 4 + 4 + len(done))
            self._queue = [c for c in queue if grounded_id(c) not in done]
            if self.journal and self.journal.grounded:
                self._reserve = await self._verified(list(self.journal.grounded.values()))
        have = 0
        reserve, self._reserve = self._reserve, []
        while have < want and (reserve or self._queue):
            if reserve:
                checked, reserve = reserve, []
            else:
                size = math.ceil((want - have) * 1.5) + 1
                page, self._queue = self._queue[:size], self._queue[size:]
                checked = await self._write_grounded(page)
            added = self._admit(checked)
            if have + len(added) > want:
                extra = added[want - have :]
                ids = {t.id for t in extra}
                self.kept = [t for t in self.kept if t.id not in ids]
                self._reserve += extra
                added = added[: want - have]
            have += len(added)
            self.report.kept = len(self.kept)
            self._say(f"grounded: {have} kept")
        self._reserve += reserve
        self.report.timings["grounded"] = self.report.timings.get("grounded", 0.0) + time.monotonic() - t0

    def finish(self) -> None:
        if self._gw is not None:
            self.report.drop_all(self._gw.problems, self._gw.examples)

    async def _fix_leak(self, task: Task) -> Task | None:
        names = leaked_names(task.text, self.tool_names)
        if not names:
            return task
        text = strip_tool_mentions(task.text, names)
        if leaked_names(text, self.tool_names):
            got = await ask_items(
                self.model,
                writer_prompts.rewrite_without_names(text, names, self.cfg.language),
                WrittenItem,
                attempts=2,
            )
            text = got.items[0].task if got.items else text
        if leaked_names(text, self.tool_names):
            self.report.drop("names a tool", example=task.text)
            return None
        self.report.rewritten += 1
        return task.model_copy(update={"text": text, "id": task_id(text)})

    async def _self_contained(self, added: list[Task]) -> list[Task]:
        """Drop the newly kept written tasks that cannot be done from their text and the tools.
        Run after de-duplication, so the model is asked once per distinct task."""
        model = self.model if self.cfg.self_contained_model else None
        gate = asyncio.Semaphore(self.cfg.concurrency)

        async def one(t: Task) -> tuple[bool, str]:
            async with gate:
                return await self_contained(t, self.session.tools, model)

        verdicts = await asyncio.gather(*(one(t) for t in added))
        sc = self.report.self_contained
        out, gone = [], set()
        for t, (ok, reason) in zip(added, verdicts, strict=True):
            sc["checked"] = sc.get("checked", 0) + 1
            if not ok:
                # counted by kind; what the model found missing goes with the example
                kind = MODEL_SAYS if reason.startswith(MODEL_SAYS) else reason
                missing = reason[len(kind) :].strip(" :")
                self.report.drop(kind, example=f"{t.text} (missing: {missing})" if missing else t.text)
                gone.add(t.id)
                continue
            key = "unchecked" if reason == UNCHECKED else "passed"
            sc[key] = sc.get(key, 0) + 1
            t.notes["self_contained"] = key if model is not None else "rules"
            out.append(t)
        self.kept = [t for t in self.kept if t.id not in gone]
        self.report.kept = len(self.kept)
        return out

    async def written(self, known_values: dict[str, list[str]], context: dict[str, str]) -> None:
        t0 = time.monotonic()
        writer = TaskWriter(
            self.model, self.session.tools, instructions=self.cfg.instructions,
            server_instructions=getattr(self.session, "instructions", None) or "",
            resources=await _resources(self.session), known_values=known_values,
            language=self.cfg.language, seed=self.cfg.seed, batch_size=self.cfg.batch_size,
        )  # fmt: skip
        if self.journal and self.journal.written:
            self._admit(list(self.journal.written.values()))  # a resumed run's, checked before
        for t in self.kept:
            writer.coverage.update(t.tools_expected)
        max_rounds = self.cfg.max_rounds or (math.ceil(self.cfg.n / self.cfg.batch_size) + 4)
        empty_in_a_row = 0
        for _ in range(max_rounds):
            need = self.cfg.n - len(self.kept)
            if need <= 0:
                break
            # several batches at once (a local model batches concurrent requests), each a little
            # larger than its share: validation and de-duplication always drop some
            sizes = _batch_sizes(need + 1 + need // 4, self.cfg.batch_size, self.cfg.concurrency)
            self._say(f"writing tasks ({need} to go)")
            batches = await asyncio.gather(*(writer.write(k) for k in sizes))
            batch = [t for b in batches for t in b]
            self.report.candidates_written += len(batch)
            if len(batch) < sum(sizes):
                self.report.drop("writer returned too few", sum(sizes) - len(batch))
            fixed = [_stated(t, context) for t in [await self._fix_leak(t) for t in batch] if t is not None]
            added = await self._self_contained(self._admit(fixed))
            if self.journal:
                for t in added:
                    self.journal.add_written(t)
            empty_in_a_row = 0 if added else empty_in_a_row + 1
            self._say(f"written: {len(added)} kept of {len(batch)}")
            if empty_in_a_row >= 3:
                self.report.warnings.append(
                    "the writer produced nothing usable 3 rounds in a row; stopped early"
                )
                break
        self.report.llm_problems = count_problems(writer.stats.problems)
        self.report.timings["written"] = time.monotonic() - t0


def _stated(task: Task, context: dict[str, str]) -> Task:
    """The task with the values nothing on the server reveals added (`scenario_gen.context`)."""
    text = state_context(task.text, context)
    return task if text == task.text else task.model_copy(update={"text": text, "id": task_id(text)})


def _batch_sizes(total: int, batch: int, concurrency: int) -> list[int]:
    """Split `total` into at most `concurrency` batches of at most `batch`."""
    sizes: list[int] = []
    while total > 0 and len(sizes) < concurrency:
        sizes.append(min(batch, total))
        total -= sizes[-1]
    return sizes


class _Counted:
    """The model, with its calls counted for the report."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = getattr(model, "name", "")
        self.calls = 0

    async def chat(self, messages: Any, tools: Any = None, n: int = 1, sampling: Any = None) -> Any:
        self.calls += 1
        return await self.model.chat(messages, tools=tools, n=n, sampling=sampling)


def _trim(tasks: list[Task], n: int, grounded_share: float) -> list[Task]:
    """At most n tasks, keeping about the asked share of grounded ones."""
    if len(tasks) <= n:
        return tasks
    grounded = [t for t in tasks if t.source == "grounded"]
    written = [t for t in tasks if t.source == "written"]
    g = min(len(grounded), max(math.ceil(n * grounded_share), n - len(written)))
    return grounded[:g] + written[: n - g]


async def generate_tasks(
    session: ExplorableSession,
    model: ChatModel,
    config: GenerateConfig | None = None,
    *,
    progress: ProgressFn | None = None,
    similarity: Similarity | None = None,
    solvability: SolvabilityFn | None = None,
    journal: Journal | None = None,
) -> tuple[list[Task], GenReport]:
    """`journal`: where what is made is recorded as it is made, and what an earlier run that stopped
    made is taken from (`scenario_gen.journal`)."""
    cfg = config or GenerateConfig()
    run = _Run(session, model, cfg, progress, similarity or default_similarity(), journal)
    if journal and journal.resumed:
        run.report.resumed = journal.made
        run._say(
            f"resuming: {len(journal.grounded)} grounded and {len(journal.written)} written tasks from {journal.path}"
        )
    t0 = time.monotonic()
    explore = await run.explore()
    want_grounded = math.ceil(cfg.n * cfg.grounded_share)
    if want_grounded:
        await run.grounded(explore, want_grounded)
    await run.written(explore.pool.sample_names(10), server_context(explore))
    if len(run.kept) < cfg.n and want_grounded:
        # the writer fell short: more grounded tasks, if exploration found enough to ask about
        await run.grounded(explore, cfg.n - len(run.kept))
    tasks = _trim(run.kept, cfg.n, cfg.grounded_share)
    if solvability is not None and tasks:
        t1 = time.monotonic()
        run._say("solvability pass")
        told: set[str] = set()

        def dropped(task: Task, why: str) -> None:
            told.add(task.id)
            kind, _, detail = why.partition(": ")  # counted by kind; the detail goes with the example
            run.report.drop(kind, example=f"{task.text} ({detail})" if detail else task.text)

        seen = " ".join(said(st.result_text, st.arguments) for st in explore.steps if st.ok)
        checked = await solvability(tasks, run._say, dropped, seen)
        kept_ids = {t.id for t in checked}
        for t in tasks:
            if t.id not in kept_ids and t.id not in told:
                run.report.drop("no attempt solved it", example=t.text)
        tasks = checked
        run.report.timings["solvability"] = time.monotonic() - t1
        if len(tasks) < cfg.n and want_grounded:
            # what the pass dropped, refilled with grounded tasks (their references were re-run, so
            # they need no attempt): on the filesystem server it dropped 14 of 48 and the set stayed
            # at 34 while verified grounded questions sat in the reserve (2026-12-07)
            run._say(f"refilling {cfg.n - len(tasks)} dropped tasks with grounded ones")
            in_set = {t.id for t in tasks}
            trimmed = [t for t in run.kept if t.source == "grounded" and t.id not in in_set]
            tasks += trimmed[: cfg.n - len(tasks)]  # kept before, left out only to hold the share
            had = {t.id for t in run.kept}
            await run.grounded(explore, cfg.n - len(tasks))
            tasks += [t for t in run.kept if t.id not in had]
    run.finish()
    prov = Provenance(
        generator=getattr(model, "name", ""),
        seed=cfg.seed,
        server_name=getattr(session, "server_name", "") or "",
        server_version=getattr(session, "server_version", "") or "",
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    tasks = split_tasks(
        [t.model_copy(update={"provenance": prov}) for t in tasks],
        val_fraction=cfg.val_fraction,
        test_fraction=cfg.test_fraction,
        seed=cfg.seed,
    )
    run.report.summarize(tasks, run.tool_names)
    run.report.split = split_report(tasks)
    if len(tasks) < cfg.n:
        run.report.warnings.append(f"only {len(tasks)} of the {cfg.n} tasks asked could be made")
    run.report.llm_calls = run.model.calls
    run.report.timings["total"] = time.monotonic() - t0
    return tasks, run.report
