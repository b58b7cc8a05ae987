"""Does it learn? The whole loop (live example server, real episodes, checks-based reward, GRPO on a
LoRA) must raise the reward on a narrow task within a minute or two on a CPU, and must NOT when the
gradient is wrong (sign flipped, mask off by one).

The policy is the tiny random model, first taught by a few supervised steps to answer the task in
one of three ways with roughly equal probability: the right tool call, a call to a tool that does not
exist, or a plain non-answer. The three completions share a prefix and part at one token, so only a
correct policy gradient at the right positions can move the choice towards the right call.
"""

from __future__ import annotations

import anyio
import pytest
import torch

from conftest import INVENTORY
from judges.reward import RewardConfig, RewardWeights
from mcp_rl import grpo
from mcp_rl.grpo import GRPOConfig
from mcp_rl.models import load_model
from mcp_rl.rollout import RolloutConfig, SessionPool, run_tasks
from mcp_rl.rundir import RunDir
from mcp_rl.servers import ServerSpec, ToolPolicy
from mcp_rl.task import Task
from mcp_rl.train import Trainer
from mcp_rl.train_config import TrainConfig
from scenario_gen.io import save_tasks

TASK = "List the shop's product categories."
RIGHT = '{"name": "list_categories", "arguments": {}}'
WRONG_TOOL = '{"name": "list_category", "arguments": {}}'
NO_CALL = "I cannot tell."
POLICY = ToolPolicy(allow=["list_categories", "get_item"])
ROLLOUT = RolloutConfig(max_turns=1, max_new_tokens=24, temperature=1.0)


def _prompt_ids(model, spec: ServerSpec) -> list[int]:
    """The exact prompt the trainer will sample from, taken from a real episode."""

    async def one():
        async with SessionPool(spec, POLICY, size=1) as pool:
            groups = await run_tasks(model, pool, [Task(id="probe", text=TASK)], 1, ROLLOUT)
        return groups[0][0]

    t = anyio.run(one)
    first = t.sampled_mask.index(1)
    return t.token_ids[:first]


def _warm_start(model, prompt: list[int]) -> None:
    """Supervised steps on the three completions equally, so each is sampled about a third of the time."""
    net = model.model
    targets = [[*model.encode(c), model.eos_token_id] for c in (RIGHT, WRONG_TOOL, NO_CALL)]
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    torch.manual_seed(0)
    net.train()
    for _ in range(150):
        opt.zero_grad()
        loss = 0.0
        for tgt in targets:
            ids = torch.tensor([prompt + tgt])
            logits = net(input_ids=ids).logits[0, len(prompt) - 1 : -1]
            loss = loss + torch.nn.functional.cross_entropy(logits.float(), ids[0, len(prompt) :])
        loss.backward()
        opt.step()
    net.eval()
    model.refresh()


def _train(tmp_path, monkeypatch_fn=None) -> list[float]:
    spec = ServerSpec.parse(INVENTORY)
    policy = load_model("tiny", seed=3)
    _warm_start(policy, _prompt_ids(policy, spec))
    tasks = [
        Task(id="train-1", text=TASK, tools_expected=["list_categories"], split="train"),
        Task(id="val-1", text=TASK, tools_expected=["list_categories"], split="val"),
        Task(id="test-1", text=TASK, tools_expected=["list_categories"], split="test"),
    ]
    save_tasks(tasks, tmp_path / "tasks.jsonl")
    # Reward: did the episode use the expected tool (a valid call to list_categories)? Nothing else.
    only_tool = RewardWeights(
        ruler=0,
        answer_correct=0,
        expected_tools_used=1,
        schema_valid_rate=0,
        no_error_rate=0,
        parse_rate=0,
        answered=0,
        answer_faithful=0,
        arguments_faithful=0,
        distinct_calls=0,
    )
    cfg = TrainConfig(
        model="tiny",
        server=spec.public(),
        policy=POLICY,
        tasks_file=str(tmp_path / "tasks.jsonl"),
        judge="none",
        reward=RewardConfig(weights=only_tool, no_answer_factor=1.0, wrong_answer_cap=None),
        group_size=8,
        tasks_per_step=1,
        max_steps=8,
        eval_every=4,
        eval_samples=8,
        eval_temperature=1.0,
        patience=10,
        grpo=GRPOConfig(learning_rate=5e-3, micro_batch=8),
        rollout=ROLLOUT,
    )
    run = RunDir(tmp_path / "run")
    run.create(cfg.model_dump(mode="json"))
    anyio.run(Trainer(cfg, spec, run, say=print, policy=policy).fit)
    return [m["reward_mean"] for m in run.read_metrics() if m["kind"] == "step"]


def _rise(rewards: list[float]) -> float:
    return sum(rewards[-3:]) / 3 - sum(rewards[:2]) / 2


@pytest.mark.slow
def test_reward_rises(tmp_path):
    rewards = _train(tmp_path)
    print("rewards per step:", [round(r, 3) for r in rewards])
    assert 0.05 < sum(rewards[:2]) / 2 < 0.7, "the warm start should leave room to learn"
    assert _rise(rewards) > 0.25
    assert sum(rewards[-3:]) / 3 > 0.6


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["sign_flipped", "mask_off_by_one"])
def test_a_wrong_gradient_does_not_learn(tmp_path, monkeypatch, fault):
    """Negative controls: the learning test above would catch these bugs."""
    if fault == "sign_flipped":
        real_loss = grpo.grpo_loss

        def flipped(*args, **kwargs):
            loss, stats = real_loss(*args, **kwargs)
            return -loss, stats

        monkeypatch.setattr(grpo, "grpo_loss", flipped)
    else:

        def shifted(model, input_ids, attn, mask, cfg, prefix=None):
            # the classic bug: token t scored with the hidden state AT t instead of at t-1
            # (the whole sequence is run, shared opening or not: same hidden states, shifted use)
            body, head = grpo._decoder_and_head(model)
            hidden = body(input_ids=input_ids, attention_mask=attn).last_hidden_state
            target_mask = mask[:, 1:].bool()
            logits = head(hidden[:, 1:][target_mask]).float() / cfg.temperature
            targets = input_ids[:, 1:][target_mask]
            return torch.log_softmax(logits, -1).gather(-1, targets[:, None]).squeeze(-1)

        monkeypatch.setattr(grpo, "sampled_logprobs", shifted)
    rewards = _train(tmp_path)
    print(fault, "rewards per step:", [round(r, 3) for r in rewards])
    assert _rise(rewards) < 0.15
