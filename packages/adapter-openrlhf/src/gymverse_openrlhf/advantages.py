"""PERPO inside OpenRLHF: a replacement for `RemoteExperienceMaker.compute_advantages_and_returns`.

OpenRLHF carries one scalar reward per sample; the GymVerse agent returns each episode's `EpisodeRecord` in the
sample's label. This method builds the rollout batch's `EpisodeBatch` (the records, turn ends from the action
mask, so turns OpenRLHF cut at ``--data.max_len`` have no tokens; a sample that is not a GymVerse episode is
`EpisodeRecord.single_turn` with its scalar reward) and calls the one PERPO, `gymverse.perpo.advantages`: every
action token gets its turn's advantage. What differs from OpenRLHF's ``reinforce`` (the only estimator accepted
with PERPO): the baseline is per env (or over the batch) over turns, not OpenRLHF's token-weighted whitening over
the batch, which is not applied after PERPO (it would re-center every env by the batch's token mean); KL stays
out of the returns (``--algo.kl.use_loss``); ``--reward.clip_range`` clamps each turn's reward, and OpenRLHF's
length penalties land on the last turn. Void episodes (`gymverse.failures`) have no action token and no
advantage and are left out of the statistics. With ``--gymverse.norm off`` OpenRLHF's own method runs. With a
curriculum the method also closes one curriculum step per rollout batch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gymverse.rollout.batch import EpisodeBatch, EpisodeRecord

from gymverse_openrlhf.config import GymVerseConfig

logger = logging.getLogger("gymverse_openrlhf")
#: The group of samples that are not GymVerse episodes (plain prompts).
PLAIN = "openrlhf:prompt"


def record_of(label: Any) -> EpisodeRecord | None:
    """The episode record the GymVerse agent put in a sample's label (None: not a GymVerse episode)."""
    try:
        data = json.loads(label) if isinstance(label, str) else label
    except json.JSONDecodeError:
        return None
    episode = data.get("episode") if isinstance(data, dict) else None
    return None if episode is None else EpisodeRecord.from_dict(episode)


def episode_batch(experiences: list[Any], deltas: list[float], clip: Any = None) -> EpisodeBatch:
    """The rollout batch's records and action masks (padded to one width), in the experiences' order."""
    import torch
    from gymverse.perpo import turn_ends_from_mask

    width = max(int(e.action_mask.shape[1]) for e in experiences)
    mask = torch.cat([torch.nn.functional.pad(e.action_mask.long(), (0, width - e.action_mask.shape[1])) for e in experiences])
    rewards = [float(r) for e in experiences for r in e.rewards.tolist()]
    records = []
    for row, (label, reward, delta) in enumerate(zip([lb for e in experiences for lb in e.labels], rewards, deltas)):
        rec = record_of(label)
        if rec is None:
            records.append(EpisodeRecord.single_turn(PLAIN, _clip(reward, clip), width))
            continue
        turns = [_clip(r, clip) for r in rec.turn_rewards]
        if turns:
            turns[-1] += delta  # OpenRLHF's length penalties changed the scalar reward by `delta`
        ends = turn_ends_from_mask(mask[row : row + 1], [len(turns)])[0]
        records.append(replace(rec, turn_rewards=tuple(turns), turn_ends=tuple(ends)))
    return EpisodeBatch.of(records, mask)


def _clip(value: float, clip: Any) -> float:
    return min(max(value, clip[0]), clip[1]) if clip else value


def gymverse_advantages(self: Any, experiences: list[Any], cfg: GymVerseConfig) -> list[Any]:
    """`compute_advantages_and_returns` with GymVerse's PERPO (see the module docstring)."""
    import torch
    from gymverse.perpo import advantages
    from openrlhf.trainer.ppo_utils.length_penalty import apply_length_penalties

    args = self.strategy.args
    for exp in experiences:
        exp.rewards = exp.rewards.to(torch.promote_types(exp.rewards.dtype, torch.float32))
    before = torch.cat([e.rewards for e in experiences]).clone()
    apply_length_penalties(experiences, args)
    deltas = (torch.cat([e.rewards for e in experiences]) - before).tolist()
    batch = episode_batch(experiences, deltas, args.reward.clip_range)
    if not batch.trained.any():  # OpenRLHF would divide the loss by zero action tokens
        reasons = sorted(set(batch.stop_reasons))
        raise RuntimeError(f"GymVerse: every episode of this rollout batch failed ({reasons}); see the rollout log")
    scope = "batch" if cfg.norm == "batch" else "env"
    out = advantages(batch, gamma=args.algo.advantage.gamma, eps=cfg.eps, scope=scope)
    assert out.tokens is not None and out.token_returns is not None
    sizes = [len(e.labels) for e in experiences]
    for exp, adv, ret in zip(experiences, out.tokens.split(sizes), out.token_returns.split(sizes)):
        width = exp.action_mask.shape[1]
        exp.advantages, exp.returns = adv[:, :width].float(), ret[:, :width].float()
        exp.info["return"] = exp.rewards
        exp.kl = None
    return experiences


def close_curriculum_step() -> dict[str, Any]:
    """Close one curriculum step (once per rollout batch); returns the step's report as a dict."""
    from dataclasses import asdict

    from gymverse_openrlhf.curriculum import get_service

    report = get_service().end_step()
    for c in report.changes:
        logger.info("GymVerse complexity %s: %s -> %s (%s)", c["env_id"], c["old_level"], c["new_level"], c["reason"])
    return asdict(report)


def make_patched(original: Callable[..., Any], cfg: GymVerseConfig) -> Callable[..., Any]:
    """The replacement method: the curriculum step, then PERPO (or OpenRLHF's own with ``--gymverse.norm off``)."""

    def compute_advantages_and_returns(self: Any, experiences: list[Any], **kwargs: Any) -> list[Any]:
        import torch

        if cfg.curriculum.active:
            close_curriculum_step()
        for exp in experiences:  # a void sample has no action token: OpenRLHF's per-sample means are 0/0
            for key in ("kl", "logprobs_diff"):
                if isinstance(exp.info.get(key), torch.Tensor):
                    exp.info[key] = torch.nan_to_num(exp.info[key], nan=0.0)
        if cfg.norm == "off":
            return original(self, experiences, **kwargs)
        with torch.no_grad():
            return gymverse_advantages(self, experiences, cfg)

    return compute_advantages_and_returns
