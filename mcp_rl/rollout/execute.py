"""Run the calls of one assistant message against the live server.

Calls that fail the form check (`toolcalls`) or the server's own check (unknown tool, excluded
tool, arguments that break the schema) are never sent: they come back INVALID with the reason,
which is what the model is told. Valid calls run in message order, except that consecutive
read-only tools (MCP `readOnlyHint`) run concurrently: they cannot change what the others see.
After a crash the rest of the message is not sent.
"""

from __future__ import annotations

import anyio

from mcp_rl.rollout.pool import PooledSession
from mcp_rl.servers.results import CallStatus, ToolResult
from mcp_rl.toolcalls import ParsedCall
from mcp_rl.trajectory import ToolCallRecord


def feedback_text(status: CallStatus, text: str) -> str:
    """What the model reads in the tool message for one call."""
    if status is CallStatus.OK:
        return text
    if status is CallStatus.INVALID:
        return f"Error: invalid tool call, not run: {text}"
    if status is CallStatus.TOOL_ERROR and text.lower().lstrip().startswith("error"):
        return text
    label = {
        CallStatus.TOOL_ERROR: "the tool failed",
        CallStatus.PROTOCOL_ERROR: "the server rejected the call",
        CallStatus.TIMEOUT: "the tool timed out",
        CallStatus.CRASH: "the server crashed",
    }[status]
    return f"Error: {label}: {text}"


def _record(turn: int, call: ParsedCall, result: ToolResult) -> ToolCallRecord:
    return ToolCallRecord(
        turn=turn,
        name=call.name,
        arguments=call.arguments,
        raw=call.raw,
        tagged=call.tagged,
        valid=result.status is not CallStatus.INVALID,
        status=result.status,
        result_text=feedback_text(result.status, result.text),
        latency_s=result.latency_s,
    )


async def run_calls(
    ps: PooledSession, calls: list[ParsedCall], turn: int, max_calls: int
) -> list[ToolCallRecord]:
    """One record per call attempt, in message order."""
    session = ps.session
    results: list[ToolResult | None] = [None] * len(calls)
    runnable: list[int] = []
    for i, call in enumerate(calls):
        problem = call.error
        if problem is None and i >= max_calls:
            problem = f"too many tool calls in one message (at most {max_calls}); this one was dropped"
        if problem is None:
            problem = session.check_call(call.name, call.arguments or {})
        if problem is not None:
            results[i] = ToolResult(status=CallStatus.INVALID, text=problem)
        else:
            runnable.append(i)

    def read_only(i: int) -> bool:
        tool = session.tool(calls[i].name)
        return bool(tool and tool.annotations.read_only)

    async def run_one(i: int) -> None:
        results[i] = await session.call(calls[i].name, calls[i].arguments or {})

    crashed = False
    k = 0
    while k < len(runnable):
        batch = [runnable[k]]
        if read_only(runnable[k]):
            while k + len(batch) < len(runnable) and read_only(runnable[k + len(batch)]):
                batch.append(runnable[k + len(batch)])
        k += len(batch)
        if crashed:
            for i in batch:
                results[i] = ToolResult(
                    status=CallStatus.CRASH, text="not run: the server stopped during an earlier call"
                )
            continue
        if len(batch) == 1:
            await run_one(batch[0])
        else:
            async with anyio.create_task_group() as tg:
                for i in batch:
                    tg.start_soon(run_one, i)
        crashed = any(r is not None and r.status is CallStatus.CRASH for r in (results[i] for i in batch))

    return [_record(turn, c, r) for c, r in zip(calls, results, strict=True) if r is not None]
