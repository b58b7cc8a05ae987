"""Build the small labeled set the judge benchmark scores: 3 tasks x 4 trajectories on the example
inventory server (seed 0), from good to wrong, with tool errors.

The assistant turns are written by hand; every tool result is real, obtained by running the call
against the live server, so the judge sees exactly what an episode would have seen.

    python -m bench.data.build_judge_set      # rewrites judge_tasks.jsonl, judge_labeled.jsonl, judge_tools.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

from mcp_rl.servers import ServerSession, ServerSpec, ToolPolicy
from mcp_rl.task import Provenance, ReferenceCall, Task
from mcp_rl.trajectory import ToolCallRecord, Trajectory, save_trajectories

HERE = Path(__file__).parent
SYSTEM = (
    "You are the assistant of Trailhead Outfitters, an outdoor-gear shop. Use the tools to look things up, "
    "then give the user a short final answer."
)

TASKS = [
    Task(
        id="task-A",
        text="How many Basecamp 6P Cabin Tents do you have in stock, and what does one cost?",
        source="grounded",
        difficulty=1,
        tools_expected=["search_items"],
        reference_calls=[ReferenceCall(tool="search_items", arguments={"query": "basecamp"})],
        reference_answer="6 in stock; 482.99 USD",
        split="val",
    ),
    Task(
        id="task-B",
        text="What is the cheapest item in the lighting category, and its price?",
        source="grounded",
        difficulty=2,
        tools_expected=["filter_items"],
        reference_calls=[
            ReferenceCall(
                tool="filter_items", arguments={"category": "lighting", "sort_by": "price", "limit": 1}
            )
        ],
        reference_answer="Firefly Tent Light; 14.99 USD",
        split="val",
    ),
    Task(
        id="task-C",
        text="Which two in-stock items have the best customer ratings?",
        source="grounded",
        difficulty=3,
        tools_expected=["filter_items"],
        reference_calls=[
            ReferenceCall(
                tool="filter_items",
                arguments={"in_stock_only": True, "sort_by": "rating", "descending": True, "limit": 2},
            )
        ],
        reference_answer="Summit Dome 4P Tent; Camp Kettle 1L",
        split="val",
    ),
]

# (trajectory id, label 0-1, success, note, calls [(tool, args)], final answer or None, end)
Plan = tuple[str, float, bool, str, list[tuple[str, dict[str, Any]]], str | None, str]
PLANS: dict[str, list[Plan]] = {
    "task-A": [
        (
            "A1",
            1.0,
            True,
            "one call, correct",
            [("search_items", {"query": "basecamp"})],
            "We have 6 Basecamp 6P Cabin Tents in stock, at $482.99 each.",
            "answer",
        ),
        (
            "A2",
            0.75,
            True,
            "correct after detours",
            [
                ("list_categories", {}),
                ("filter_items", {"category": "tents"}),
                ("get_item", {"item_id": "ITM-003"}),
            ],
            "The Basecamp 6P Cabin Tent costs $482.99 and 6 are in stock.",
            "answer",
        ),
        (
            "A3",
            0.4,
            False,
            "stock right, price missing",
            [("search_items", {"query": "cabin tent"})],
            "There are 6 Basecamp 6P Cabin Tents in stock.",
            "answer",
        ),
        (
            "A4",
            0.0,
            False,
            "no tools, invented",
            [],
            "We have 12 Basecamp 6P Cabin Tents in stock, priced at $399.00.",
            "answer",
        ),
    ],
    "task-B": [
        (
            "B1",
            1.0,
            True,
            "one call, correct",
            [("filter_items", {"category": "lighting", "sort_by": "price", "limit": 1})],
            "The cheapest lighting item is the Firefly Tent Light at $14.99.",
            "answer",
        ),
        (
            "B2",
            0.7,
            True,
            "tool error, recovered",
            [
                ("search_items", {"query": "light", "category": "lights"}),
                ("filter_items", {"category": "lighting", "sort_by": "price"}),
            ],
            "The Firefly Tent Light is the cheapest lighting item: $14.99.",
            "answer",
        ),
        (
            "B3",
            0.1,
            False,
            "invalid call and tool error, gave up",
            [
                ("filter_items", {"category": "lighting", "max_price": "cheap"}),
                ("get_item", {"item_id": "ITM-999"}),
            ],
            "Sorry, I could not find the cheapest lighting item.",
            "answer",
        ),
        (
            "B4",
            0.15,
            False,
            "wrong sort order, wrong answer",
            [("filter_items", {"category": "lighting", "sort_by": "price", "descending": True, "limit": 1})],
            "The cheapest lighting item is the Beacon 400 Headlamp, at $47.99.",
            "answer",
        ),
    ],
    "task-C": [
        (
            "C1",
            1.0,
            True,
            "one call, correct",
            [("filter_items", {"in_stock_only": True, "sort_by": "rating", "descending": True, "limit": 2})],
            "The two best-rated items in stock are the Summit Dome 4P Tent (4.9) and the Camp Kettle 1L (4.8).",
            "answer",
        ),
        (
            "C2",
            0.45,
            False,
            "right call, only one of two items",
            [("filter_items", {"in_stock_only": True, "sort_by": "rating", "descending": True, "limit": 2})],
            "The best-rated item in stock is the Summit Dome 4P Tent, rated 4.9.",
            "answer",
        ),
        (
            "C3",
            0.1,
            False,
            "repeats a useless search, no answer",
            [("search_items", {"query": "best rated"})] * 3,
            None,
            "max_turns",
        ),
        (
            "C4",
            0.0,
            False,
            "no tools, invented",
            [],
            "Our best-rated in-stock items are the Trailblazer Boots and the Nomad Hammock.",
            "answer",
        ),
    ],
}


async def build() -> None:
    spec = ServerSpec.parse(f"{sys.executable} -m examples.servers.inventory --transport stdio --seed 0")
    trajs: list[Trajectory] = []
    async with ServerSession(spec, policy=ToolPolicy()) as s:
        tools = [t.openai() for t in s.tools]
        for task in TASKS:
            for rc in task.reference_calls:
                rc.result_text = (await s.call(rc.tool, rc.arguments)).text
            task.provenance = Provenance(generator="hand-written", seed=0, server_name=s.server_name)
            for tid, label, success, note, calls, answer, end in PLANS[task.id]:
                messages: list[dict[str, Any]] = [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": task.text},
                ]
                records = []
                for turn, (name, args) in enumerate(calls, start=1):
                    res = await s.call(name, args)
                    call_id = f"call_{turn}"
                    messages.append(
                        {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [
                                {
                                    "id": call_id,
                                    "type": "function",
                                    "function": {"name": name, "arguments": json.dumps(args)},
                                }
                            ],
                        }
                    )
                    messages.append(
                        {"role": "tool", "tool_call_id": call_id, "name": name, "content": res.text}
                    )
                    records.append(
                        ToolCallRecord(
                            turn=turn,
                            name=name,
                            arguments=args,
                            raw=json.dumps({"name": name, "arguments": args}),
                            valid=res.status != "invalid",
                            status=res.status,
                            result_text=res.text,
                            latency_s=round(res.latency_s, 3),
                        )
                    )
                if answer is not None:
                    messages.append({"role": "assistant", "content": answer})
                trajs.append(
                    Trajectory(
                        id=tid,
                        task_id=task.id,
                        group_id=f"grp-{task.id[-1]}",
                        task_text=task.text,
                        model="hand-written",
                        messages=messages,
                        tool_calls=records,
                        final_answer=answer,
                        end=end,
                        turns=len(calls) + (1 if answer else 0),
                        metadata={"label": label, "label_success": success, "label_note": note},
                    )
                )
    (HERE / "judge_tools.json").write_text(json.dumps(tools, indent=1) + "\n", encoding="utf-8")
    with (HERE / "judge_tasks.jsonl").open("w", encoding="utf-8") as f:
        for task in TASKS:
            f.write(task.model_dump_json() + "\n")
    save_trajectories(trajs, HERE / "judge_labeled.jsonl")
    print(f"wrote {len(trajs)} trajectories for {len(TASKS)} tasks to {HERE}")


if __name__ == "__main__":
    anyio.run(build)
