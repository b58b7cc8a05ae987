"""What a training run is configured with: one pydantic record, saved (without secrets) in the run dir."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from judges.reward import RewardConfig
from mcp_rl.curriculum import SamplingConfig
from mcp_rl.errors import ModelError
from mcp_rl.grpo_config import GRPOConfig
from mcp_rl.models.defaults import DEFAULT_JUDGE_MODEL, DEFAULT_POLICY_MODEL, DEFAULT_WRITER_MODEL
from mcp_rl.models.registry import check_base_url
from mcp_rl.rollout import RolloutConfig
from mcp_rl.servers import ToolPolicy
from mcp_rl.solvability import SolvabilitySettings


class LoraSettings(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, allow_inf_nan=False)

    # "LoRA without regret": small ranks on all linear layers match full fine-tuning for RL.
    r: int = Field(default=16, ge=1, json_schema_extra={"cli": "--lora-rank"})
    """LoRA rank (alpha is twice the rank unless given)."""
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: str | list[str] = "all-linear"

    @model_validator(mode="before")
    @classmethod
    def _alpha_follows_rank(cls, data: Any) -> Any:
        # alpha / r scales the update: keeping it at 2 keeps the learning rate meaning the same at any rank
        r = data.get("r") if isinstance(data, dict) else None
        if isinstance(r, int) and r >= 1 and "alpha" not in data:  # a bad rank is reported as such
            return {**data, "alpha": 2 * r}
        return data


class TrainConfig(BaseModel):
    """Every field is a `mcp-rl train` option (mcp_rl/cli/from_config.py): its flag is the field's
    name unless `json_schema_extra={"cli": ...}` says otherwise, its help is the docstring under it."""

    model_config = ConfigDict(use_attribute_docstrings=True, allow_inf_nan=False)

    # what to train, on what
    model: str = DEFAULT_POLICY_MODEL
    """Policy model: a built-in name, HF dir, .gguf file, or hub id."""
    server: dict = Field(default_factory=dict, json_schema_extra={"cli": False})
    """The server spec's public form (secret values masked): a record, not a way to reconnect."""
    policy: ToolPolicy = Field(default_factory=ToolPolicy, json_schema_extra={"cli": False})

    # tasks
    tasks_file: str | None = Field(default=None, json_schema_extra={"cli": "--tasks"})
    """Load tasks from here instead of generating them."""
    n_tasks: int = Field(default=96, ge=3)
    """Tasks to write when no --tasks file is given. 96 at the default fractions gives about 29 test
    tasks, all grounded where the server allows: at n = 29 a 95% interval spans about +-17 points at
    50% and +-12 at 10%, so a gain from 10% to 45% or more shows as intervals that do not overlap."""
    generator: str = DEFAULT_WRITER_MODEL
    """Task-writing model."""
    instructions: str = ""
    """Steer the theme of generated tasks."""
    solvability: SolvabilitySettings = Field(default_factory=SolvabilitySettings)
    """The solvability pass of the trainer's own generation (not run on a --tasks file)."""
    grounded_share: float = Field(default=0.7, ge=0.0, le=1.0)
    """The share of generated tasks aimed to be grounded (checked success needs them; val and test
    take grounded tasks first, while train keeps 40% of them)."""
    val_fraction: float = Field(default=0.2, gt=0.0, lt=1.0)
    """The share of generated tasks held out to decide the best checkpoint and the plateau (a --tasks
    file keeps its split)."""
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
    rubric_file: str | None = Field(default=None, json_schema_extra={"cli": "--rubric"})
    """A file with your own RULER rubric."""
    base_url: str | None = None
    """An OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1) for the run's API models: a --judge,
    --generator or --success-judge named openai:NAME, or by a name the endpoint serves (its key from
    OPENAI_API_KEY). The policy is always local."""
    judge_permutations: int = Field(default=1, ge=1)
    """Score K shuffled orders and average (position bias)."""
    success_judge: str | None = None
    """The model that gives the verdicts of judged success (tasks without a reference); default the
    --judge model. Never asked when --judge is 'none': judged success is then absent, not 0."""
    reward: RewardConfig = Field(default_factory=RewardConfig, json_schema_extra={"cli": False})
    """Weights and gates combining the RULER score with the deterministic checks."""

    # the loop
    group_size: int = Field(default=4, ge=2, json_schema_extra={"cli": ["--group-size", "-n"]})
    """Episodes per task (a GRPO group)."""
    tasks_per_step: int = Field(default=2, ge=1)
    """Tasks (groups) per step."""
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    max_steps: int = Field(default=20, ge=1)
    """Stop after this many steps at most."""
    eval_every: int = Field(default=2, ge=1)
    """Evaluate on val every K steps."""
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
    """Seed for tasks, sampling and splits."""

    log_to: list[str] = Field(default_factory=list)
    """Experiment trackers that also get every metrics record: 'tensorboard', 'wandb' (repeatable or
    comma-separated; written inside the run directory; W&B runs offline unless WANDB_API_KEY or
    WANDB_MODE is set)."""

    lora: LoraSettings = Field(default_factory=LoraSettings)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    rollout: RolloutConfig = Field(default_factory=lambda: RolloutConfig(max_turns=4, max_new_tokens=160))

    @field_validator("log_to", mode="before")
    @classmethod
    def _split_trackers(cls, value: Any) -> Any:
        """`["tensorboard,wandb"]` and `"tensorboard"` mean what they say."""
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list):
            return [n.strip() for item in value for n in str(item).split(",") if n.strip()]
        return value

    @field_validator("base_url")
    @classmethod
    def _endpoint_is_a_url(cls, value: str | None) -> str | None:
        try:
            return check_base_url(value)
        except ModelError:
            raise ValueError("should be an http(s) URL such as http://127.0.0.1:8000/v1") from None

    @model_validator(mode="after")
    def _grpo_temperature_is_the_sampling_one(self) -> TrainConfig:
        """GRPO recomputes log-probs from logits / temperature: unless that is the temperature the
        episodes were sampled at, the ratio is against the wrong distribution."""
        if self.grpo.temperature != self.rollout.temperature:
            self.grpo = self.grpo.model_copy(update={"temperature": self.rollout.temperature})
        return self

    @model_validator(mode="after")
    def _held_out_leaves_training(self) -> TrainConfig:
        if self.val_fraction + self.test_fraction >= 0.9:
            raise ValueError(
                f"--val-fraction {self.val_fraction:g} and --test-fraction {self.test_fraction:g} leave too "
                "few tasks to train on (keep their sum below 0.9)"
            )
        return self
