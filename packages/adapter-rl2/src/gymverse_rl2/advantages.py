"""PERPO advantages on RL2's rollout batch, through the core's one PERPO entry point.

RL2 packs a batch as ``tensor_dict`` rows (one row per sequence; a multi-turn trajectory whose prompt stops being
a prefix spans several rows) with ``cu_seqs`` marking each trajectory's rows. Here every trajectory's rows are
laid end to end and its `EpisodeRecord` (rewards, stop reason) is aligned with that mask: the turn ends are the
core's `turn_ends_from_mask` (RL2 shifts tokens by one, so the record's own ends are not row positions; turns cut
off have ends past the row). `gymverse.perpo.advantages` on that `EpisodeBatch` gives every action token its
turn's env-normalized discounted return (0 on void rows), which goes back into RL2's rows.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymverse.perpo import DEFAULT_EPS, advantages, turn_ends_from_mask
from gymverse.rollout import EpisodeBatch, EpisodeRecord


def _rows(x: torch.Tensor, bounds: Sequence[int], width: int) -> torch.Tensor:
    """Each trajectory's rows concatenated into one row of `width` (zero-padded)."""
    out = torch.zeros((len(bounds) - 1, width), dtype=x.dtype)
    for j, (a, b) in enumerate(itertools.pairwise(bounds)):
        flat = x[a:b].reshape(-1)
        out[j, : flat.numel()] = flat
    return out


def perpo_advantages(
    tensor_dict: dict[str, torch.Tensor],
    cu_seqs: Any,
    records: Sequence[EpisodeRecord],
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
) -> torch.Tensor:
    """Advantages shaped like ``tensor_dict["action_mask"]`` (float32, 0 off action tokens)."""
    bounds = [int(c) for c in cu_seqs]
    if len(bounds) - 1 != len(records):
        raise ValueError(f"{len(bounds) - 1} trajectories in the batch but {len(records)} episode records")
    mask = tensor_dict["action_mask"]
    seq_len = int(mask.shape[1])
    width = max([1, *((b - a) * seq_len for a, b in itertools.pairwise(bounds))])
    rows = _rows(mask.long(), bounds, width).numpy()
    ends = turn_ends_from_mask(rows, [len(r.turn_rewards) for r in records])
    aligned = [dataclasses.replace(r, turn_ends=tuple(e)) for r, e in zip(records, ends)]
    out = np.asarray(advantages(EpisodeBatch.of(aligned, rows), gamma=gamma, eps=eps).tokens)
    adv = torch.zeros(mask.shape, dtype=torch.float32)
    for j, (a, b) in enumerate(itertools.pairwise(bounds)):
        adv[a:b] = torch.from_numpy(out[j, : (b - a) * seq_len]).reshape(b - a, seq_len).float()
    return adv
