"""PERPO (per-turn returns, env-level normalization, token placement) and its building blocks against a naive loop."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from gymverse.perpo import advantages, merge
from gymverse.perpo.episodes import perpo_stats, perpo_token_advantages, perpo_token_stats, perpo_turn_advantages
from gymverse.rollout import EpisodeBatch
from gymverse.trajectory import EpisodeTokens, Trajectory, Turn

EPS = 1e-9


def naive(episodes: list[tuple[str, list[float]]], gamma: float) -> list[list[float]]:
    """The reference's definition, written as plainly as possible."""
    returns = []
    for _, rewards in episodes:
        g, out = 0.0, []
        for r in reversed(rewards):
            g = r + gamma * g
            out.append(g)
        returns.append(out[::-1])
    by_env: dict[str, list[float]] = {}
    for (env, _), rets in zip(episodes, returns):
        by_env.setdefault(env, []).extend(rets)
    stats = {}
    for env, vals in by_env.items():
        mean = sum(vals) / len(vals)
        stats[env] = (mean, math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)))
    return [[(g - stats[env][0]) / (stats[env][1] + EPS) for g in rets] for (env, _), rets in zip(episodes, returns)]


def random_batch(rng: random.Random, n: int) -> list[tuple[str, list[float]]]:
    envs = ["game:A", "logic:B", "tool-use:C"]
    return [
        (rng.choice(envs), [rng.choice([0.0, 0.0, -0.1, 0.5, 1.0]) for _ in range(rng.randint(1, 6))]) for _ in range(n)
    ]


def layout(rng: random.Random, episodes: list[tuple[str, list[float]]]) -> tuple[np.ndarray, list[list[int]]]:
    """A response mask per episode: env tokens (0) before each turn's model tokens (1); plus the turn ends."""
    rows, ends = [], []
    for _, rewards in episodes:
        row: list[int] = []
        e = []
        for k in range(len(rewards)):
            row += [0] * (rng.randint(1, 4) if k else 0) + [1] * rng.randint(1, 5)
            e.append(len(row))
        rows.append(row)
        ends.append(e)
    width = max(len(r) for r in rows) + 3
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for b, r in enumerate(rows):
        mask[b, : len(r)] = r
    return mask, ends


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_matches_a_naive_per_env_loop_on_mixed_multi_turn_batches(seed: int, gamma: float) -> None:
    rng = random.Random(seed)
    episodes = random_batch(rng, 24)
    want = naive(episodes, gamma)
    adv, rets = perpo_turn_advantages([r for _, r in episodes], [e for e, _ in episodes], gamma=gamma)
    for a, w in zip(adv, want):
        np.testing.assert_allclose(a, w, rtol=1e-9, atol=1e-9)
    mask, ends = layout(rng, episodes)
    tok = perpo_token_advantages(mask, [e for e, _ in episodes], [r for _, r in episodes], turn_ends=ends, gamma=gamma)
    for b, (w, e) in enumerate(zip(want, ends)):
        start = 0
        for k, end in enumerate(e):
            seg = tok.advantages[b, start:end]
            m = mask[b, start:end]
            np.testing.assert_allclose(seg[m == 1], w[k], rtol=1e-9, atol=1e-9)  # each token: its turn's value
            assert np.all(seg[m == 0] == 0)  # env tokens: no advantage
            np.testing.assert_allclose(tok.returns[b, start:end][m == 1], rets[b][k])
            start = end
        assert np.all(tok.advantages[b, start:] == 0)
    # without turn ends (a framework that only carries the mask), runs of 1s are the turns: same result
    from_mask = perpo_token_advantages(mask, [e for e, _ in episodes], [r for _, r in episodes], gamma=gamma)
    np.testing.assert_allclose(from_mask.advantages, tok.advantages)


def test_torch_tensors_keep_namespace_device_and_dtype() -> None:
    torch = pytest.importorskip("torch")
    rng = random.Random(7)
    episodes = random_batch(rng, 10)
    mask, ends = layout(rng, episodes)
    np_out = perpo_token_advantages(mask, [e for e, _ in episodes], [r for _, r in episodes], turn_ends=ends)
    t_out = perpo_token_advantages(
        torch.tensor(mask, dtype=torch.float32), [e for e, _ in episodes], [r for _, r in episodes], turn_ends=ends
    )
    assert isinstance(t_out.advantages, torch.Tensor) and t_out.advantages.dtype == torch.float32
    np.testing.assert_allclose(t_out.advantages.numpy(), np_out.advantages, rtol=1e-5, atol=1e-5)


