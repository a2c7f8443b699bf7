"""Placing per-turn advantages on response tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymverse.perpo import broadcast_sequence_advantages, place_turn_advantages, turn_ids_from_mask
from hypothesis import given, settings
from hypothesis import strategies as st

MASK = [[0, 1, 1, 0, 0, 1, 1, 0], [1, 0, 1, 1, 1, 0, 0, 0]]
IDS = [[-1, 0, 0, -1, -1, 1, 1, -1], [0, -1, 1, 1, 1, -1, -1, -1]]


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_turn_ids_and_placement(lib: str) -> None:
    arr = np.asarray if lib == "numpy" else torch.tensor
    ids = turn_ids_from_mask(arr(MASK))
    assert np.asarray(ids).tolist() == IDS
    adv = arr([[0.5, -1.0], [2.0, 3.0]])
    out = place_turn_advantages(adv, ids)
    assert type(out) is type(adv)
    assert np.asarray(out).tolist() == [[0, 0.5, 0.5, 0, 0, -1, -1, 0], [2, 0, 3, 3, 3, 0, 0, 0]]


def test_response_mask_zeroes_more_tokens_and_1d_works() -> None:
    ids = np.array([0, 0, -1, 1, 1])
    out = place_turn_advantages(np.array([1.0, 2.0]), ids, response_mask=np.array([1, 0, 0, 1, 1]))
    assert out.tolist() == [1.0, 0.0, 0.0, 2.0, 2.0]


def test_missing_turn_advantage_is_an_error() -> None:
    with pytest.raises(IndexError, match="turn id 1 has no advantage"):
        place_turn_advantages(np.array([[1.0]]), np.array([[0, 1]]))
    with pytest.raises(ValueError, match="must be"):
        place_turn_advantages(np.array([1.0, 2.0]), np.zeros((2, 2, 2), dtype=np.int64))


def test_broadcast_sequence_advantages() -> None:
    out = broadcast_sequence_advantages(torch.tensor([2.0, -1.0]), torch.tensor([[0, 1, 1], [1, 1, 0]]))
    assert out.tolist() == [[0, 2, 2], [-1, -1, 0]]
    with pytest.raises(ValueError, match=r"\[B\]"):
        broadcast_sequence_advantages(np.zeros(3), np.zeros((2, 3)))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=30), min_size=1, max_size=6))
def test_placement_matches_a_python_loop(rows: list[list[bool]]) -> None:
    width = max(map(len, rows))
    mask = np.array([r + [False] * (width - len(r)) for r in rows], dtype=np.int64)
    ids = turn_ids_from_mask(mask)
    k = max(1, int(ids.max()) + 1)
    adv = np.arange(len(rows) * k, dtype=np.float64).reshape(len(rows), k) + 1.0
    out = place_turn_advantages(adv, ids, mask)
    for b, row in enumerate(mask):
        turn, prev = -1, 0
        for t, m in enumerate(row):
            turn += int(m and not prev)
            prev = m
            assert ids[b, t] == (turn if m else -1)
            assert out[b, t] == (adv[b, turn] if m else 0.0)
    np.testing.assert_array_equal(place_turn_advantages(torch.from_numpy(adv), torch.from_numpy(ids)).numpy(), out)
