"""In which form does a policy write its tool calls? Samples first turns and counts the forms.

Only calls in `<tool_call>` tags become OpenAI `tool_calls` in llama.cpp's server, vLLM's `hermes`
parser and Ollama's Qwen templates (`mcp_rl.toolcalls.ParsedCall.tagged`); `mcp-rl serve` reads every
form. Two prompts: the training prompt as it is (Qwen's template already asks for tags), and the same
with one more system line asking for tags.

    python -m bench.call_form --server "python -m examples.servers.inventory" \\
        --tasks examples/tasks/inventory-48.jsonl --n-tasks 10 --samples 4
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import anyio

from mcp_rl.models import load_model
from mcp_rl.models.base import SamplingParams
from mcp_rl.policy_prompt import opening_messages
from mcp_rl.servers import ServerSession, ServerSpec, ToolPolicy
from mcp_rl.toolcalls import parse_message

ASK_FOR_TAGS = (
    'Write each tool call as <tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>, '
    "with nothing else in that reply."
)


def form(text: str, names: list[str]) -> str:
    calls = parse_message(text, names).calls
    if not calls:
        return "answer"
    if all(c.tagged for c in calls):
        return "tagged"
    return "fenced" if "```" in text else "bare"


async def main(a: argparse.Namespace) -> None:
    lines = Path(a.tasks).read_text().splitlines()
    tasks = [json.loads(line) for line in lines if line.strip()][: a.n_tasks]
    spec = ServerSpec.parse(a.server)
    async with ServerSession(spec, policy=ToolPolicy()) as session:
        tools = [t.openai() for t in session.tools]
        names = [t.name for t in session.tools]
    model = load_model(a.model)
    sampling = SamplingParams(temperature=a.temperature, max_new_tokens=96)
    for variant in ("training prompt", "+ a line asking for tags"):
        counts: Counter[str] = Counter()
        for task in tasks:
            messages = opening_messages(task["text"], spec.name)
            if variant != "training prompt":
                messages[0]["content"] += "\n\n" + ASK_FOR_TAGS
            ids = model.encode(model.render(messages, tools, True))
            for out in await model.generate(ids, a.samples, sampling):
                counts[form(out.text, names)] += 1
        total = sum(counts.values())
        print(f"{variant}: {counts['tagged']} of {total} in tags; {dict(counts)}", flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", required=True)
    p.add_argument("--tasks", required=True)
    p.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    p.add_argument("--n-tasks", type=int, default=10)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--temperature", type=float, default=1.0)
    anyio.run(main, p.parse_args())
