"""The words the judge reads: default rubric, output format, repair and verdict prompts."""

from __future__ import annotations

from pathlib import Path

from mcp_rl.errors import ConfigError

PROMPT_VERSION = "ruler-v3"
"""Part of every cache key: bump it when the prompts change so old cached scores are not reused."""

DEFAULT_RUBRIC = """\
- A trajectory that reaches the user's goal (a correct, complete final answer) must score far above one \
that does not, whatever else happened.
- Among those that reach the goal, fewer detours is better: no needless, repeated or invalid tool calls.
- Give partial credit for real progress: the right tools with the right arguments, useful results found, \
even if the final answer is incomplete.
- A wrong answer stated confidently is worse than an honest partial one; an invented answer with no tool \
use behind it scores near 0.
- Gaps between scores should reflect gaps in quality: similar trajectories get similar scores.
- If a reference answer is given, it is correct: judge final answers against it."""

RULER_SYSTEM = """\
You are a careful judge of AI agents that use tools. You will see one task and several attempts \
(trajectories) at it, each under an id such as t1. Look at each trajectory on its own first (what it \
called, what came back, what its FINAL ANSWER says), then compare them and give each a score from 0 to 1.

Rubric:
{rubric}

Reply with only this JSON object, nothing before or after it:
{{"scores": [{{"id": "t1", "answer": "<that trajectory's FINAL ANSWER, copied, at most 20 words>", \
"explanation": "<why this answer earns its score, one sentence>", "score": <number from 0 to 1>}}, ...]}}
with exactly one entry for every id shown."""

SUCCESS_PROMPT_VERSION = "success-v1"
"""Part of the success verdict's cache key, apart from the reward's (RULER) prompts and cache entries."""

VERDICT_SYSTEM = """\
You are a strict grader of an AI agent that uses tools. You will see one task and one attempt at it. \
Decide whether the attempt succeeded. It succeeded only if ALL of these hold:
- its FINAL ANSWER is a statement for a person that answers what the task asks, completely;
- every fact and value in the answer comes from the tool results shown or from the task itself \
(an answer built on data the task never gave, or on values no tool returned, fails);
- the tool calls use inputs the task gave or earlier results returned, not invented ones.
An answer that pastes raw tool output instead of answering, answers a different question, or only \
says what the agent would do, fails. If a reference answer is given, it is correct: compare with it.

Reply with only this JSON object, nothing before or after it:
{"explanation": "<one short sentence>", "success": true or false}"""


def load_rubric(path: str | Path | None) -> str:
    """The rubric text from a file, or the default one."""
    if path is None:
        return DEFAULT_RUBRIC
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise ConfigError(f"cannot read rubric file {p}: {e.strerror}", "pass a readable text file") from e
    if not text:
        raise ConfigError(f"rubric file {p} is empty", "write the rubric as a few bullet points")
    return text


def task_block(task_text: str, reference_answer: str | None, tools_text: str, context_text: str) -> str:
    parts = [f"## Task\n{task_text.strip() or '(not given)'}"]
    if reference_answer:
        parts.append(f"## Reference answer (known to be correct)\n{reference_answer.strip()}")
    if tools_text:
        parts.append(f"## Tools the agent had\n{tools_text}")
    if context_text:
        parts.append(f"## Conversation start, shared by every trajectory\n{context_text}")
    return "\n\n".join(parts)


def ruler_user(header: str, rendered: list[tuple[str, str]]) -> str:
    ids = [i for i, _ in rendered]
    body = "\n\n".join(f"### {i}\n{text}" for i, text in rendered)
    return (
        f"{header}\n\n## Trajectories (each continues the shared start)\n\n{body}\n\n"
        f"Score each of these ids exactly once: {', '.join(ids)}. Reply with the JSON object only."
    )


def repair_message(problems: list[str], ids: list[str]) -> str:
    listed = "\n".join(f"- {p}" for p in problems)
    return (
        f"Your previous reply could not be used:\n{listed}\n\n"
        f"Reply again with only the JSON object, one entry for each of {', '.join(ids)} "
        f"(no other ids), each score a number from 0 to 1."
    )


def verdict_repair_message(problem: str) -> str:
    return (
        f"Your previous reply could not be used: {problem}\n"
        'Reply again with only: {"explanation": "<one short sentence>", "success": true or false}'
    )
