"""OpenRLHF's own multi-turn route to an env, the baseline of ``bench_openrlhf.py`` (an ``--train.agent_func_path``).

Written the way OpenRLHF's agent examples are: an ``AgentInstanceBase`` per sample, driven by OpenRLHF's
``MultiTurnAgentExecutor``; ``reset`` builds the env named by the label (the same GymVerse env class, called
directly: no session pool, no thread, no timeout), ``step`` sends it the action text and returns the observation
as a ChatML user turn. The episode ends when the env does or after ``GYMVERSE_BENCH_HORIZON`` steps (default 8).
"""

from __future__ import annotations

import json
import os
from typing import Any

import gymverse
import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

HORIZON = int(os.environ.get("GYMVERSE_BENCH_HORIZON", "8"))


class AgentInstance(AgentInstanceBase):
    """One env per sample."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.env: Any = None
        self.turns = 0

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        """Build and reset the label's env; the dataset prompt already holds its first observation."""
        label = json.loads(states["label"])
        self.env = gymverse.make(label["env_id"], complexity=label.get("complexity") or 1)
        self.env.reset(seed=label["seed"])
        return {"observation": states["observation"]}

    async def step(self, states: dict, **kwargs: Any) -> dict:
        """One env step on the action text; the observation comes back as the next user turn."""
        obs, reward, terminated, truncated, info = self.env.step(states["action_text"])
        self.turns += 1
        done = bool(terminated or truncated) or self.turns >= HORIZON
        return {
            "rewards": torch.tensor(float(reward)),
            "scores": torch.tensor(float(info.get("success") is True)),
            "environment_feedback": f"\n<|im_start|>user\n{obs}<|im_end|>\n<|im_start|>assistant\n",
            "done": done,
            "extra_logs": {},
        }


class AgentExecutor(MultiTurnAgentExecutor):
    """What OpenRLHF's ``_load_agent_executor`` instantiates."""

    def __init__(self) -> None:
        super().__init__(AgentInstance)
