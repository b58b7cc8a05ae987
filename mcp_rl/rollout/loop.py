"""The agent loop: one episode of a model working one task against a live MCP server, and groups
of episodes run concurrently.

An episode: system prompt + task; then turns (`turn.Agent`: generate -> parse -> run calls -> feed
results back as `tool` messages), until a message with no tool call (the final answer, see
`mcp_rl.policy_prompt`), the turn limit, or the context budget. Each episode keeps its own token trace
(`tokens.TokenTrace`); concurrent episodes call `model.generate` at the same time and the model
batches them. No global state: everything an episode needs comes in as arguments.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from mcp_rl.errors import ServerError
from mcp_rl.models.base import ChatModel, Message, SamplingParams, TokenModel
from mcp_rl.policy_prompt import opening_messages
from mcp_rl.rollout.pool import PooledSession, SessionPool
from mcp_rl.rollout.tokens import TokenTrace
from mcp_rl.rollout.turn import Agent
from mcp_rl.task import Task
from mcp_rl.trajectory import EpisodeEnd, ToolCallRecord, Trajectory

Probe = Callable[[Task, PooledSession], Awaitable[Any]]
"""Something run on an episode's own session right after the episode (see `run_group`)."""


class RolloutConfig(BaseModel):
    # the fields marked "cli" are `mcp-rl train` options (mcp_rl/cli/from_config.py)
    model_config = ConfigDict(use_attribute_docstrings=True, allow_inf_nan=False)

    max_turns: int = Field(default=6, ge=1, json_schema_extra={"cli": True})
    """Assistant messages per episode."""
    max_new_tokens: int = Field(default=256, ge=1, json_schema_extra={"cli": True})
    """Tokens per assistant message."""
    temperature: float = Field(default=1.0, ge=0.0, json_schema_extra={"cli": True})
    """Sampling temperature."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_context_tokens: int = Field(default=4096, ge=64)
    """The whole conversation; the episode ends ('context') when fewer than `min_new_tokens` are left."""
    min_new_tokens: int = Field(default=32, ge=1)
    max_calls_per_turn: int = Field(default=8, ge=1)
    max_restarts: int = Field(default=1, ge=0)
    """Server restarts per episode after a crash; one more crash ends it with 'server_error'."""
    seed: int | None = None


def as_task(task: Task | str) -> Task:
    if isinstance(task, Task):
        return task
    digest = hashlib.sha256(task.encode()).hexdigest()[:10]
    return Task(id=f"adhoc-{digest}", text=task)


def _sampling(config: RolloutConfig, max_new: int, task_id: str, index: int, turn: int) -> SamplingParams:
    seed = None
    if config.seed is not None:
        # Distinct for every task, episode and turn, and the same again for the same seed.
        task_part = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16)
        seed = (config.seed * 1_000_003 + task_part + 1009 * index + turn) % 2**31
    return SamplingParams(
        temperature=config.temperature, top_p=config.top_p, max_new_tokens=max_new, seed=seed
    )


async def run_episode(
    model: ChatModel,
    ps: PooledSession,
    task: Task | str,
    config: RolloutConfig | None = None,
    *,
    group_id: str = "",
    index: int = 0,
) -> Trajectory:
    """One episode on an acquired session. Raises only for model/template faults; anything the
    server does ends the episode with a recorded reason instead."""
    config = config or RolloutConfig()
    task = as_task(task)
    session = ps.session
    t0 = time.monotonic()
    agent = Agent(model, ps, config)
    messages: list[Message] = opening_messages(task.text, session.server_name, session.instructions)
    trace = TokenTrace(model, agent.tools) if isinstance(model, TokenModel) else None
    records: list[ToolCallRecord] = []
    finish_reasons: list[str] = []
    timings = {"generate_s": 0.0, "tools_s": 0.0}
    final: str | None = None
    end: EpisodeEnd = "max_turns"
    truncated_answer = False

    while agent.turns < config.max_turns:
        done = await agent.turn(
            messages, lambda max_new: _sampling(config, max_new, task.id, index, agent.turns), trace
        )
        if done is None:
            end = "context"
            break
        timings["generate_s"] += done.generate_s
        timings["tools_s"] += done.tools_s
        finish_reasons.append(done.completion.finish_reason)
        if done.final:
            final, end = done.content.strip(), "answer"
            truncated_answer = done.completion.finish_reason == "length"
            break
        records.extend(done.calls)
        if done.server_lost:
            end = "server_error"
            break

    if trace is not None:
        trace.extend_to(messages, add_generation_prompt=False)
    timings["total_s"] = time.monotonic() - t0
    return Trajectory(
        id=f"{group_id or 'ep'}-{index}",
        task_id=task.id,
        group_id=group_id,
        task_text=task.text,
        model=getattr(model, "name", ""),
        messages=messages,
        tool_calls=records,
        final_answer=final,
        end=end,
        turns=agent.turns,
        token_ids=trace.token_ids if trace else [],
        sampled_mask=trace.sampled_mask if trace else [],
        logprobs=trace.logprobs if trace else [],
        timings=timings,
        metadata={
            "server": session.server_name,
            "tools": agent.tools,
            "finish_reasons": finish_reasons,
            "restarts": agent.restarts,
            "answer_truncated": truncated_answer,
        },
    )


def _failed(
    task: Task, group_id: str, index: int, model: ChatModel, error: ServerError, wait_s: float
) -> Trajectory:
    """An episode that could not start because its server could not be reset or restarted."""
    return Trajectory(
        id=f"{group_id}-{index}",
        task_id=task.id,
        group_id=group_id,
        task_text=task.text,
        model=getattr(model, "name", ""),
        end="server_error",
        timings={"session_wait_s": wait_s, "total_s": wait_s},
        metadata={"error": str(error)},
    )


async def run_group(
    model: ChatModel,
    pool: SessionPool,
    task: Task | str,
    n: int = 4,
    config: RolloutConfig | None = None,
    *,
    group_id: str | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
    probe: Probe | None = None,
) -> list[Trajectory]:
    """`n` episodes of one task, concurrently, each on its own (or the shared) server session.
    `on_episode` is called as each one ends (progress display). `probe(task, session)` runs on the
    episode's own session right after it ends, before the session serves anyone else; what it
    returns (JSON-able) goes in `metadata["probe"]`. The trainer re-runs a task's reference calls
    there, so an answer that moves with time or state is graded against the world the episode saw."""
    task = as_task(task)
    gid = group_id or uuid.uuid4().hex[:10]
    out: list[Trajectory | None] = [None] * n

    async def one(k: int) -> None:
        w0 = time.monotonic()
        async with limiter or contextlib.nullcontext():
            try:
                async with pool.acquire() as ps:
                    wait = time.monotonic() - w0
                    traj = await run_episode(model, ps, task, config, group_id=gid, index=k)
                    traj.timings["session_wait_s"] = wait
                    if probe is not None:
                        traj.metadata["probe"] = await probe(task, ps)
                    out[k] = traj
            except ServerError as e:  # the session could not be reset or restarted for this episode
                if out[k] is not None:
                    raise
                out[k] = _failed(task, gid, k, model, e, time.monotonic() - w0)
        if on_episode is not None:
            on_episode(out[k])

    async with anyio.create_task_group() as tg:
        for k in range(n):
            tg.start_soon(one, k)
    return [t for t in out if t is not None]


async def run_tasks(
    model: ChatModel,
    pool: SessionPool,
    tasks: list[Task | str],
    n: int = 4,
    config: RolloutConfig | None = None,
    *,
    max_concurrent: int | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
    probe: Probe | None = None,
) -> list[list[Trajectory]]:
    """One group of `n` episodes per task, all groups at once. A private-session pool bounds the
    episodes in flight by its size; `max_concurrent` bounds them for a shared session too."""
    out: list[list[Trajectory]] = [[] for _ in tasks]
    limiter = anyio.CapacityLimiter(max_concurrent) if max_concurrent else None

    async def one(i: int) -> None:
        out[i] = await run_group(
            model, pool, tasks[i], n, config, limiter=limiter, on_episode=on_episode, probe=probe
        )

    async with anyio.create_task_group() as tg:
        for i in range(len(tasks)):
            tg.start_soon(one, i)
    return out
