"""Working BFCL entries through our agent loop, one stdio backend server per entry.

An entry is one conversation: the system prompt and the first user turn, then the model takes
turns (`rollout.turn.Agent`, the turn training uses) until it answers; the next user turn is
appended and it goes on, on the same live server, so state carries across turns as BFCL means it
to. A turn gets at most `max_steps` assistant messages; one that runs out (or fills the context,
or loses the server) ends the conversation, as BFCL's force-termination does.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mcp_rl.bench.bfcl_data import BfclEntry, require_bfcl
from mcp_rl.bench.bfcl_server import tool_schemas
from mcp_rl.bench.grade import TurnRecord, Verdict, bfcl_verdict, decoded, strict_verdict
from mcp_rl.bench.oracle import OracleModel
from mcp_rl.models.base import ChatModel, SamplingParams, TokenModel
from mcp_rl.policy_prompt import opening_messages
from mcp_rl.rollout.loop import RolloutConfig
from mcp_rl.rollout.pool import SessionPool
from mcp_rl.rollout.tokens import TokenTrace
from mcp_rl.rollout.turn import Agent
from mcp_rl.servers.policy import ToolPolicy
from mcp_rl.servers.spec import ServerSpec
from mcp_rl.trajectory import Trajectory

ModelFor = Callable[[BfclEntry], ChatModel]
"""The model that works an entry (the oracle is made per entry; a policy is the same for all)."""


class BenchConfig(BaseModel):
    max_steps: int = 8
    """Assistant messages per user turn."""
    max_new_tokens: int = 256
    max_context_tokens: int = 8192
    min_new_tokens: int = 32
    max_calls_per_turn: int = 8
    max_restarts: int = 0
    temperature: float = 0.0
    """Greedy: a benchmark measures the policy, not sampling noise."""


class EntryResult(BaseModel):
    id: str
    category: str
    backends: list[str]
    model: str
    bfcl: Verdict
    strict: bool | None
    strict_reason: str = ""
    turns: list[TurnRecord]
    episode: Trajectory
    seconds: float = 0.0

    @property
    def agree(self) -> bool | None:
        return None if self.strict is None else self.strict == self.bfcl.valid


def server_env() -> dict[str, str]:
    """PYTHONPATH naming where mcp_rl and bfcl_eval are imported from here: a stdio server gets a
    minimal environment, and the backend server must import the same two."""
    here = Path(__file__).resolve().parents[2]
    paths = [str(here), str(require_bfcl().parent), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def server_spec(entry: BfclEntry) -> ServerSpec:
    """The entry's backends as a stdio server, run by this interpreter."""
    command = [sys.executable, "-m", "mcp_rl.bench.bfcl_server", "bfcl:" + "+".join(entry.involved_classes), "--entry", entry.id]
    return ServerSpec(
        name="bfcl-" + "-".join(entry.involved_classes),
        transport="stdio",
        command=command,
        env=server_env(),
    )


def bench_policy(entry: BfclEntry) -> ToolPolicy:
    """Every tool the entry offers, by name: the backends are simulations in a throwaway process, so
    the write and irreversible classes that guard real servers have nothing to protect here."""
    return ToolPolicy(allow=[t["name"] for t in tool_schemas(entry.involved_classes, entry.excluded_function)], resettable=True)


async def run_entry(model: ChatModel, entry: BfclEntry, config: BenchConfig | None = None) -> EntryResult:
    config = config or BenchConfig()
    t0 = time.monotonic()
    steps = config.max_steps
    if isinstance(model, OracleModel):
        steps = max(steps, model.steps_needed())
    limits = RolloutConfig(
        max_turns=10_000, max_new_tokens=config.max_new_tokens, max_context_tokens=config.max_context_tokens,
        min_new_tokens=config.min_new_tokens, max_calls_per_turn=config.max_calls_per_turn,
        max_restarts=config.max_restarts, temperature=config.temperature,
    )  # fmt: skip
    turns: list[TurnRecord] = []
    async with SessionPool(server_spec(entry), bench_policy(entry), size=1, share=False) as pool, pool.acquire() as ps:
        session = ps.session
        agent = Agent(model, ps, limits)
        messages = opening_messages(entry.turns[0], session.server_name, session.instructions)
        trace = TokenTrace(model, agent.tools) if isinstance(model, TokenModel) else None
        records = []
        for i, text in enumerate(entry.turns):
            if i:
                messages.append({"role": "user", "content": text})
            rec = TurnRecord(text=text, end="max_turns")
            turns.append(rec)
            for _ in range(steps):
                done = await agent.turn(
                    messages,
                    lambda n: SamplingParams(temperature=config.temperature, max_new_tokens=n, seed=0),
                    trace,
                )
                if done is None:
                    rec.end = "context"
                    break
                if done.final:
                    rec.answer, rec.end = done.content.strip(), "answer"
                    break
                rec.steps.append(done.calls)
                records.extend(done.calls)
                if done.server_lost:
                    rec.end = "server_error"
                    break
            if rec.end != "answer":
                break
        if trace is not None:
            trace.extend_to(messages, add_generation_prompt=False)
    last = turns[-1]
    episode = Trajectory(
        id=f"bfcl-{entry.id}",
        task_id=entry.id,
        task_text="\n".join(entry.turns),
        model=getattr(model, "name", ""),
        messages=messages,
        tool_calls=records,
        final_answer=last.answer,
        end="answer" if last.end == "answer" and len(turns) == len(entry.turns) else last.end,  # type: ignore[arg-type]
        turns=agent.turns,
        metadata={"server": session.server_name, "user_turns": len(turns), "decoded": decoded(turns)},
    )
    verdict = bfcl_verdict(entry, turns)
    strict, why = strict_verdict(entry, turns)
    return EntryResult(
        id=entry.id, category=entry.category, backends=entry.involved_classes, model=episode.model,
        bfcl=verdict, strict=strict, strict_reason=why, turns=turns, episode=episode,
        seconds=time.monotonic() - t0,
    )  # fmt: skip


async def run_bench(
    model_for: ModelFor,
    entries: list[BfclEntry],
    config: BenchConfig | None = None,
    on_entry: Callable[[EntryResult], None] | None = None,
) -> list[EntryResult]:
    """Every entry in order (one at a time: the policy batches nothing across conversations, and the
    machine this runs on is small). `on_entry` is called after each (the progress bar)."""
    out = []
    for entry in entries:
        result = await run_entry(model_for(entry), entry, config)
        out.append(result)
        if on_entry is not None:
            on_entry(result)
    return out


def oracle_for(entry: BfclEntry) -> Any:
    return OracleModel(entry)
