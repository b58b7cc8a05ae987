"""Tasks with no labeled data: from a server's tools to a validated, split task set.

tasks, report = await generate_tasks(session, model, GenerateConfig(n=100))
save_tasks(tasks, "tasks.jsonl")            # or .parquet, or a directory (datasets layout)
tasks = load_tasks("tasks.jsonl")
tasks = split_tasks(tasks, val_fraction=0.2, test_fraction=0.3)   # no call or entity in two splits
answer = apply_rule(task.answer_rule, [r.text for r in fresh_results])   # grading state-dependent tasks
"""

from mcp_rl.answer_rule import apply_rule
from mcp_rl.task import AnswerRule, Provenance, ReferenceCall, Task
from scenario_gen.facts import extract_facts
from scenario_gen.gen_report import GenReport
from scenario_gen.generate import GenerateConfig, generate_tasks
from scenario_gen.io import load_tasks, save_tasks
from scenario_gen.split import SplitReport, leaks, split_report, split_tasks

__all__ = [
    "AnswerRule",
    "GenReport",
    "GenerateConfig",
    "Provenance",
    "ReferenceCall",
    "SplitReport",
    "Task",
    "apply_rule",
    "extract_facts",
    "generate_tasks",
    "leaks",
    "load_tasks",
    "save_tasks",
    "split_report",
    "split_tasks",
]
