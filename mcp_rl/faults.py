"""Fault injection for the reliability suite: a named point where a test can make the process die.

    MCP_RL_FAULT=kill:<phase>:<step>   e.g. kill:optimizer:2

When the variable names this phase and step, `fault_point` sends SIGKILL to its own process: no
cleanup, no flush, exactly what a power cut or the OOM killer does to the trainer. Unset (always,
outside tests) it is one dictionary lookup. Phases, in the order a step meets them:
during-rollouts (one episode of the step has ended, the others are running), rollout (all episodes
done, nothing scored), during-training (part of the batch's gradients accumulated), optimizer (the
LoRA updated in memory only), all in train.py; checkpoint (a checkpoint half written) and commit
(checkpoint on disk, step not yet committed), in rundir.py. Evaluations have during-eval and
during-base-eval.
"""

from __future__ import annotations

import os
import signal

ENV = "MCP_RL_FAULT"


def fault_point(phase: str, step: int) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    action, _, rest = spec.partition(":")
    want_phase, _, want_step = rest.partition(":")
    if action == "kill" and want_phase == phase and want_step == str(step):
        os.kill(os.getpid(), signal.SIGKILL)
