"""What a training run is configured with: one pydantic record, saved (without secrets) in the run dir."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from judges.reward import RewardConfig
from mcp_rl.grpo_config import GRPOConfig
from mcp_rl.rollout import RolloutConfig
from mcp_rl.servers import ToolPolicy

DEFAULT_POLICY_MODEL = "qwen2.5-coder-0.5b-instruct"
DEFAULT_WRITER_MODEL = "qwen2.5-coder-1.5b-instruct"
DEFAULT_JUDGE_MODEL = "qwen2.5-coder-1.5b-instruct"


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
    n_tasks: int = Field(default=96, ge=3)
    """Tasks to write when no --tasks file is given. 96 at the default fractions gives about 29 test
    tasks, all grounded where the server allows: at n = 29 a 95% interval spans about +-17 points at
    50% and +-12 at 10%, so a gain from 10% to 45% or more shows as intervals that do not overlap."""
    generator: str = DEFAULT_WRITER_MODEL
    instructions: str = ""
    grounded_share: float = Field(default=0.7, ge=0.0, le=1.0)
    """The share of generated tasks aimed to be grounded (checked success needs them; val and test
    are filled from grounded tasks first, so the rest train with written ones too)."""
    val_fraction: float = Field(default=0.2, gt=0.0, lt=1.0)
    """The share of tasks held out to decide the best checkpoint and the plateau."""
    test_fraction: float = Field(default=0.3, gt=0.0, lt=1.0)
    """The share held out for the reported figure: evaluated exactly twice, base and chosen best."""

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
    success_judge: str | None = None
    """The model that gives the verdicts of judged success (tasks without a reference); default the
    --judge model. Never asked when --judge is 'none': judged success is then absent, not 0."""
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
    """Stop after this many evaluations in a row without an improvement (see `min_improvement`)."""
    min_improvement: float = Field(default=0.05, ge=0.0, le=1.0)
    """An evaluation improves on the best so far only when its val success is higher by at least
    this share, by at least two tasks, and by more than one standard error of the paired difference
    (the tasks it newly solves minus those it newly fails, against sqrt of both): one task flipping on
    a small val set is noise, not progress."""
    seed: int = 0

    log_to: list[str] = Field(default_factory=list)
    """Experiment trackers that also get every metrics record: 'tensorboard', 'wandb'."""

    lora: LoraSettings = Field(default_factory=LoraSettings)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    rollout: RolloutConfig = Field(default_factory=lambda: RolloutConfig(max_turns=4, max_new_tokens=160))

    @model_validator(mode="after")
    def _held_out_leaves_training(self) -> TrainConfig:
        if self.val_fraction + self.test_fraction >= 0.9:
            raise ValueError(
                f"val_fraction + test_fraction = {self.val_fraction + self.test_fraction:.2f} leaves "
                "too few tasks to train on (keep their sum below 0.9)"
            )
        return self
