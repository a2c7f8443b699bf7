"""The patched `compute_advantages_and_returns` on real OpenRLHF `Experience` objects."""

from __future__ import annotations

import copy
import importlib
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from gymverse.perpo import batch_normalize, broadcast_sequence_advantages, env_normalize, perpo_turn_advantages
from gymverse_openrlhf.advantages import env_ids_of
from gymverse_openrlhf.config import GymVerseConfig
from gymverse_openrlhf.labels import EnvLabel
from gymverse_openrlhf.patch import EXPERIENCE_MAKER, install, patch_experience_maker, unpatch_experience_maker
from openrlhf.models.utils import compute_reward
from openrlhf.trainer.ppo_utils import experience_maker as em
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

ENVS = ("game:GuessTheNumber", "logic:Nonogram", "tool-use:FileTrail")


def make_args(estimator: str, n_samples: int = 1, micro_batch: int = 3) -> SimpleNamespace:
    """The slice of OpenRLHF's hierarchical args the experience maker reads."""
    ns = SimpleNamespace
    return ns(
        algo=ns(advantage=ns(estimator=estimator, gamma=1.0, lambd=0.95, no_std_norm=False)),
        rollout=ns(n_samples_per_prompt=n_samples, micro_batch_size=micro_batch, max_new_tokens=32),
        reward=ns(clip_range=(-10.0, 10.0), overlong_buffer_len=None, stop_properly_penalty_coef=None),
        train=ns(dynamic_batch_enable=False),
        data=ns(max_len=64),
    )


