"""PERPO on RL2's rollout batch through the core's one entry point, `gymverse.perpo.advantages`.

RL2 packs one row per sequence (a trajectory whose prompt stops being a prefix spans several rows; ``cu_seqs``
marks each trajectory's rows) and shifts tokens by one, so each trajectory's rows are laid end to end and its
`EpisodeRecord` gets its turn ends from that mask (`turn_ends_from_mask`; cut turns end past the row).
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


def perpo_advantages(
    tensor_dict: dict[str, torch.Tensor],
    cu_seqs: Any,
    records: Sequence[EpisodeRecord],
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
) -> torch.Tensor:
    """Advantages shaped like ``tensor_dict["action_mask"]`` (float32, 0 off action tokens and in void rows)."""
    bounds = list(itertools.pairwise(int(c) for c in cu_seqs))
    if len(bounds) != len(records):
        raise ValueError(f"{len(bounds)} trajectories in the batch but {len(records)} episode records")
    mask = tensor_dict["action_mask"]
    seq_len = int(mask.shape[1])
    rows = np.zeros((len(bounds), max([1, *((b - a) * seq_len for a, b in bounds)])), dtype=np.int64)
    for j, (a, b) in enumerate(bounds):
        rows[j, : (b - a) * seq_len] = mask[a:b].reshape(-1).numpy()
    ends = turn_ends_from_mask(rows, [len(r.turn_rewards) for r in records])
    aligned = [dataclasses.replace(r, turn_ends=tuple(e)) for r, e in zip(records, ends)]
    out = np.asarray(advantages(EpisodeBatch.of(aligned, rows), gamma=gamma, eps=eps).tokens)
    adv = torch.zeros(mask.shape, dtype=torch.float32)
    for j, (a, b) in enumerate(bounds):
        adv[a:b] = torch.from_numpy(out[j, : (b - a) * seq_len]).reshape(b - a, seq_len).float()
    return adv
