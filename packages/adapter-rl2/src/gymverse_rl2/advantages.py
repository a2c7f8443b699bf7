"""PERPO advantages on RL2's rollout batch, through the core's one PERPO function.

RL2 packs a batch as ``tensor_dict`` rows (one row per sequence; a multi-turn trajectory whose prompt stops being
a prefix spans several rows) with ``cu_seqs`` marking each trajectory's rows, and its ``compute_advantages`` groups
trajectories by ``responses_per_prompt``. Here every trajectory's rows are laid end to end, each run of action
tokens is one turn whose reward is the sum of RL2's per-token ``rewards`` over it (the env reward sits on the
turn's last token; a KL-in-reward penalty is spread over its tokens). The core's PERPO function
(`gymverse.perpo.perpo_turn_advantages`) gives every turn its env-normalized discounted return and the core's
`place_turn_advantages` puts it on the turn's action tokens: every turn here is found from the mask, so each has
tokens, and the turn ids are computed once (what `perpo_token_advantages` would recompute from the same mask).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymverse.perpo import perpo_turn_advantages, place_turn_advantages, turn_ids_from_mask


def _rows(x: torch.Tensor, cu_seqs: Sequence[int], width: int) -> torch.Tensor:
    """Each trajectory's rows concatenated into one row of `width` (zero-padded)."""
    if len(cu_seqs) - 1 == x.shape[0] and width == x.shape[1]:
        return x  # one sequence per trajectory (prefix-stable rendering): nothing to concatenate
    out = torch.zeros((len(cu_seqs) - 1, width), dtype=x.dtype)
    for j, (a, b) in enumerate(itertools.pairwise(cu_seqs)):
        flat = x[a:b].reshape(-1)
        out[j, : flat.numel()] = flat
    return out


def _turns(action_mask: torch.Tensor, rewards: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Turn id per token (-1 off action tokens), turns per row, and each turn's summed reward (row after row)."""
    ids = turn_ids_from_mask(action_mask.numpy()).astype(np.int64)
    counts = ids.max(axis=1, initial=-1) + 1 if ids.size else np.zeros(ids.shape[0], dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    on = ids >= 0
    flat = (ids + offsets[:, None])[on]
    sums = np.bincount(flat, weights=rewards.double().numpy()[on], minlength=int(counts.sum()))
    return ids, counts, sums


def turn_rewards(action_mask: torch.Tensor, rewards: torch.Tensor) -> list[list[float]]:
    """Per row, the summed reward of each run of action tokens (one run = one turn)."""
    _, counts, sums = _turns(action_mask, rewards)
    starts = np.cumsum(counts) - counts
    return [sums[a : a + n].tolist() for a, n in zip(starts.tolist(), counts.tolist())]


def perpo_advantages(
    tensor_dict: dict[str, torch.Tensor],
    cu_seqs: Any,
    env_ids: Sequence[str],
    *,
    gamma: float = 1.0,
    eps: float = 1e-9,
) -> torch.Tensor:
    """Advantages shaped like ``tensor_dict["action_mask"]`` (float32, 0 off action tokens)."""
    bounds = [int(c) for c in cu_seqs]
    if len(bounds) - 1 != len(env_ids):
        raise ValueError(f"{len(bounds) - 1} trajectories in the batch but {len(env_ids)} env ids")
    mask = tensor_dict["action_mask"]
    seq_len = int(mask.shape[1])
    width = max([1, *((b - a) * seq_len for a, b in itertools.pairwise(bounds))])
    mask_rows = _rows(mask.long(), bounds, width)
    ids, counts, sums = _turns(mask_rows, _rows(tensor_dict["rewards"].double(), bounds, width))
    starts = np.cumsum(counts) - counts
    per_row = [sums[a : a + n].tolist() for a, n in zip(starts.tolist(), counts.tolist())]
    adv_turns, _ = perpo_turn_advantages(per_row, list(env_ids), gamma=gamma, eps=eps)
    row = np.repeat(np.arange(len(counts)), counts)
    pad = np.zeros((len(counts), max(1, int(counts.max(initial=0)))))
    pad[row, np.arange(row.size) - starts[row]] = np.concatenate([np.zeros(0), *adv_turns])
    out = place_turn_advantages(pad, ids)
    if len(bounds) - 1 == mask.shape[0]:  # one row per trajectory: the rows are already RL2's rows
        return torch.from_numpy(out[:, :seq_len]).float()
    adv = torch.zeros(mask.shape, dtype=torch.float32)
    for j, (a, b) in enumerate(itertools.pairwise(bounds)):
        adv[a:b] = torch.from_numpy(out[j, : (b - a) * seq_len]).reshape(b - a, seq_len).float()
    return adv
