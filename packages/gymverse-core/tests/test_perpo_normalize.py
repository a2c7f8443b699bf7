"""Advantage normalizers: golden values, Hypothesis properties, numpy/torch agreement."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymverse.perpo import (
    batch_normalize,
    env_normalize,
    episode_advantages,
    group_normalize,
    grpo_advantages,
    rloo_advantages,
)
from gymverse.perpo._xp import generic_kernels, group_codes, segment_sum
from hypothesis import given, settings
from hypothesis import strategies as st

S6 = np.sqrt(6.0)


def test_env_normalize_golden() -> None:
    # env a: G = 1, 2, 3 -> mean 2, pop std sqrt(2/3); env b: 10, 20 -> mean 15, std 5; env c: 5 alone -> 0
    g = np.array([1.0, 10.0, 2.0, 20.0, 3.0, 5.0])
    ids = ["a", "b", "a", "b", "a", "c"]
    s = np.sqrt(2.0 / 3.0)
    np.testing.assert_allclose(env_normalize(g, ids), [-1 / s, -1, 0, 1, 1 / s, 0], rtol=1e-8)


def test_eps_is_configurable_and_added_to_std() -> None:
    g = np.array([0.0, 2.0])  # mean 1, std 1
    np.testing.assert_allclose(env_normalize(g, [0, 0], eps=1.0), [-0.5, 0.5])


def test_batch_normalize_golden() -> None:
    np.testing.assert_allclose(batch_normalize(np.array([1.0, 2.0, 3.0, 4.0])), np.array([-3, -1, 1, 3]) / np.sqrt(5))


def test_grpo_golden_with_and_without_std() -> None:
    r = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    p = [0, 0, 0, 1, 1, 1]
    # group 0: mean 1/3, pop std sqrt(2)/3; group 1: mean 2/3
    np.testing.assert_allclose(grpo_advantages(r, p, use_std=False), [2 / 3, -1 / 3, -1 / 3, -2 / 3, 1 / 3, 1 / 3])
    k = 3 / np.sqrt(2)
    np.testing.assert_allclose(grpo_advantages(r, p), np.array([2, -1, -1, -2, 1, 1]) / 3 * k, rtol=1e-8)
    # sample std (verl / TRL convention): sqrt(1/3)
    np.testing.assert_allclose(grpo_advantages(r, p, ddof=1, eps=0.0)[:3], np.array([2, -1, -1]) / 3 * np.sqrt(3))


def test_rloo_golden() -> None:
    r = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 7.0])
    p = ["x", "x", "x", "y", "y", "z"]
    # x: 1 - 0 = 1, 0 - 0.5 = -0.5, -0.5; y: 1 - 1 = 0; z alone: 0
    np.testing.assert_allclose(rloo_advantages(r, p), [1.0, -0.5, -0.5, 0.0, 0.0, 0.0])


def test_episode_level_golden() -> None:
    # episodes (0, 1) (0, 0, 0) (2): G_0 = 1, 0, 2 -> normalized across 3 episodes: 0, -sqrt(1.5), sqrt(1.5)
    r = np.array([0.0, 1.0, 0.0, 0.0, 0.0, 2.0])
    a = np.sqrt(1.5)
    np.testing.assert_allclose(episode_advantages(r, lengths=[2, 3, 1]), [0, 0, -a, -a, -a, a], atol=1e-12)
    # grouped: episodes 0 and 2 in group "g" (scores 1, 2 -> -1, 1), episode 1 alone (-> 0)
    grouped = episode_advantages(r, lengths=[2, 3, 1], episode_groups=["g", "h", "g"])
    np.testing.assert_allclose(grouped, [-1, -1, 0, 0, 0, 1], atol=1e-8)
    # discounting applies to the episode score: gamma 0.5 -> G_0 = 0.5, 0, 2
    np.testing.assert_allclose(
        episode_advantages(r, lengths=[2, 3, 1], gamma=0.5)[[0, 2, 5]],
        batch_normalize(np.array([0.5, 0.0, 2.0])),
    )


def test_constant_group_gives_zero_advantage() -> None:
    out = env_normalize(np.array([0.1, 0.1, 0.1, 3.0, 4.0]), [1, 1, 1, 2, 2])
    np.testing.assert_allclose(out[:3], 0.0, atol=1e-6)
    exact = grpo_advantages(np.array([1.0, 1.0, 0.0, 2.0]), [0, 0, 1, 1], eps=0.0)
    assert exact.tolist() == [0.0, 0.0, -1.0, 1.0]  # no 0/0 NaN without eps


def test_id_kinds_agree() -> None:
    g = np.random.default_rng(1).normal(size=50)
    ints = np.random.default_rng(2).integers(0, 5, size=50)
    by_str = env_normalize(g, [f"env{i}" for i in ints])
    np.testing.assert_allclose(env_normalize(g, ints), by_str)
    np.testing.assert_allclose(env_normalize(g, ints.astype(str)), by_str)
    np.testing.assert_allclose(env_normalize(g, ints * 10**12), by_str)  # sparse ids: sort path
    np.testing.assert_allclose(env_normalize(g, ints, num_groups=5), by_str)
    np.testing.assert_allclose(env_normalize(torch.from_numpy(g), torch.from_numpy(ints)).numpy(), by_str)


def test_float32_in_float32_out_with_float64_accumulation() -> None:
    g = (1e4 + np.random.default_rng(3).normal(size=1000)).astype(np.float32)
    out = env_normalize(g, np.zeros(1000, dtype=np.int64))
    assert out.dtype == np.float32
    assert abs(float(out.astype(np.float64).std()) - 1.0) < 1e-3


def test_generic_segment_sum_matches_native_kernels() -> None:
    x = np.random.default_rng(4).normal(size=300)
    codes = np.random.default_rng(5).integers(0, 7, size=300)
    codes[codes == 3] = 4  # an empty group in the middle
    native = segment_sum(x, codes, 8)
    np.testing.assert_allclose(segment_sum(x, codes, 8, impl="generic"), native)
    tx, tc = torch.from_numpy(x), torch.from_numpy(codes)
    np.testing.assert_allclose(segment_sum(tx, tc, 8).numpy(), native)
    np.testing.assert_allclose(segment_sum(tx, tc, 8, impl="generic").numpy(), native)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_standard_only_path_gives_the_same_advantages(lib: str) -> None:
    # what a namespace without a native scatter-add (cupy, jax, array-api-strict, ...) runs
    g = np.random.default_rng(6).normal(size=200)
    ids = np.random.default_rng(7).integers(0, 9, size=200)
    x, i = (g, ids) if lib == "numpy" else (torch.from_numpy(g), torch.from_numpy(ids))
    fast = [env_normalize(x, i), rloo_advantages(x, i), grpo_advantages(x, i, ddof=1)]
    with generic_kernels():
        slow = [env_normalize(x, i), rloo_advantages(x, i), grpo_advantages(x, i, ddof=1)]
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-10, atol=1e-12)


def test_group_codes_are_sorted_and_order_independent() -> None:
    codes, keys = group_codes(["b", "a", "c", "a"], 4)
    assert keys == ["a", "b", "c"]
    assert codes.tolist() == [1, 0, 2, 0]


@pytest.mark.parametrize(
    ("call", "err", "match"),
    [
        (lambda: env_normalize(np.zeros(3), ["a", "b"]), ValueError, "2 group ids for 3"),
        (lambda: env_normalize(np.zeros(3), [0, 0, 0], eps=-1.0), ValueError, "eps"),
        (lambda: group_normalize(np.zeros(3), [0, 0, 0], ddof=2), ValueError, "ddof"),
        (lambda: env_normalize(torch.zeros(2), torch.tensor([0.5, 1.0])), TypeError, "integers"),
        (lambda: episode_advantages(np.zeros(3), lengths=[3], episode_groups=["a", "b"]), ValueError, "2 group"),
    ],
)
def test_bad_input_is_reported(call, err: type[Exception], match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(err, match=match):
        call()


# ---------------------------------------------------------------- properties
grid = st.integers(-400, 400).map(lambda v: v / 8.0)  # exact binary fractions: distinct values stay far apart
batches = st.lists(st.tuples(st.integers(0, 5), grid), min_size=1, max_size=80)


@settings(max_examples=80, deadline=None)
@given(batches)
def test_each_group_has_mean_zero_and_unit_std(rows: list[tuple[int, float]]) -> None:
    ids = np.array([r[0] for r in rows])
    g = np.array([r[1] for r in rows])
    out = env_normalize(g, ids)
    for e in np.unique(ids):
        sel = out[ids == e]
        assert abs(sel.mean()) < 1e-9
        if len(np.unique(g[ids == e])) >= 2:
            assert abs(sel.std() - 1.0) < 1e-6
        else:
            np.testing.assert_allclose(sel, 0.0, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(batches, batches)
def test_other_envs_joining_do_not_change_a_group(
    mine: list[tuple[int, float]], others: list[tuple[int, float]]
) -> None:
    g = np.array([r[1] for r in mine])
    alone = env_normalize(g, ["mine"] * len(g))
    ids = ["mine"] * len(g) + [f"other{r[0]}" for r in others]
    joined = env_normalize(np.concatenate([g, [r[1] for r in others]]), ids)
    np.testing.assert_allclose(joined[: len(g)], alone, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(batches, st.randoms(use_true_random=False))
def test_permutation_invariance(rows: list[tuple[int, float]], rnd) -> None:  # type: ignore[no-untyped-def]
    perm = list(range(len(rows)))
    rnd.shuffle(perm)
    ids = np.array([r[0] for r in rows])
    g = np.array([r[1] for r in rows])
    for fn in (env_normalize, grpo_advantages, rloo_advantages):
        base = fn(g, ids)
        np.testing.assert_allclose(fn(g[perm], ids[perm]), base[perm], rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(batches)
def test_numpy_and_torch_agree(rows: list[tuple[int, float]]) -> None:
    ids = np.array([r[0] for r in rows])
    g = np.array([r[1] for r in rows])
    tg, tids = torch.from_numpy(g), torch.from_numpy(ids)
    pairs = [
        (env_normalize(g, ids), env_normalize(tg, tids)),
        (env_normalize(g, ids), env_normalize(tg, [f"e{i}" for i in ids])),
        (batch_normalize(g), batch_normalize(tg)),
        (grpo_advantages(g, ids, use_std=False), grpo_advantages(tg, tids, use_std=False)),
        (rloo_advantages(g, ids), rloo_advantages(tg, tids)),
        (episode_advantages(g, lengths=[len(g)]), episode_advantages(tg, lengths=[len(g)])),
    ]
    for a, b in pairs:
        assert isinstance(b, torch.Tensor)
        np.testing.assert_allclose(b.numpy(), a, rtol=1e-12, atol=1e-12)
