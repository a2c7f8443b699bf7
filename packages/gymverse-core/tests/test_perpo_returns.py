"""Discounted per-turn returns over ragged flat episodes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from gymverse.perpo import discounted_returns, fill_returns, returns_from_lists
from gymverse.trajectory import Trajectory, Turn
from hypothesis import given, settings
from hypothesis import strategies as st


def reference(episodes: list[list[float]], gamma: float) -> list[float]:
    out: list[float] = []
    for ep in episodes:
        g, rets = 0.0, []
        for r in reversed(ep):
            g = r + gamma * g
            rets.append(g)
        out.extend(reversed(rets))
    return out


def test_golden_hand_computed() -> None:
    # ep A: r = (0, 0, 1), gamma 0.5 -> G = (0.25, 0.5, 1); ep B: (1, -1) -> (0.5, -1); ep C: (2) -> (2)
    r = np.array([0.0, 0.0, 1.0, 1.0, -1.0, 2.0])
    expected = [0.25, 0.5, 1.0, 0.5, -1.0, 2.0]
    np.testing.assert_allclose(discounted_returns(r, gamma=0.5, lengths=[3, 2, 1]), expected)
    np.testing.assert_allclose(discounted_returns(r, gamma=0.5, episode_ids=[7, 7, 7, 3, 3, 9]), expected)
    np.testing.assert_allclose(discounted_returns(r, gamma=0.5, dones=[0, 0, 1, 0, 1, 1]), expected)


def test_gamma_one_is_reverse_cumsum_and_gamma_zero_is_reward() -> None:
    r = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(discounted_returns(r, gamma=1.0, lengths=[4]), [10, 9, 7, 4])
    np.testing.assert_allclose(discounted_returns(r, gamma=0.0, lengths=[2, 2]), r)


def test_long_episode_is_stable() -> None:
    rng = np.random.default_rng(0)
    eps = [rng.normal(size=n).tolist() for n in (1500, 1, 37, 700)]
    flat = np.concatenate([np.asarray(e) for e in eps])
    got = discounted_returns(flat, gamma=0.99, lengths=[len(e) for e in eps])
    np.testing.assert_allclose(got, reference(eps, 0.99), rtol=1e-10, atol=1e-10)


def test_torch_matches_numpy_and_keeps_dtype() -> None:
    r = np.array([0.5, 1.0, -2.0, 0.0, 3.0], dtype=np.float32)
    a = discounted_returns(r, gamma=0.9, lengths=[2, 3])
    b = discounted_returns(torch.from_numpy(r), gamma=0.9, lengths=torch.tensor([2, 3]))
    assert isinstance(b, torch.Tensor)
    assert b.dtype == torch.float32
    assert a.dtype == np.float32
    np.testing.assert_allclose(b.numpy(), a, rtol=1e-6)


def test_integer_rewards_become_float() -> None:
    out = discounted_returns(np.array([1, 1, 1]), gamma=0.5, lengths=[3])
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [1.75, 1.5, 1.0])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one"),
        ({"lengths": [2, 2], "dones": [0, 1, 0, 1]}, "exactly one"),
        ({"lengths": [2, 1]}, "sum to 3 but there are 4"),
        ({"lengths": [4, 0]}, "positive"),
        ({"episode_ids": [1, 1, 2, 1]}, "not contiguous"),
        ({"dones": [0, 1, 1]}, "shape"),
        ({"lengths": [4], "gamma": 1.5}, "gamma"),
    ],
)
def test_bad_input_names_the_problem(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        discounted_returns(np.zeros(4), **kwargs)


def test_rewards_must_be_flat() -> None:
    with pytest.raises(ValueError, match="1-D"):
        discounted_returns(np.zeros((2, 2)), lengths=[4])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(-5, 5).map(float), min_size=1, max_size=40), min_size=1, max_size=12),
    st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]),
)
def test_matches_python_recurrence(episodes: list[list[float]], gamma: float) -> None:
    flat = [v for ep in episodes for v in ep]
    got = discounted_returns(np.asarray(flat), gamma=gamma, lengths=[len(e) for e in episodes])
    np.testing.assert_allclose(got, reference(episodes, gamma), rtol=1e-12, atol=1e-9)
    assert [x for ep in returns_from_lists(episodes, gamma) for x in ep] == pytest.approx(got.tolist())


def test_fill_returns_sets_turn_ret() -> None:
    t1 = Trajectory("a:X", 0, 1, [Turn("o", "a", 0.0), Turn("o", "a", 1.0)])
    t2 = Trajectory("a:X", 1, 1, [])
    fill_returns([t1, t2], gamma=0.5)
    assert [t.ret for t in t1.turns] == [0.5, 1.0]


def test_gymverse_never_imports_torch() -> None:
    code = (
        "import sys, gymverse.perpo, gymverse.curriculum, gymverse.rollout\n"
        "import numpy as np\n"
        "gymverse.perpo.env_normalize(np.ones(3), ['a', 'b', 'a'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
