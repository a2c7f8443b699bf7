"""The RL2 PERPO hook's layout equals the core's token-level PERPO on the same batch (one and several rows per
trajectory, rows without turns, KL-in-reward spread over a turn, discounting)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from gymverse.perpo.episodes import perpo_token_advantages
from gymverse_rl2.advantages import _rows, perpo_advantages, turn_rewards


def rl2_batch(rows: int, seq_len: int, seed: int) -> dict[str, torch.Tensor]:
    """Random RL2 rows: action runs of random length between env/prompt tokens, rewards on and inside turns."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((rows, seq_len), dtype=np.int64)
    rewards = np.zeros((rows, seq_len))
    for r in range(rows):
        pos = int(rng.integers(1, 8))
        while pos < seq_len - 2 and rng.random() < 0.8:
            n = int(rng.integers(1, 6))
            end = min(pos + n, seq_len)
            mask[r, pos:end] = 1
            rewards[r, end - 1] = float(rng.integers(0, 3))
            rewards[r, pos:end] -= 0.01  # a KL-in-reward penalty on every token of the turn
            pos = end + int(rng.integers(1, 5))
    return {"action_mask": torch.from_numpy(mask), "rewards": torch.from_numpy(rewards).float()}


@pytest.mark.parametrize(("cu_seqs", "gamma"), [(list(range(13)), 1.0), ([0, 2, 3, 6, 7, 12], 0.9)])
def test_hook_equals_core_token_perpo(cu_seqs: list[int], gamma: float) -> None:
    td = rl2_batch(12, 40, seed=len(cu_seqs))
    td["action_mask"][4] = 0  # a row without any turn
    envs = [f"env{j % 3}" for j in range(len(cu_seqs) - 1)]
    got = perpo_advantages(td, torch.tensor(cu_seqs), envs, gamma=gamma)

    # the reference: trajectories laid end to end, the core's token-level PERPO with turns from the mask
    width = max(b - a for a, b in itertools.pairwise(cu_seqs)) * 40
    mask = _rows(td["action_mask"].long(), cu_seqs, width)
    rewards = turn_rewards(mask, _rows(td["rewards"].double(), cu_seqs, width))
    ref = perpo_token_advantages(mask, envs, rewards, gamma=gamma).advantages
    want = torch.zeros(12, 40, dtype=torch.float64)
    for j, (a, b) in enumerate(itertools.pairwise(cu_seqs)):
        want[a:b] = ref[j, : (b - a) * 40].reshape(b - a, 40)
    assert got.dtype == torch.float32 and got.shape == (12, 40)
    assert torch.allclose(got.double(), want, atol=1e-6)
    assert bool((got[td["action_mask"] == 0] == 0).all())
    assert float(got.abs().sum()) > 0  # not all zeros: the batch has rewards that differ
