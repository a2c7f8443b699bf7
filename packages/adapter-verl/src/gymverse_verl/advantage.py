"""PERPO as a verl advantage estimator (``algorithm.adv_estimator=gymverse_perpo``).

verl's estimators see rewards, the response mask and the prompt uid only, so the GymVerse trainer reads each
row's `EpisodeRecord` from the TransferQueue (`Rows.read`) and exposes it (`episode_rows`) while verl's own
``compute_advantage`` runs; the estimator builds the `EpisodeBatch` of those records and verl's ``[B, T]``
response mask (`episode_batch`) and returns `gymverse.perpo.advantages` per token. A row that is not a GymVerse
episode is `EpisodeRecord.single_turn` (its summed token reward over its response, grouped by prompt uid).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymverse.perpo import DEFAULT_EPS, advantages
from gymverse.rollout import EpisodeBatch, EpisodeRecord
from verl.trainer.ppo.core_algos import register_adv_est

from gymverse_verl import ADV_ESTIMATOR, EXTRA_KEY, TRAINER_MODE


@dataclass(frozen=True)
class Rows:
    """The GymVerse side of a verl batch: per row its prompt uid and its episode record (None: not an episode)."""

    uids: list[str]
    records: list[EpisodeRecord | None]
    eps: float = DEFAULT_EPS

    @classmethod
    def read(cls, uids: Any, extra_fields: Any, eps: float = DEFAULT_EPS) -> Rows:
        """From the ``uid`` and ``extra_fields`` columns verl stores for each trajectory (lists or tensordict's)."""
        uids, extra_fields = (list(c.tolist() if hasattr(c, "tolist") else c) for c in (uids, extra_fields))
        ours = [isinstance(e, Mapping) and EXTRA_KEY in e for e in extra_fields]
        records = [EpisodeRecord.from_dict(e[EXTRA_KEY]) if ok else None for e, ok in zip(extra_fields, ours)]
        return cls([str(u) for u in uids], records, eps)


_CURRENT: ContextVar[Rows | None] = ContextVar("gymverse_rows", default=None)


@contextmanager
def episode_rows(rows: Rows) -> Iterator[Rows]:
    """Make `rows` visible to the ``gymverse_perpo`` estimator for the duration of the block."""
    token = _CURRENT.set(rows)
    try:
        yield rows
    finally:
        _CURRENT.reset(token)


def episode_batch(rows: Rows, token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> EpisodeBatch:
    """The `EpisodeBatch` of a verl batch: its records (single-turn rows for non-GymVerse rows) and its mask."""
    bsz, width = int(response_mask.shape[0]), int(response_mask.shape[-1])
    if len(rows.records) != bsz:
        raise ValueError(f"verl batch has {bsz} rows but the GymVerse trainer read {len(rows.records)}")
    sums = token_level_rewards.detach().sum(-1).cpu().tolist()
    records = [
        rec if rec is not None else EpisodeRecord.single_turn(f"uid:{uid}", float(sums[b]), width)
        for b, (uid, rec) in enumerate(zip(rows.uids, rows.records, strict=True))
    ]
    return EpisodeBatch.of(records, response_mask.detach().cpu())


@register_adv_est(ADV_ESTIMATOR)
def compute_gymverse_perpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator entry point: `gymverse.perpo.advantages` of the current `episode_rows`."""
    rows = _CURRENT.get()
    if rows is None:
        raise RuntimeError(
            f"algorithm.adv_estimator={ADV_ESTIMATOR} needs the episode record of every row; run the GymVerse "
            f"trainer (trainer.v1.trainer_mode={TRAINER_MODE}) so it can supply them"
        )
    if index is not None and [str(u) for u in index] != rows.uids:
        raise RuntimeError("gymverse_perpo: rows passed by verl do not match the episode rows (uid mismatch)")
    gamma = float(config.get("gamma", 1.0)) if config is not None else 1.0
    with torch.no_grad():
        out = advantages(episode_batch(rows, token_level_rewards, response_mask), gamma=gamma, eps=rows.eps)
    assert out.tokens is not None and out.token_returns is not None
    dtype, device = token_level_rewards.dtype, token_level_rewards.device
    return torch.as_tensor(out.tokens).to(device, dtype), torch.as_tensor(out.token_returns).to(device, dtype)