def test_cut_off_turns_are_not_trained_on_nor_counted() -> None:
    episodes = [("a", [0.0, 1.0]), ("a", [1.0]), ("a", [0.0])]
    # row 0: its second turn ends past the sequence (cut by the framework's length limit): no tokens, no stats
    g = [1.0, 1.0, 0.0]  # returns of the placed turns: row 0 turn 0 (0 + 1), row 1, row 2
    mean, std = sum(g) / 3, math.sqrt(sum((x - sum(g) / 3) ** 2 for x in g) / 3)
    a = [(x - mean) / (std + EPS) for x in g]
    mask = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]])
    out = perpo_token_advantages(mask, ["a"] * 3, [r for _, r in episodes], turn_ends=[[2, 9], [1], [3]])
    np.testing.assert_allclose(out.advantages, [[a[0]] * 2 + [0, 0], [a[1], 0, 0, 0], [a[2]] * 3 + [0]], atol=1e-9)
    stats = perpo_token_stats(mask, ["a"] * 3, [r for _, r in episodes], turn_ends=[[2, 9], [1], [3]])
    assert stats.count.tolist() == [3.0]
    with pytest.raises(ValueError, match="2 model turns but only 1 turn rewards"):
        perpo_token_advantages(np.array([[1, 0, 1]]), ["a"], [[1.0]])
    with pytest.raises(ValueError, match="1 turn ends but 2 turn rewards"):
        perpo_token_advantages(np.array([[1, 0, 1]]), ["a"], [[1.0, 0.0]], turn_ends=[[1]])


def test_distributed_statistics_equal_the_whole_batch() -> None:
    rng = random.Random(3)
    episodes = random_batch(rng, 30)
    rewards, envs = [r for _, r in episodes], [e for e, _ in episodes]
    whole = perpo_turn_advantages(rewards, envs, gamma=0.95)[0]
    ranks = [(rewards[i::3], envs[i::3]) for i in range(3)]
    stats = merge(perpo_stats(r, e, gamma=0.95) for r, e in ranks)
    for i, (r, e) in enumerate(ranks):
        local = perpo_turn_advantages(r, e, gamma=0.95, stats=stats)[0]
        for a, w in zip(local, whole[i::3]):
            np.testing.assert_allclose(a, w, rtol=1e-7, atol=1e-7)


def test_from_trajectories_uses_their_token_records() -> None:
    def traj(env: str, rewards: list[float], mask: list[int], ends: list[int]) -> Trajectory:
        t = Trajectory(env, seed=0, complexity=1, turns=[Turn("o", "a", r) for r in rewards])
        t.tokens = EpisodeTokens([1, 2], list(range(len(mask))), mask, None, ends)
        return t

    trajs = [
        traj("a", [0.0, 1.0], [1, 1, 0, 0, 1], [2, 5]),
        traj("a", [0.0], [1, 1, 1], [3]),
        traj("b", [1.0, 0.0, 0.0], [1, 0, 1, 0, 1], [1, 3, 5]),
    ]
    tokens = np.asarray(advantages(EpisodeBatch.from_trajectories(trajs), gamma=0.5).tokens)
    out: list[Any] = [tokens[b, : len(t.tokens.response_mask) if t.tokens else 0] for b, t in enumerate(trajs)]
    want = naive([(t.env_id, t.rewards) for t in trajs], 0.5)
    assert [len(o) for o in out] == [5, 3, 5]
    np.testing.assert_allclose(out[0], [want[0][0], want[0][0], 0, 0, want[0][1]], atol=1e-9)
    np.testing.assert_allclose(out[2], [want[2][0], 0, want[2][1], 0, want[2][2]], atol=1e-9)
    with pytest.raises(ValueError, match="no token record"):
        EpisodeBatch.from_trajectories([Trajectory("a", seed=0, complexity=1)])
