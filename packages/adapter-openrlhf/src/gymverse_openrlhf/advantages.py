"""PERPO inside OpenRLHF: `RemoteExperienceMaker.compute_advantages_and_returns` builds the rollout batch's
`EpisodeBatch` (each sample's `EpisodeRecord` from its label, turn ends from the action mask; other samples are
`EpisodeRecord.single_turn`) and calls `gymverse.perpo.advantages`. How it differs from OpenRLHF's ``reinforce``:
the README's "Advantages" section."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gymverse.rollout.batch import EpisodeBatch, EpisodeRecord

from gymverse_openrlhf.config import GymVerseConfig

logger = logging.getLogger("gymverse_openrlhf")
PLAIN = "openrlhf:prompt"  # the group of samples that are not GymVerse episodes


def record_of(label: Any, reward: float, clip: Any, delta: float, mask: Any) -> EpisodeRecord:
    """A sample's record: its label's, turn rewards clipped to ``--reward.clip_range`` and OpenRLHF's length
    penalty (`delta`) on the last turn, turn ends from its action mask; else one turn of its scalar reward."""
    from gymverse.perpo import turn_ends_from_mask

    data = json.loads(label) if isinstance(label, str) and label.startswith("{") else label
    if not isinstance(data, dict) or "episode" not in data:
        return EpisodeRecord.single_turn(PLAIN, min(max(reward, clip[0]), clip[1]) if clip else reward, mask.shape[1])
    rec = EpisodeRecord.from_dict(data["episode"])
    turns = [min(max(r, clip[0]), clip[1]) if clip else r for r in rec.turn_rewards]
    turns[-1:] = [t + delta for t in turns[-1:]]
    return replace(rec, turn_rewards=tuple(turns), turn_ends=tuple(turn_ends_from_mask(mask, [len(turns)])[0]))


def episode_batch(experiences: list[Any], deltas: list[float], clip: Any = None) -> EpisodeBatch:
    """The records and action masks (padded to one width) of the experiences' samples, in order."""
    import torch

    width = max(int(e.action_mask.shape[1]) for e in experiences)
    pad = torch.nn.functional.pad
    mask = torch.cat([pad(e.action_mask.long(), (0, width - e.action_mask.shape[1])) for e in experiences])
    labels, rewards = [lb for e in experiences for lb in e.labels], torch.cat([e.rewards for e in experiences])
    rows = zip(labels, rewards.tolist(), deltas, mask.split(1))
    return EpisodeBatch.of([record_of(lb, r, clip, d, m) for lb, r, d, m in rows], mask)


def gymverse_advantages(self: Any, experiences: list[Any], cfg: GymVerseConfig) -> list[Any]:
    import torch
    from gymverse.perpo import advantages
    from openrlhf.trainer.ppo_utils.length_penalty import apply_length_penalties

    for exp in experiences:
        exp.rewards = exp.rewards.to(torch.promote_types(exp.rewards.dtype, torch.float32))
    before = torch.cat([e.rewards for e in experiences]).clone()
    apply_length_penalties(experiences, args := self.strategy.args)
    deltas = (torch.cat([e.rewards for e in experiences]) - before).tolist()
    batch = episode_batch(experiences, deltas, args.reward.clip_range)
    if not batch.trained.any():  # OpenRLHF would divide the loss by zero action tokens
        raise RuntimeError(f"GymVerse: every episode of this rollout batch failed ({sorted(set(batch.stop_reasons))})")
    scope = "batch" if cfg.norm == "batch" else "env"
    out = advantages(batch, gamma=args.algo.advantage.gamma, eps=cfg.eps, scope=scope)
    assert out.tokens is not None and out.token_returns is not None
    sizes = [len(e.labels) for e in experiences]
    for exp, adv, ret in zip(experiences, out.tokens.split(sizes), out.token_returns.split(sizes)):
        width = exp.action_mask.shape[1]
        exp.advantages, exp.returns, exp.kl = adv[:, :width].float(), ret[:, :width].float(), None
        exp.info["return"] = exp.rewards
    return experiences


def make_patched(original: Callable[..., Any], cfg: GymVerseConfig) -> Callable[..., Any]:
    """The curriculum step (with one), then PERPO or, with ``--gymverse.norm off``, OpenRLHF's own method."""

    def compute_advantages_and_returns(self: Any, experiences: list[Any], **kwargs: Any) -> list[Any]:
        import torch

        if cfg.curriculum.active:  # one curriculum step per rollout batch
            from gymverse_openrlhf.curriculum import get_service

            logger.info("GymVerse curriculum step: %s", get_service().end_step().changes)
        for exp in experiences:  # a void sample has no action token: OpenRLHF's per-sample means are 0/0
            exp.info.update({k: torch.nan_to_num(v) for k, v in exp.info.items() if k in ("kl", "logprobs_diff")})
        if cfg.norm == "off":
            return original(self, experiences, **kwargs)
        return gymverse_advantages(self, experiences, cfg)

    return compute_advantages_and_returns
