"""Scoring trajectories: RULER (relative, a group at a time), deterministic tool-use checks,
the reward that combines them, and success with a confidence interval.

Small pieces that compose:

    ruler = Ruler(judge_model, JudgeConfig(permutations=2), cache=JudgeCache(run_dir / "judge_cache"))
    report = await judge_trajectories(trajs, tasks_by_id, ruler, RewardConfig())
    # every trajectory now has .reward, .reward_components and .judge_explanation

`judges` never imports the trainer.
"""

from judges.answers import AnswerMatch, answer_matches
from judges.cache import JudgeCache
from judges.checks import CheckResult, run_checks
from judges.judge_prompts import DEFAULT_RUBRIC, load_rubric
from judges.regrade import FreshReference, refresh_reference
from judges.reward import RewardConfig, RewardWeights, apply_reward, combine
from judges.ruler import GroupScore, JudgeConfig, Ruler, permutation_orders
from judges.scores import ScoreCheck, check_scores
from judges.scoring import JudgeReport, Scorer, group_trajectories, judge_trajectories
from judges.success import Success, SuccessRate, decide_success, success_rate, wilson_interval
from judges.verdict import Verdict, judge_verdict
from mcp_rl.usage import Usage

__all__ = [
    "DEFAULT_RUBRIC",
    "AnswerMatch",
    "CheckResult",
    "FreshReference",
    "GroupScore",
    "JudgeCache",
    "JudgeConfig",
    "JudgeReport",
    "RewardConfig",
    "RewardWeights",
    "Ruler",
    "ScoreCheck",
    "Scorer",
    "Success",
    "SuccessRate",
    "Usage",
    "Verdict",
    "answer_matches",
    "apply_reward",
    "check_scores",
    "combine",
    "decide_success",
    "group_trajectories",
    "judge_trajectories",
    "judge_verdict",
    "load_rubric",
    "permutation_orders",
    "refresh_reference",
    "run_checks",
    "success_rate",
    "wilson_interval",
]
