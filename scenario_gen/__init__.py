"""Tasks with no labeled data: from a server's tools to a validated, split task set.

tasks, report = await generate_tasks(session, model, GenerateConfig(n=100))
save_tasks(tasks, "tasks.jsonl")            # or .parquet, or a directory (datasets layout)
tasks = load_tasks("tasks.jsonl")
answer = apply_rule(task.answer_rule, [r.text for r in fresh_results])   # grading state-dependent tasks
"""

from scenario_gen.facts import apply_rule, extract_facts
from scenario_gen.io import load_tasks, save_tasks
from scenario_gen.pipeline import GenerateConfig, generate_tasks
from scenario_gen.report import GenReport
from scenario_gen.split import split_tasks
from scenario_gen.task import AnswerRule, Provenance, ReferenceCall, Task

__all__ = [
    "AnswerRule",
    "GenReport",
    "GenerateConfig",
    "Provenance",
    "ReferenceCall",
    "Task",
    "apply_rule",
    "extract_facts",
    "generate_tasks",
    "load_tasks",
    "save_tasks",
    "split_tasks",
]
