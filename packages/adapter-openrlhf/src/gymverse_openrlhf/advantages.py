"""PERPO inside OpenRLHF: a replacement for `RemoteExperienceMaker.compute_advantages_and_returns`.

OpenRLHF hard-codes its baselines there (per-prompt groups via ``reshape(-1, n_samples_per_prompt)``) and carries
one scalar reward per sample. With ``--gymverse.norm env`` the critic-free estimators get GymVerse's one PERPO,
`gymverse.perpo.perpo_token_advantages`: every turn of every episode is a transition with the per-turn return
``G_t = r_t + gamma G_{t+1}``, normalized per env over the whole rollout batch, and each action token gets its
turn's advantage. The turn rewards come from the label the GymVerse agent returns (``turn_rewards``; OpenRLHF's
length penalties, which change the scalar reward, are added to the last turn); the turns are the runs of the
action mask. A sample without turn rewards (not from the GymVerse agent) is one transition with its scalar reward
over all its action tokens, so on single-turn data (or with ``gamma = 1`` and one turn) this is exactly
OpenRLHF's scalar path with the env-normalized reward. The KL penalty (``compute_reward`` with a zero reward)
is added as OpenRLHF's cumulative return; ``--reward.clip_range`` clamps the PERPO advantage, as it clamps the
normalized reward there. ``batch`` uses one group for the whole batch (ReBN). With ``gae`` (a critic) the
episode reward is normalized per env (`gymverse.perpo.env_normalize`) before OpenRLHF's GAE and whitening. With
``--gymverse.norm off`` the original method runs untouched. With ``--gymverse.evolve`` the method also closes one
curriculum step per rollout batch (the agents recorded each episode as it finished, before dynamic filtering).
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


def _turns(labels: Sequence[EnvLabel], rewards: list[float], mask: Any) -> tuple[list[list[float]], list[list[int]]]:
    """Per sample, its turn rewards and turn ends (see the module docstring)."""
    import torch

    m = (mask != 0).long()
    width = int(m.shape[1])
    # a turn ends where a run of action tokens does (the next token is not an action, or the row ends)
    nxt = torch.nn.functional.pad(m[:, 1:], (0, 1))
    rows, cols = torch.nonzero((m == 1) & (nxt == 0), as_tuple=True)
    counts = torch.bincount(rows, minlength=int(m.shape[0])).tolist()
    all_ends = (cols + 1).tolist()
    turn_rewards, turn_ends, pos = [], [], 0
    for j, lab in enumerate(labels):
        ends, pos = all_ends[pos : pos + counts[j]], pos + counts[j]
        if lab.turn_rewards is None:  # not a GymVerse agent sample: one transition, the scalar reward
            turn_rewards.append([rewards[j]])
            turn_ends.append([width])
            continue
        tr = list(lab.turn_rewards) or [0.0]
        tr[-1] += rewards[j] - sum(lab.turn_rewards)  # OpenRLHF's length penalties land on the last turn
        turn_rewards.append(tr)
        turn_ends.append(ends + [width + 1 + k for k in range(len(tr) - len(ends))])  # cut turns: no tokens
    return turn_rewards, turn_ends


def perpo_advantages(experiences: list[Any], cfg: GymVerseConfig, gamma: float) -> list[Any]:
    """Per experience, the PERPO token advantages ``[b, A]`` of its samples (one batch-wide normalization)."""
    import torch
    from gymverse.perpo import perpo_token_advantages

    width = max(int(e.action_mask.shape[1]) for e in experiences)
    masks, rewards, ends, groups = [], [], [], []
    for exp in experiences:
        labels = [EnvLabel.parse(label) for label in exp.labels]
        tr, te = _turns(labels, [float(r) for r in exp.rewards.tolist()], exp.action_mask)
        rewards += tr
        ends += te
        groups += [lab.env_id if cfg.norm == "env" else "batch" for lab in labels]
        masks.append(torch.nn.functional.pad(exp.action_mask.long().cpu(), (0, width - exp.action_mask.shape[1])))
    out = perpo_token_advantages(torch.cat(masks), groups, rewards, turn_ends=ends, gamma=gamma, eps=cfg.eps)
    sizes = [len(e.labels) for e in experiences]
    return [a[:, : e.action_mask.shape[1]] for a, e in zip(out.advantages.split(sizes), experiences)]


def normalized_rewards(rewards: Any, env_ids: Sequence[str], cfg: GymVerseConfig) -> Any:
    """Episode rewards normalized per env (or over the batch), the baseline GAE gets."""
    from gymverse.perpo import batch_normalize, env_normalize

    if cfg.norm == "env":
        return env_normalize(rewards, list(env_ids), eps=cfg.eps)
    return batch_normalize(rewards, eps=cfg.eps)


def gymverse_advantages(self: Any, experiences: list[Any], cfg: GymVerseConfig) -> list[Any]:
    """`compute_advantages_and_returns` with GymVerse's PERPO (see the module docstring)."""
    import torch
    from openrlhf.models.utils import compute_reward
    from openrlhf.trainer.ppo_utils.length_penalty import apply_length_penalties

    args = self.strategy.args
    gamma = args.algo.advantage.gamma
    for exp in experiences:
        exp.rewards = exp.rewards.to(torch.promote_types(exp.rewards.dtype, torch.float32))
    apply_length_penalties(experiences, args)
    if self.advantage_estimator not in (*CRITIC_FREE, "gae"):
        raise ValueError(f"GymVerse: unsupported advantage estimator {self.advantage_estimator!r}")

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

    if self.advantage_estimator == "gae":
        shaped = normalized_rewards(raw, env_ids_of(experiences), cfg).split(exp_len)
        for exp, reward in zip(experiences, shaped):
            reward = compute_reward(
                reward, self.kl_ctl.value, exp.kl, action_mask=exp.action_mask, reward_clip_range=args.reward.clip_range
            )
            exp.advantages, exp.returns = self.get_advantages_and_returns(
                exp.values, reward, exp.action_mask, gamma, args.algo.advantage.lambd
            )
            exp.info["return"] = reward.sum(dim=-1)
            exp.kl = None
        _whiten(experiences, args)
        return experiences

    clip = args.reward.clip_range
    for exp, adv in zip(experiences, perpo_advantages(experiences, cfg, gamma)):
        mask = exp.action_mask
        kl_return = _kl_return(self, exp, gamma)
        adv = adv.to(kl_return.dtype)
        exp.returns = (adv.clamp(clip[0], clip[1]) if clip else adv) * mask + kl_return
        exp.advantages = exp.returns.clone()
        first = mask.float().argmax(dim=1, keepdim=True)
        exp.info["return"] = exp.returns.gather(1, first).squeeze(1)
        exp.kl = None
    return experiences


