"""PERPO advantages as a verl advantage estimator (``algorithm.adv_estimator=gymverse_perpo``).

verl's estimators see rewards, the response mask and the prompt uid only. The GymVerse trainer
(`gymverse_verl.trainer`) therefore reads each row's env id and per-turn rewards and exposes them with
`episode_batch` while verl's own ``compute_advantage`` runs; the registered estimator picks them up.

Math (all from `gymverse.perpo`): per-turn discounted returns ``G_t`` (``algorithm.gamma``), normalized per
environment over every turn of that env in the batch, ``(G - mean_e) / (std_e + eps)``, and placed on the tokens
of the model reply that produced the turn (turn k = the k-th run of 1s in ``response_mask``). A row without
per-turn rewards counts as one transition whose return is its summed token reward, spread over all its replies.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymverse.perpo import DEFAULT_EPS, discounted_returns, env_normalize, place_turn_advantages, turn_ids_from_mask
from verl.trainer.ppo.core_algos import register_adv_est

from gymverse_verl import ADV_ESTIMATOR, TRAINER_MODE


@dataclass(frozen=True)
class EpisodeBatch:
    """Per-row GymVerse data aligned with the rows verl passes to the estimator."""

    env_ids: Sequence[str]
    turn_rewards: Sequence[Sequence[float] | None]
    uids: Sequence[Any] | None = None  # when given, checked against verl's ``index`` to catch misalignment
    eps: float = DEFAULT_EPS

    def __post_init__(self) -> None:
        if len(self.env_ids) != len(self.turn_rewards):
            raise ValueError(f"{len(self.env_ids)} env ids but {len(self.turn_rewards)} turn-reward rows")
        if self.uids is not None and len(self.uids) != len(self.env_ids):
            raise ValueError(f"{len(self.uids)} uids but {len(self.env_ids)} env ids")


_CURRENT: ContextVar[EpisodeBatch | None] = ContextVar("gymverse_episode_batch", default=None)


@contextmanager
def episode_batch(batch: EpisodeBatch) -> Iterator[EpisodeBatch]:
    """Make `batch` visible to the ``gymverse_perpo`` estimator for the duration of the block."""
    token = _CURRENT.set(batch)
    try:
        yield batch
    finally:
        _CURRENT.reset(token)


def _row_returns(
    token_level_rewards: torch.Tensor,
    turn_rewards: Sequence[Sequence[float] | None],
    segments: np.ndarray,
    gamma: float,
) -> list[torch.Tensor]:
    """Per row, the return of each model reply in the response (turn order)."""
    rows: list[list[float] | None] = [None if r is None else [float(x) for x in r] for r in turn_rewards]
    lengths = [len(r) for r in rows if r]
    flat = torch.tensor([x for r in rows if r for x in r], dtype=torch.float64)
    g = discounted_returns(flat, gamma=gamma, lengths=lengths) if lengths else flat
    out: list[torch.Tensor] = []
    pos = 0
    for b, r in enumerate(rows):
        s = int(segments[b])
        if r is None:  # not a multi-turn GymVerse row: one transition, its summed reward
            total = token_level_rewards[b].sum().to(torch.float64)
            out.append(total.repeat(s))
            continue
        if s > len(r):
            raise ValueError(
                f"row {b}: the response has {s} model replies but only {len(r)} turn rewards; "
                "turn_rewards must hold one reward per model reply"
            )
        out.append(g[pos : pos + s])  # replies cut off by the response-length cap are not trained on
        pos += len(r)
    return out


def perpo_token_advantages(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    env_ids: Sequence[str],
    turn_rewards: Sequence[Sequence[float] | None],
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token advantages and returns ``[B, T]`` with PERPO env-level normalization (see the module docstring)."""
    bsz = int(response_mask.shape[0])
    if len(env_ids) != bsz or len(turn_rewards) != bsz:
        raise ValueError(f"batch has {bsz} rows but {len(env_ids)} env ids and {len(turn_rewards)} turn-reward rows")
    with torch.no_grad():
        ids = turn_ids_from_mask(response_mask)
        segments = (ids.max(dim=-1).values + 1).cpu().numpy() if ids.shape[-1] else np.zeros(bsz, dtype=np.int64)
        per_row = _row_returns(token_level_rewards.cpu(), turn_rewards, segments, gamma)
        flat_g = torch.cat(per_row) if per_row else torch.zeros(0, dtype=torch.float64)
        flat_env = np.array([env_ids[b] for b in range(bsz) for _ in range(int(segments[b]))], dtype=object)
        flat_adv = env_normalize(flat_g, flat_env, eps=eps) if flat_g.numel() else flat_g
        k = max(1, int(segments.max()) if bsz else 1)
        adv_pad = torch.zeros(bsz, k, dtype=torch.float64)
        ret_pad = torch.zeros(bsz, k, dtype=torch.float64)
        pos = 0
        for b in range(bsz):
            s = int(segments[b])
            adv_pad[b, :s] = flat_adv[pos : pos + s]
            ret_pad[b, :s] = flat_g[pos : pos + s]
            pos += s
        ids = ids.cpu()
        mask = response_mask.cpu()
        dtype, device = token_level_rewards.dtype, token_level_rewards.device
        adv = place_turn_advantages(adv_pad, ids, mask).to(dtype=dtype, device=device)
        ret = place_turn_advantages(ret_pad, ids, mask).to(dtype=dtype, device=device)
    return adv, ret


@register_adv_est(ADV_ESTIMATOR)
def compute_gymverse_perpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator entry point: PERPO advantages grouped by the env ids of the current `episode_batch`."""
    batch = _CURRENT.get()
    if batch is None:
        raise RuntimeError(
            f"algorithm.adv_estimator={ADV_ESTIMATOR} needs the env id of every row; run the GymVerse trainer "
            f"(trainer.v1.trainer_mode={TRAINER_MODE}) so it can supply them"
        )
    if index is not None and batch.uids is not None and [str(u) for u in index] != [str(u) for u in batch.uids]:
        raise RuntimeError("gymverse_perpo: rows passed by verl do not match the episode batch (uid mismatch)")
    gamma = float(config.get("gamma", 1.0)) if config is not None else 1.0
    return perpo_token_advantages(
        token_level_rewards, response_mask, batch.env_ids, batch.turn_rewards, gamma=gamma, eps=batch.eps
    )
