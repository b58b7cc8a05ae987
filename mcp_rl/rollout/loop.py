"""The agent loop: one episode of a model working one task against a live MCP server, and groups
of episodes run concurrently.

An episode: system prompt + task; then turns of generate -> parse -> run calls -> feed results
back as `tool` messages, until a message with no tool call (the final answer, see
`mcp_rl.prompts`), the turn limit, or the context budget. Each episode keeps its own token trace
(`tokens.TokenTrace`); concurrent episodes call `model.generate` at the same time and the model
batches them. No global state: everything an episode needs comes in as arguments.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from mcp_rl.errors import McpRlError, ServerError
from mcp_rl.models.base import ChatModel, Message, SamplingParams, TokenModel
from mcp_rl.prompts import opening_messages
from mcp_rl.rollout.execute import run_calls
from mcp_rl.rollout.pool import PooledSession, SessionPool
from mcp_rl.rollout.tokens import TokenTrace
from mcp_rl.servers.results import CallStatus
from mcp_rl.toolcalls import ParsedCall, parse_message
from mcp_rl.trajectory import EpisodeEnd, ToolCallRecord, Trajectory
from scenario_gen.task import Task


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


def api_tool_calls(calls: list[ParsedCall], ids: list[str]) -> list[dict[str, Any]]:
    """OpenAI-style `tool_calls` for API models, which need them to accept the tool messages."""
    return [
        {
            "id": cid,
            "type": "function",
            "function": {"name": c.name or "invalid", "arguments": json.dumps(c.arguments or {})},
        }
        for c, cid in zip(calls, ids, strict=True)
    ]


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
    tools = [t.openai() for t in session.tools]
    names = [t.name for t in session.tools]
    messages: list[Message] = opening_messages(task.text, session.server_name, session.instructions)
    trace = TokenTrace(model, tools) if isinstance(model, TokenModel) else None
    records: list[ToolCallRecord] = []
    finish_reasons: list[str] = []
    timings = {"generate_s": 0.0, "tools_s": 0.0}
    final: str | None = None
    end: EpisodeEnd = "max_turns"
    turns = restarts = 0
    truncated_answer = False
    # The model's own window (positions it can attend to) caps the configured budget.
    context_limit = min(
        config.max_context_tokens, getattr(model, "max_context", None) or config.max_context_tokens
    )

    while turns < config.max_turns:
        max_new = config.max_new_tokens
        if trace is not None:
            trace.extend_to(messages, add_generation_prompt=False)
            before_prompt = trace.mark()
            trace.extend_to(messages, add_generation_prompt=True)
            room = context_limit - len(trace)
            if room < config.min_new_tokens:
                trace.rewind(before_prompt)  # the conversation ends where it stands
                end = "context"
                break
            max_new = min(max_new, room)
        sampling = _sampling(config, max_new, task.id, index, turns)
        g0 = time.monotonic()
        if trace is not None:
            assert isinstance(model, TokenModel)
            (completion,) = await model.generate(trace.token_ids, 1, sampling)
            content = trace.add_sample(completion)
        else:
            (completion,) = await model.chat(messages, tools, 1, sampling)
            content = completion.text
        timings["generate_s"] += time.monotonic() - g0
        turns += 1
        finish_reasons.append(completion.finish_reason)
        assistant: Message = {"role": "assistant", "content": content}
        messages.append(assistant)
        parsed = parse_message(content, names)
        if parsed.is_final:
            final, end = content.strip(), "answer"
            truncated_answer = completion.finish_reason == "length"
            break

        ids = [f"call_{turns}_{k}" for k in range(len(parsed.calls))]
        if trace is None:
            assistant["tool_calls"] = api_tool_calls(parsed.calls, ids)
        seen_generation = ps.generation
        c0 = time.monotonic()
        new = await run_calls(ps, parsed.calls, turns, config.max_calls_per_turn)
        timings["tools_s"] += time.monotonic() - c0
        crashed = any(r.status is CallStatus.CRASH for r in new)
        restarted = False
        if crashed and restarts < config.max_restarts:
            try:
                await ps.restart_after_crash(seen_generation)
                restarts += 1
                restarted = True
            except McpRlError:
                restarted = False
        for rec, cid in zip(new, ids, strict=True):
            if rec.status is CallStatus.CRASH and restarted:
                rec.result_text += "\n(The server was restarted: changes made before the crash are lost.)"
            messages.append(
                {"role": "tool", "tool_call_id": cid, "name": rec.name, "content": rec.result_text}
            )
        records.extend(new)
        if crashed and not restarted:
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
        turns=turns,
        token_ids=trace.token_ids if trace else [],
        sampled_mask=trace.sampled_mask if trace else [],
        logprobs=trace.logprobs if trace else [],
        timings=timings,
        metadata={
            "server": session.server_name,
            "tools": tools,
            "finish_reasons": finish_reasons,
            "restarts": restarts,
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
) -> list[Trajectory]:
    """`n` episodes of one task, concurrently, each on its own (or the shared) server session.
    `on_episode` is called as each one ends (progress display)."""
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
) -> list[list[Trajectory]]:
    """One group of `n` episodes per task, all groups at once. A private-session pool bounds the
    episodes in flight by its size; `max_concurrent` bounds them for a shared session too."""
    out: list[list[Trajectory]] = [[] for _ in tasks]
    limiter = anyio.CapacityLimiter(max_concurrent) if max_concurrent else None

    async def one(i: int) -> None:
        out[i] = await run_group(model, pool, tasks[i], n, config, limiter=limiter, on_episode=on_episode)

    async with anyio.create_task_group() as tg:
        for i in range(len(tasks)):
            tg.start_soon(one, i)
    return out
