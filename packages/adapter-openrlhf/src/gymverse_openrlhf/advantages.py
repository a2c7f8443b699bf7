"""PERPO advantages inside OpenRLHF: a replacement for `RemoteExperienceMaker.compute_advantages_and_returns`.

OpenRLHF hard-codes its baselines there (per-prompt groups via ``reshape(-1, n_samples_per_prompt)``). With
``--gymverse.norm env`` the replacement keeps every other step of OpenRLHF's method (fp32 rewards, length
penalties, ``group_reward_std`` logging, KL shaping and clipping via `compute_reward`, GAE or cumulative returns)
and swaps the baseline for PERPO's environment-level normalization::

    A_i = (R_i - mean_e) / (std_e + eps)      over the samples i of env e in the whole rollout batch

computed by `gymverse.perpo.env_normalize` (``batch``: `gymverse.perpo.batch_normalize`, ReBN). ``R_i`` is the
episode's total reward (OpenRLHF reports one scalar per sample; multi-turn rewards are summed by its executor).
Critic-free estimators get no extra global whitening (the env statistics already normalize); GAE keeps it. With
``--gymverse.norm off`` the original method runs untouched. With ``--gymverse.evolve`` the batch's success per
env (``extra_logs``) is reported to the curriculum actor.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from gymverse_openrlhf.config import GymVerseConfig
from gymverse_openrlhf.labels import EnvLabel

logger = logging.getLogger("gymverse_openrlhf")

CRITIC_FREE = ("reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo", "flash_reinforce")


def env_ids_of(experiences: Sequence[Any]) -> list[str]:
    """Env id of every sample, in the experiences' order, read from their labels."""
    return [EnvLabel.parse(label).env_id for exp in experiences for label in exp.labels]


def success_by_env(experiences: Sequence[Any]) -> dict[str, list[bool]]:
    """Success flags per env from ``extra_logs`` (episodes that ended with an env error are left out)."""
    out: dict[str, list[bool]] = {}
    for exp in experiences:
        success = exp.info.get("gymverse_success")
        if success is None:
            continue
        errors = exp.info.get("gymverse_error")
        for j, label in enumerate(exp.labels):
            if errors is not None and float(errors[j]) > 0:
                continue
            out.setdefault(EnvLabel.parse(label).env_id, []).append(bool(float(success[j]) > 0.5))
    return out


def normalized_rewards(rewards: Any, env_ids: Sequence[str], cfg: GymVerseConfig) -> Any:
    """The GymVerse baseline on a flat reward tensor (same order as `env_ids`)."""
    from gymverse.perpo import batch_normalize, env_normalize

    if cfg.norm == "env":
        return env_normalize(rewards, list(env_ids), eps=cfg.eps)
    if cfg.norm == "batch":
        return batch_normalize(rewards, eps=cfg.eps)
    raise ValueError(f"no GymVerse normalization for norm={cfg.norm!r}")


def gymverse_advantages(self: Any, experiences: list[Any], cfg: GymVerseConfig) -> list[Any]:
    """`compute_advantages_and_returns` with the GymVerse baseline (see the module docstring)."""
    import torch
    from openrlhf.models.utils import compute_reward
    from openrlhf.trainer.ppo_utils.length_penalty import apply_length_penalties

    args = self.strategy.args
    for exp in experiences:
        exp.rewards = exp.rewards.to(torch.promote_types(exp.rewards.dtype, torch.float32))
    apply_length_penalties(experiences, args)

    exp_len = [len(exp.index) for exp in experiences]
    indices = torch.tensor(list(itertools.chain.from_iterable(exp.index for exp in experiences)))
    raw = torch.cat([exp.rewards for exp in experiences], dim=0)
    n = args.rollout.n_samples_per_prompt
    if n > 1 and raw.numel() % n == 0:  # the per-prompt spread OpenRLHF logs, kept for comparable dashboards
        ordered = torch.empty_like(raw)
        ordered[indices] = raw
        stds = ordered.reshape(-1, n).std(-1, keepdim=True).repeat(1, n).reshape(-1)[indices].split(exp_len)
        for exp, std in zip(experiences, stds):
            exp.info["group_reward_std"] = std

    # experiences keep their own order here; env ids are read from the same order, so no reindexing is needed
    shaped = normalized_rewards(raw, env_ids_of(experiences), cfg).split(exp_len)

    for exp, reward in zip(experiences, shaped):
        reward = compute_reward(
            reward, self.kl_ctl.value, exp.kl, action_mask=exp.action_mask, reward_clip_range=args.reward.clip_range
        )
        if self.advantage_estimator == "gae":
            exp.advantages, exp.returns = self.get_advantages_and_returns(
                exp.values, reward, exp.action_mask, args.algo.advantage.gamma, args.algo.advantage.lambd
            )
        elif self.advantage_estimator in CRITIC_FREE:
            exp.returns = self.get_cumulative_returns(reward, exp.action_mask, args.algo.advantage.gamma)
            exp.advantages = exp.returns.clone()
        else:
            raise ValueError(f"GymVerse: unsupported advantage estimator {self.advantage_estimator!r}")
        exp.info["return"] = reward.sum(dim=-1)
        exp.kl = None

    if self.advantage_estimator == "gae":  # whiten GAE advantages as OpenRLHF does
        adv = torch.cat([e.advantages.flatten() for e in experiences]).float()
        mask = torch.cat([e.action_mask.flatten() for e in experiences])
        count = mask.sum()
        mean = (adv * mask).sum() / count
        rstd: Any = 1
        if not args.algo.advantage.no_std_norm:
            rstd = (((adv - mean).pow(2) * mask).sum() / count).clamp(min=1e-8).rsqrt()
        for e in experiences:
            e.advantages = (e.advantages - mean) * rstd
    return experiences


def report_success(experiences: Sequence[Any]) -> list[dict[str, Any]]:
    """Send the batch's success per env to the curriculum actor; returns the level changes."""
    import ray

    from gymverse_openrlhf.curriculum import get_actor

    per_env = success_by_env(experiences)
    if not per_env:
        return []
    changes: list[dict[str, Any]] = ray.get(get_actor().update.remote(per_env))
    for c in changes:
        logger.info("GymVerse complexity %s: %s -> %s (%s)", c["env_id"], c["old_level"], c["new_level"], c["reason"])
    return changes


def make_patched(original: Callable[..., Any], cfg: GymVerseConfig) -> Callable[..., Any]:
    """The replacement method: GymVerse baseline (or the original when norm is off), then curriculum reporting."""

    def compute_advantages_and_returns(self: Any, experiences: list[Any], **kwargs: Any) -> list[Any]:
        import torch

        if cfg.evolve:
            report_success(experiences)
        if cfg.norm == "off":
            return original(self, experiences, **kwargs)
        with torch.no_grad():
            return gymverse_advantages(self, experiences, cfg)

    compute_advantages_and_returns.__wrapped__ = original  # type: ignore[attr-defined]
    compute_advantages_and_returns.__doc__ = f"GymVerse ({cfg.norm}) version of OpenRLHF's method."
    return compute_advantages_and_returns