def rollout_batch(seed: int, n: int, n_samples: int = 1) -> tuple[list[Any], np.ndarray, list[str]]:
    """`n` multi-turn samples as OpenRLHF builds them from agent outputs (ragged lengths, several envs)."""
    rng = np.random.default_rng(seed)
    samples, rewards, envs = [], [], []
    for i in range(n):
        env_id = ENVS[(i // n_samples) % len(ENVS)]
        prompt_len = int(rng.integers(3, 7))
        tokens = list(rng.integers(5, 50, size=prompt_len))
        ranges = []
        for _ in range(int(rng.integers(1, 4))):  # turns: action tokens, then env feedback tokens
            start = len(tokens)
            tokens += list(rng.integers(5, 50, size=int(rng.integers(1, 5))))
            ranges.append((start, len(tokens)))
            tokens += list(rng.integers(5, 50, size=int(rng.integers(0, 4))))
        reward = float(np.round(rng.normal(loc=ENVS.index(env_id), scale=1.0 + ENVS.index(env_id)), 3))
        success = float(reward > ENVS.index(env_id))
        response: dict[str, Any] = {
            "prompt": f"p{i // n_samples}",
            "label": EnvLabel(env_id, i // n_samples, None, ENVS.index(env_id)).to_json(),
            "observation_tokens": [int(t) for t in tokens],
            "action_ranges": ranges,
            "reward": reward,
            "scores": success,
            "rollout_log_probs": None,
            "truncated": False,
            "extra_logs": {"gymverse_success": success, "gymverse_error": float(i == 1), "gymverse_complexity": 1},
        }
        samples.append(SamplesGenerator._process_response_into_experience(None, response, max_len=64))
        rewards.append(reward)
        envs.append(env_id)
    return samples, np.asarray(rewards), envs


def maker_for(args: SimpleNamespace, kl_coef: float = 0.0) -> Any:
    """A real RemoteExperienceMaker (no Ray groups needed for the advantage step)."""
    return em.RemoteExperienceMaker(
        None, None, None, None, FixedKLController(kl_coef), SimpleNamespace(args=args), SimpleNamespace(pad_token_id=0)
    )


def experiences(maker: Any, samples: list[Any]) -> list[Any]:
    """OpenRLHF's own micro-batching, plus the fields `make_experience` would fill (zero KL and values)."""
    batches = maker.split_rollout_samples(copy.deepcopy(samples))
    for exp in batches:
        exp.kl = torch.zeros_like(exp.action_mask, dtype=torch.float32)
        exp.values = torch.zeros_like(exp.action_mask, dtype=torch.float32)
    return batches


@pytest.fixture
def patched() -> Iterator[Any]:
    """Install a GymVerse config on the real class for one test, then restore OpenRLHF's method."""

    def apply(cfg: GymVerseConfig) -> None:
        patch_experience_maker(em, cfg)

    yield apply
    unpatch_experience_maker(em)


@pytest.mark.parametrize("micro_batch", [1, 3, 8])
def test_env_norm_equals_gymverse_perpo_grouped_by_env(patched: Any, micro_batch: Any) -> None:
    samples, rewards, envs = rollout_batch(seed=micro_batch, n=8)
    maker = maker_for(make_args("reinforce", micro_batch=micro_batch))
    patched(GymVerseConfig(norm="env"))
    out = maker.compute_advantages_and_returns(experiences(maker, samples))

    expected = env_normalize(torch.tensor(rewards), envs)
    assert len({e for e in envs}) == 3 and not torch.allclose(expected, batch_normalize(torch.tensor(rewards)))
    for exp in out:
        rows = torch.tensor(exp.index)
        want = broadcast_sequence_advantages(expected[rows], exp.action_mask).to(exp.advantages.dtype)
        mask = exp.action_mask.bool()
        torch.testing.assert_close(exp.advantages[mask], want[mask])
        torch.testing.assert_close(exp.returns[mask], want[mask])
        assert env_ids_of([exp]) == [envs[i] for i in exp.index]
    # per env the trained-on values have mean 0 and (population) std 1
    per_sample = {
        i: float(exp.advantages[j][exp.action_mask[j].bool()][0]) for exp in out for j, i in enumerate(exp.index)
    }
    for env_id in set(envs):
        vals = np.array([per_sample[i] for i, e in enumerate(envs) if e == env_id])
        assert abs(vals.mean()) < 1e-5
        if len(vals) > 1:
            assert vals.std() == pytest.approx(1.0, abs=1e-4)


def test_batch_norm_option_is_rebn(patched: Any) -> None:
    samples, rewards, _ = rollout_batch(seed=4, n=7)
    maker = maker_for(make_args("reinforce"))
    patched(GymVerseConfig(norm="batch"))
    out = maker.compute_advantages_and_returns(experiences(maker, samples))
    expected = batch_normalize(torch.tensor(rewards))
    for exp in out:
        mask = exp.action_mask.bool()
        want = broadcast_sequence_advantages(expected[torch.tensor(exp.index)], exp.action_mask)
        torch.testing.assert_close(exp.advantages[mask], want.to(exp.advantages.dtype)[mask])


def test_kl_penalty_still_shapes_env_normalized_returns(patched: Any) -> None:
    samples, _, _ = rollout_batch(seed=9, n=6)
    patched(GymVerseConfig(norm="env"))
    without = maker_for(make_args("reinforce"), kl_coef=0.0)
    with_kl = maker_for(make_args("reinforce"), kl_coef=0.5)
    a = without.compute_advantages_and_returns(experiences(without, samples))
    batches = experiences(with_kl, samples)
    for exp in batches:
        exp.kl = torch.full_like(exp.kl, 0.2)
    b = with_kl.compute_advantages_and_returns(batches)
    for x, y in zip(a, b):
        first = x.action_mask.float().argmax(dim=1)
        # every action token pays 0.5 * 0.2 per remaining action token up to the end (cumulative return)
        rows = torch.arange(len(first))
        remaining = x.action_mask.float().flip(1).cumsum(1).flip(1)[rows, first]
        torch.testing.assert_close(y.returns[rows, first] - x.returns[rows, first], -0.1 * remaining)


@pytest.mark.parametrize(
    ("estimator", "n_samples"),
    [("reinforce", 1), ("reinforce_baseline", 2), ("rloo", 2), ("group_norm", 2), ("dr_grpo", 2), ("gae", 1)],
)
def test_gymverse_off_leaves_openrlhf_unchanged(patched: Any, estimator: Any, n_samples: Any) -> None:
    samples, _, _ = rollout_batch(seed=1, n=8, n_samples=n_samples)
    args = make_args(estimator, n_samples=n_samples)
    maker = maker_for(args, kl_coef=0.05)
    original_method = em.RemoteExperienceMaker.__dict__["compute_advantages_and_returns"]
    batches = experiences(maker, samples)
    for exp in batches:  # non-trivial KL and values so every branch does real work
        exp.kl = torch.linspace(0, 0.3, exp.kl.numel()).reshape(exp.kl.shape)
        exp.values = torch.linspace(-1, 1, exp.values.numel()).reshape(exp.values.shape)
    reference = original_method(maker, copy.deepcopy(batches))

    assert install(GymVerseConfig()) == GymVerseConfig()  # all defaults: nothing is touched
    assert em.RemoteExperienceMaker.__dict__["compute_advantages_and_returns"] is original_method
    patched(GymVerseConfig(norm="off"))  # patched, but with the GymVerse baseline off
    assert em.RemoteExperienceMaker.__dict__["compute_advantages_and_returns"] is not original_method
    out = maker.compute_advantages_and_returns(copy.deepcopy(batches))
    for x, y in zip(reference, out):
        torch.testing.assert_close(y.advantages, x.advantages, rtol=0, atol=0)
        torch.testing.assert_close(y.returns, x.returns, rtol=0, atol=0)
        assert y.info.keys() == x.info.keys()


def test_gae_with_env_norm_runs_and_whitens(patched: Any) -> None:
    samples, _, _ = rollout_batch(seed=3, n=6)
    maker = maker_for(make_args("gae"))
    patched(GymVerseConfig(norm="env"))
    out = maker.compute_advantages_and_returns(experiences(maker, samples))
    adv = torch.cat([e.advantages[e.action_mask.bool()] for e in out])
    assert torch.isfinite(adv).all()
    assert abs(float(adv.mean())) < 1e-4


def multi_turn_batch(seed: int, n: int) -> tuple[list[Any], list[tuple[str, list[float]]]]:
    """Samples as the GymVerse agent returns them: per-turn rewards in the label, one action range per turn."""
    rng = np.random.default_rng(seed)
    samples, episodes = [], []
    for i in range(n):
        env_id = ENVS[i % len(ENVS)]
        turns = [float(rng.choice([0.0, -0.1, 0.5, 1.0])) for _ in range(int(rng.integers(1, 4)))]
        tokens = list(rng.integers(5, 50, size=int(rng.integers(3, 6))))
        ranges = []
        for k in range(len(turns)):
            start = len(tokens)
            tokens += list(rng.integers(5, 50, size=int(rng.integers(1, 4))))
            ranges.append((start, len(tokens)))
            tokens += list(rng.integers(5, 50, size=int(rng.integers(1, 3)))) if k + 1 < len(turns) else []
        label = EnvLabel(env_id, i, None, ENVS.index(env_id), turn_rewards=tuple(turns)).to_json()
        response: dict[str, Any] = {
            "prompt": f"p{i}",
            "label": label,
            "observation_tokens": [int(t) for t in tokens],
            "action_ranges": ranges,
            "reward": sum(turns),
            "scores": 0.0,
            "rollout_log_probs": None,
            "truncated": False,
            "extra_logs": {},
        }
        samples.append(SamplesGenerator._process_response_into_experience(None, response, max_len=64))
        episodes.append((env_id, turns))
    return samples, episodes


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_env_norm_is_per_turn_perpo_on_agent_samples(patched: Any, gamma: Any) -> None:
    samples, episodes = multi_turn_batch(seed=5, n=9)
    args = make_args("reinforce", micro_batch=4)
    args.algo.advantage.gamma = gamma
    maker = maker_for(args)
    patched(GymVerseConfig(norm="env"))
    out = maker.compute_advantages_and_returns(experiences(maker, samples))
    # the core's turn-level PERPO (itself checked against a naive loop in gymverse-core's tests)
    want = [
        a.tolist() for a in perpo_turn_advantages([r for _, r in episodes], [e for e, _ in episodes], gamma=gamma)[0]
    ]
    checked = 0
    for exp in out:
        for j, i in enumerate(exp.index):
            mask = exp.action_mask[j].tolist()
            runs = [k for k in range(len(mask)) if mask[k] and (k == 0 or not mask[k - 1])]
            assert len(runs) == len(episodes[i][1])  # one run of action tokens per turn
            for turn, start in enumerate(runs):
                end = start
                while end < len(mask) and mask[end]:
                    assert float(exp.advantages[j, end]) == pytest.approx(want[i][turn], abs=1e-5)
                    end += 1
                    checked += 1
            assert all(float(a) == 0.0 for a, m in zip(exp.advantages[j], mask) if not m)
    assert checked > 20


def test_single_turn_per_turn_path_equals_openrlhf_scalar_path(patched: Any) -> None:
    """The per-turn PERPO on single-turn data is exactly the env-normalized scalar reward OpenRLHF's path uses."""
    samples, episodes = multi_turn_batch(seed=8, n=12)
    single = [(e, [sum(r)]) for e, r in episodes]
    one_turn = []
    for exp, (_, rs) in zip(samples, single):
        exp = copy.deepcopy(exp)
        mask = exp.action_mask[0]
        first, last = int(mask.nonzero()[0]), int(mask.nonzero()[-1])
        exp.action_mask[0, first : last + 1] = 1  # one reply spanning the response
        lab = EnvLabel.parse(exp.labels[0])
        exp.labels = [EnvLabel(lab.env_id, lab.seed, None, lab.env_index, turn_rewards=tuple(rs)).to_json()]
        one_turn.append(exp)
    maker = maker_for(make_args("reinforce", micro_batch=5), kl_coef=0.3)
    patched(GymVerseConfig(norm="env"))
    batches = experiences(maker, one_turn)
    scalar = copy.deepcopy(batches)
    for exp in scalar:  # the same samples without per-turn data: OpenRLHF's own scalar-reward shape
        exp.labels = [EnvLabel(EnvLabel.parse(lb).env_id, 0).to_json() for lb in exp.labels]
    for exp in [*batches, *scalar]:
        exp.kl = torch.linspace(0, 0.2, exp.kl.numel()).reshape(exp.kl.shape)
    kls = [exp.kl.clone() for exp in batches]
    a = maker.compute_advantages_and_returns(batches)
    b = maker.compute_advantages_and_returns(scalar)
    rewards = torch.tensor([sum(r) for _, r in single])
    expected = env_normalize(rewards, [e for e, _ in single])
    for x, y, kl in zip(a, b, kls):
        # OpenRLHF's scalar path with the env-normalized reward: reward at the last action token, KL per token,
        # cumulative returns (gamma 1)
        shaped = compute_reward(
            expected[torch.tensor(x.index)].float(), 0.3, kl, action_mask=x.action_mask, reward_clip_range=(-10, 10)
        )
        reference = maker.get_cumulative_returns(shaped, x.action_mask, 1.0)
        mask = x.action_mask.bool()
        torch.testing.assert_close(x.returns[mask], reference[mask])
        torch.testing.assert_close(y.returns[mask], reference[mask])
        torch.testing.assert_close(x.advantages, y.advantages)


def test_patch_applies_when_a_worker_imports_openrlhf_later() -> None:
    """What the Ray setup hook does in a fresh worker: patch on first import, not before."""
    saved = sys.modules.pop(EXPERIENCE_MAKER)
    parent = sys.modules["openrlhf.trainer.ppo_utils"]
    try:
        install(GymVerseConfig(norm="env"))
        assert EXPERIENCE_MAKER not in sys.modules
        fresh = importlib.import_module(EXPERIENCE_MAKER)
        assert fresh is not saved
        assert getattr(fresh.RemoteExperienceMaker.compute_advantages_and_returns, "_gymverse", False)
        assert not getattr(saved.RemoteExperienceMaker.compute_advantages_and_returns, "_gymverse", False)
    finally:
        sys.modules[EXPERIENCE_MAKER] = saved
        parent.experience_maker = saved  # type: ignore[attr-defined]


@pytest.mark.parametrize(("kl_coef", "gamma"), [(0.0, 1.0), (0.3, 1.0), (0.3, 0.9)])
def test_kl_return_fast_paths_equal_openrlhfs_loop(kl_coef: Any, gamma: Any) -> None:
    """The KL part of the returns without OpenRLHF's per-token loop is what that loop gives (to float rounding)."""
    from gymverse_openrlhf.advantages import _kl_return

    samples, _, _ = rollout_batch(seed=5, n=6)
    maker = maker_for(make_args("reinforce"), kl_coef=kl_coef)
    for exp in experiences(maker, samples):
        exp.kl = torch.linspace(-0.2, 0.7, exp.kl.numel()).reshape(exp.kl.shape)
        reward = compute_reward(torch.zeros(exp.action_mask.shape[0]), kl_coef, exp.kl, action_mask=exp.action_mask)
        expected = maker.get_cumulative_returns(reward, exp.action_mask, gamma)
        got = _kl_return(maker, exp, gamma)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
        assert bool(got.any()) == (kl_coef > 0)
