"""Reward = RULER's relative score shaped by the deterministic checks.

Default weights (all configurable, and every component is stored with the trajectory):

| component            | weight | applies when                                 |
| ---                  | ---    | ---                                          |
| ruler                | 1.0    | the group was scored by the judge            |
| answer_correct       | 1.0    | the task has a reference answer              |
| expected_tools_used  | 0.25   | the task names the tools it expects          |
| schema_valid_rate    | 0.25   | the trajectory made at least one call        |
| answer_faithful      | 0.25   | there is an answer (its values come from the task or an OK result) |
| arguments_faithful   | 0.25   | the trajectory made at least one call (no argument value invented) |
| no_error_rate        | 0.1    | the trajectory made at least one call        |
| distinct_calls       | 0.25   | the trajectory made at least one call (share not repeating an earlier call) |
| tagged_calls         | 0.0    | (logged: share of calls in `<tool_call>` tags; see `judges.checks.tagged_calls`) |
| parse_rate, answered | 0.0    | (logged, not weighted: schema-valid implies parsed; the gate covers answering) |
| needed_calls_ok      | 0.0    | the task has a reference answer (logged, not weighted: success reads it) |

The reward is the weighted mean of the components that apply (weights renormalized over them),
so it stays in [0, 1] whether or not a task is grounded or the judge answered. Then one gate: an
episode that did not *earn* an answer has its reward multiplied by `no_answer_factor` (0.25). Not
0, because a weak base model that rarely answers would give GRPO groups of all zeros and no signal.
An answer is not earned when
- there is none (a pasted tool result counts as none);
- the task expects tools and no valid call came back OK (`answer_without_tools`): measured
  2026-12-03 on `mcp-server-time` with `--judge none`, an answer with no calls and no values
  ("That reply ends the task.") passed every check that applied, scored 0.5 against a looping
  episode's 0.25, and 4 GRPO steps taught the policy to say it to every task without a call;
- grounded task, answer checked wrong (`wrong_answer_as_none`): it scores exactly what the same
  episode would with no answer (its `answer_faithful` is left out too), so a confident wrong answer
  never pays more than stopping (a judge, asked about grounded groups only with `judge_grounded`,
  still ranks inside that gate).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from judges.checks import CheckResult
from mcp_rl.trajectory import Trajectory


class RewardWeights(BaseModel):
    """A weight per reward component (`judges.checks.REWARD_COMPONENTS`, plus `ruler`); a component
    registered elsewhere takes its weight as an extra field, e.g. `RewardWeights(my_check=0.5)`."""

    model_config = ConfigDict(extra="allow")

    ruler: float = Field(default=1.0, ge=0)
    answer_correct: float = Field(default=1.0, ge=0)
    expected_tools_used: float = Field(default=0.25, ge=0)
    schema_valid_rate: float = Field(default=0.25, ge=0)
    no_error_rate: float = Field(default=0.1, ge=0)
    answer_faithful: float = Field(default=0.25, ge=0)
    arguments_faithful: float = Field(default=0.25, ge=0)
    parse_rate: float = Field(default=0.0, ge=0)
    answered: float = Field(default=0.0, ge=0)
    needed_calls_ok: float = Field(default=0.0, ge=0)
    distinct_calls: float = Field(default=0.25, ge=0)
    tagged_calls: float = Field(default=0.0, ge=0)


class RewardConfig(BaseModel):
    weights: RewardWeights = Field(default_factory=RewardWeights)
    no_answer_factor: float = Field(default=0.25, ge=0, le=1)
    answer_without_tools: bool = False
    """Off: an answer to a task that expects tools counts only after a valid call came back OK."""
    wrong_answer_as_none: bool = True
    """A grounded task's wrong answer scores as no answer. Off: it scores as an answer (the judge and
    the other checks decide), capped at `wrong_answer_cap` when that is set."""
    wrong_answer_cap: float | None = Field(default=None, ge=0, le=1)


def combine(
    checks: CheckResult, ruler_score: float | None, config: RewardConfig | None = None
) -> dict[str, float]:
    """All components, the gate factor and the final `reward`, as one flat dict of floats."""
    cfg = config or RewardConfig()
    comps = checks.components()
    if ruler_score is not None:
        comps["ruler"] = float(ruler_score)
    wrong = cfg.wrong_answer_as_none and checks.answer_correct is False
    unearned = not cfg.answer_without_tools and checks.used_tools is False
    earned = checks.answered and not wrong and not unearned
    # an answer that does not count is not weighed either: the same episode without it scores the same
    weighed = {k: v for k, v in comps.items() if earned or k != "answer_faithful"}
    weights = cfg.weights.model_dump()
    total_w = sum(weights[k] for k in weighed if k in weights)
    if total_w > 0:
        base = sum(weights[k] * v for k, v in weighed.items() if k in weights) / total_w
    else:
        base = float(earned)
    gate = 1.0 if earned else cfg.no_answer_factor
    reward = base * gate
    if cfg.wrong_answer_cap is not None and checks.answer_correct is False:
        reward = min(reward, cfg.wrong_answer_cap)
    comps["gate"] = gate
    comps["reward"] = reward
    return comps


def apply_reward(
    traj: Trajectory,
    checks: CheckResult,
    ruler_score: float | None,
    explanation: str = "",
    config: RewardConfig | None = None,
) -> float:
    """Combine, then store the reward, every component and the judge's explanation on `traj`."""
    comps = combine(checks, ruler_score, config)
    if ruler_score is None:
        comps["ruler_unscored"] = 1.0  # visible in every log: this reward came from checks alone
    traj.reward = comps["reward"]
    traj.reward_components = comps
    traj.judge_explanation = explanation
    return traj.reward
