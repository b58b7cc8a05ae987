"""What a training run is configured with: one pydantic record, saved (without secrets) in the run dir."""

from __future__ import annotations

from pydantic import BaseModel, Field

from judges.reward import RewardConfig
from mcp_rl.grpo_config import GRPOConfig
from mcp_rl.models.defaults import DEFAULT_JUDGE_MODEL, DEFAULT_POLICY_MODEL, DEFAULT_WRITER_MODEL
from mcp_rl.rollout import RolloutConfig
from mcp_rl.servers import ToolPolicy


class LoraSettings(BaseModel):
    # "LoRA without regret": small ranks on all linear layers match full fine-tuning for RL.
    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: str | list[str] = "all-linear"


class TrainConfig(BaseModel):
    # what to train, on what
    model: str = DEFAULT_POLICY_MODEL
    server: dict = Field(default_factory=dict)
    """The server spec's public form (secret values masked): a record, not a way to reconnect."""
    policy: ToolPolicy = Field(default_factory=ToolPolicy)

    # tasks
    tasks_file: str | None = None
    """Load tasks from here instead of generating them."""
    n_tasks: int = Field(default=24, ge=2)
    generator: str = DEFAULT_WRITER_MODEL
    instructions: str = ""
    val_fraction: float = Field(default=0.25, gt=0.0, lt=1.0)

    # scoring
    judge: str = DEFAULT_JUDGE_MODEL
    """A model name, or 'none': rewards and success from the deterministic checks alone (grounded tasks)."""
    judge_grounded: bool = False
    """Also ask the judge about groups of grounded tasks. Off: their reward comes from the reference
    check and the other checks alone. The offline 1.5B judge lowered the ranking agreement on grounded
    tasks (Kendall tau 1.00 with checks alone, 0.89 with it: docs/benchmarks.md) and costs most of a
    step, so it is asked only where nothing else can grade; turn this on for a strong (API) judge."""
    rubric_file: str | None = None
    judge_permutations: int = Field(default=1, ge=1)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """Weights and gates combining the RULER score with the deterministic checks."""

    # the loop
    group_size: int = Field(default=4, ge=2)
    tasks_per_step: int = Field(default=2, ge=1)
    max_steps: int = Field(default=20, ge=1)
    eval_every: int = Field(default=2, ge=1)
    eval_samples: int = Field(default=1, ge=1)
    """Episodes per val task at each evaluation."""
    eval_temperature: float = Field(default=0.0, ge=0.0)
    """0: greedy, so an evaluation measures the policy rather than sampling noise."""
    patience: int = Field(default=3, ge=1)
    """Stop after this many evaluations without an improvement larger than `min_improvement`."""
    min_improvement: float = Field(default=0.02, ge=0.0)
    seed: int = 0

    log_to: list[str] = Field(default_factory=list)
    """Experiment trackers that also get every metrics record: 'tensorboard', 'wandb'."""

    lora: LoraSettings = Field(default_factory=LoraSettings)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    rollout: RolloutConfig = Field(default_factory=lambda: RolloutConfig(max_turns=4, max_new_tokens=160))