def _kl_return(maker: Any, exp: Any, gamma: float) -> Any:
    """OpenRLHF's cumulative return of the KL penalty alone (``compute_reward`` of a zero reward).

    Without a KL coefficient it is zero; with ``gamma = 1`` it is a reversed cumulative sum (OpenRLHF's per-token
    Python loop's sums, to float rounding: ~100x faster on long responses); otherwise OpenRLHF's own loop runs.
    """
    import torch
    from openrlhf.models.utils import compute_reward

    mask = exp.action_mask
    if maker.kl_ctl.value <= 0.0 or exp.kl is None:
        return torch.zeros(mask.shape, dtype=torch.float32 if exp.kl is None else exp.kl.dtype, device=mask.device)
    kl_reward = compute_reward(torch.zeros(mask.shape[0]), maker.kl_ctl.value, exp.kl, action_mask=mask)
    if gamma != 1.0:
        return maker.get_cumulative_returns(kl_reward, mask, gamma)
    return (mask * kl_reward).flip(1).cumsum(1).flip(1)


def _whiten(experiences: list[Any], args: Any) -> None:
    """OpenRLHF's whitening of GAE advantages over all action tokens of the batch."""
    import torch

    adv = torch.cat([e.advantages.flatten() for e in experiences]).float()
    mask = torch.cat([e.action_mask.flatten() for e in experiences])
    count = mask.sum()
    mean = (adv * mask).sum() / count
    rstd: Any = 1
    if not args.algo.advantage.no_std_norm:
        rstd = (((adv - mean).pow(2) * mask).sum() / count).clamp(min=1e-8).rsqrt()
    for e in experiences:
        e.advantages = (e.advantages - mean) * rstd


def close_curriculum_step() -> dict[str, Any]:
    """Close one curriculum step (once per rollout batch); returns the step's report as a dict."""
    from dataclasses import asdict

    from gymverse_openrlhf.curriculum import get_service

    report = get_service().end_step()
    for c in report.changes:
        logger.info("GymVerse complexity %s: %s -> %s (%s)", c["env_id"], c["old_level"], c["new_level"], c["reason"])
    return asdict(report)


def make_patched(original: Callable[..., Any], cfg: GymVerseConfig) -> Callable[..., Any]:
    """The replacement method: GymVerse's PERPO (or the original when norm is off), then the curriculum step."""

    def compute_advantages_and_returns(self: Any, experiences: list[Any], **kwargs: Any) -> list[Any]:
        import torch

        if cfg.evolve:
            close_curriculum_step()
        if cfg.norm == "off":
            return original(self, experiences, **kwargs)
        with torch.no_grad():
            return gymverse_advantages(self, experiences, cfg)

    compute_advantages_and_returns.__wrapped__ = original  # type: ignore[attr-defined]
    compute_advantages_and_returns.__doc__ = f"GymVerse ({cfg.norm}) version of OpenRLHF's method."
    return compute_advantages_and_returns
