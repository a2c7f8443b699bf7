"""`GymVerseArgs`: oat's `PPOArgs` plus the reference recipe's env, return and curriculum flags.

Curriculum flags are the core's `CurriculumOptions` knobs, one name each (``--evolve --initial_level --promote_at
--demote_at --patience --max_turns --horizon --horizon_interval --eval_level --eval_max_turns``); the reference's
``--evolve --gamma --norm_return`` keep their meaning. Every learner and actor builds the same `CurriculumState`
from `curriculum_config` (learners record and close steps; actors start episodes from their replica, which the
learner pushes after each step; the state rides in oat's DeepSpeed checkpoint as ``client_state``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gymverse.curriculum.options import KNOBS, CurriculumOptions
from oat.algorithms.ppo import PPOArgs

CLIENT_STATE_KEY = "gymverse_curriculum"


@dataclass
class GymVerseArgs(PPOArgs):
    """Flags of the reference `train_oat_perpo.py` (``--env_id "a|b" --evolve --gamma --norm_return``) and more."""

    # Environments: GymVerse ids joined by "|" (e.g. "game:GuessTheNumber|logic:Nonogram").
    env_id: str = "game:GuessTheNumber"
    # Parallel episodes per actor (sessions stepped concurrently, generations batched into one vLLM call).
    num_env: int = 1
    # How envs fill a batch: one env per batch in round robin (the reference), or mixed batches.
    env_mix: Literal["one_env", "round_robin", "weighted"] = "one_env"
    # Weights for env_mix="weighted", joined by "|" in env_id order.
    env_weights: str = ""
    # Discount of the per-turn return G_t = r_t + gamma * G_{t+1} (the reference's --gamma).
    gamma: float = 1.0
    # PERPO return normalization (the reference's --norm_return); off: the advantage is G_t.
    norm_return: bool = False
    # Normalization groups: per env id with exact cross-rank statistics ("env"), or the whole batch ("batch").
    norm_scope: Literal["env", "batch"] = "env"
    # Curriculum (the core's `CurriculumOptions`): complexity evolution, turn caps, validation level.
    evolve: bool = False
    initial_level: int = 1
    promote_at: float = 0.8
    demote_at: float = 0.1
    patience: int = 3
    max_turns: int | None = None
    horizon: str = ""
    horizon_interval: int = 100
    eval_level: int | None = None
    eval_max_turns: int | None = None
    # A system prompt for every episode (the chat template renders it).
    system_prompt: str = ""
    # Reference defaults for an env-driven run: no KL, no oracle, no prompt dataset.
    beta: float = 0.0
    oracle: str = ""
    prompt_data: str = ""
    algo: str = "PPO"

    def env_ids(self) -> list[str]:
        """The configured env ids, in order."""
        ids = [e.strip() for e in self.env_id.split("|") if e.strip()]
        if not ids:
            raise ValueError("--env_id names no environment (use 'family:Name' ids joined by '|')")
        if len(set(ids)) != len(ids):
            raise ValueError(f"--env_id lists an environment twice: {self.env_id!r}")
        return ids

    def curriculum_config(self) -> dict[str, Any]:
        """`CurriculumState.from_config` input: the core options plus the env mixer of ``--env_mix``."""
        weights = [float(x) for x in self.env_weights.split("|")] if self.env_weights else None
        if weights is not None and len(weights) != len(self.env_ids()):
            raise ValueError(f"--env_weights has {len(weights)} entries for {len(self.env_ids())} environments")
        if self.env_mix == "weighted" and weights is None:
            raise ValueError("--env_mix weighted needs --env_weights (one weight per --env_id entry, joined by '|')")
        mode = "weighted" if self.env_mix == "weighted" else "round_robin"
        options = CurriculumOptions.from_dict({k: getattr(self, k) for k in KNOBS}, prefix="--")
        return options.to_config(mixer={"env_ids": self.env_ids(), "mode": mode, "weights": weights, "seed": self.seed})
