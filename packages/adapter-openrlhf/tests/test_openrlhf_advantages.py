"""The patched `compute_advantages_and_returns` on real OpenRLHF `Experience` objects.

Every sample is built by OpenRLHF's own `SamplesGenerator._process_response_into_experience` from an executor
response, micro-batched by OpenRLHF's own `split_rollout_samples`, and its advantages come from the real
`RemoteExperienceMaker` method as the adapter patches it.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from gymverse.curriculum import CurriculumOptions, CurriculumState, LocalCurriculum
from gymverse.curriculum.state import success_by_env
from gymverse.rollout.batch import EpisodeRecord
from gymverse.rollout.dataset import EpisodeSpec
from gymverse.testing.parity import expected_advantages, expected_curriculum, parity_trajectories, report
from gymverse_openrlhf.config import GymVerseConfig
from gymverse_openrlhf.executor import record, response
from gymverse_openrlhf.patch import EXPERIENCE_MAKER, install, patch_experience_maker, unwrap
from openrlhf.models.loss import PolicyLoss
from openrlhf.models.utils import masked_mean
from openrlhf.trainer.ppo_utils import experience_maker as em
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

ENVS = ("game:GuessTheNumber", "logic:Nonogram", "tool-use:FileTrail")


def make_args(estimator: str, n_samples: int = 1, micro_batch: int = 3, gamma: float = 1.0) -> SimpleNamespace:
    """The slice of OpenRLHF's hierarchical args the experience maker reads."""
    ns = SimpleNamespace
    return ns(
        algo=ns(advantage=ns(estimator=estimator, gamma=gamma, lambd=0.95, no_std_norm=False)),
        rollout=ns(n_samples_per_prompt=n_samples, micro_batch_size=micro_batch, max_new_tokens=32),
        reward=ns(clip_range=(-10.0, 10.0), overlong_buffer_len=None, stop_properly_penalty_coef=None),
        train=ns(dynamic_batch_enable=False),
        data=ns(max_len=4096),
    )


def maker_for(args: SimpleNamespace, kl_coef: float = 0.0) -> Any:
    """A real RemoteExperienceMaker (no Ray groups needed for the advantage step)."""
    return em.RemoteExperienceMaker(
        None, None, None, None, FixedKLController(kl_coef), SimpleNamespace(args=args), SimpleNamespace(pad_token_id=0)
    )


def experiences(maker: Any, samples: list[Any]) -> list[Any]:
    """OpenRLHF's own micro-batching, plus the fields `make_experience` fills (zero KL and values, and its
    per-sample KL means, computed as it does)."""
    batches = maker.split_rollout_samples(copy.deepcopy(samples))
    for exp in batches:
        exp.kl = torch.zeros_like(exp.action_mask, dtype=torch.float32)
        exp.values = torch.zeros_like(exp.action_mask, dtype=torch.float32)
        exp.info["kl"] = masked_mean(exp.kl, exp.action_mask, dim=-1)
    return batches


def to_sample(out: dict[str, Any]) -> Any:
    return SamplesGenerator._process_response_into_experience(None, out, max_len=4096)


@pytest.fixture
def patched() -> Iterator[Any]:
    """Install a GymVerse config on the real class for one test, then restore OpenRLHF's method."""
    yield lambda cfg: patch_experience_maker(em, cfg)
    unwrap(em.RemoteExperienceMaker, "compute_advantages_and_returns")


def by_row(out: list[Any]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Original sample index -> (its action mask, its advantages)."""
    return {i: (exp.action_mask[j], exp.advantages[j]) for exp in out for j, i in enumerate(exp.index)}


@pytest.mark.parametrize(("gamma", "micro_batch"), [(1.0, 3), (0.9, 4), (1.0, 1)])
def test_parity_batch_through_the_executor_and_openrlhfs_experiences(
    patched: Any, gamma: float, micro_batch: int
) -> None:
    """Core's parity batch -> the executor's response translation -> OpenRLHF's samples and micro-batches -> the
    patched real method: every action token's advantage is core's expectation; void episodes have no action
    token; the curriculum records what core expects."""
    trajs = parity_trajectories()
    specs = [EpisodeSpec(t.env_id, t.seed) for t in trajs]
    outs = [response(t, s, "prompt", eos=0, logprobs=False, truncated=False) for t, s in zip(trajs, specs)]
    maker = maker_for(make_args("reinforce", micro_batch=micro_batch, gamma=gamma))
    patched(GymVerseConfig(norm="env"))
    rows = by_row(maker.compute_advantages_and_returns(experiences(maker, [to_sample(o) for o in outs])))
    want = expected_advantages(trajs, gamma=gamma)
    voids = 0
    computed = [np.zeros(len(w)) for w in want]  # per response token, as the framework placed them
    for i, traj in enumerate(trajs):
        mask, adv = rows[i]
        assert traj.tokens is not None
        if not EpisodeRecord.of(traj).trained:
            voids += 1
            assert int(mask.sum()) == 0 and not adv.any() and not np.any(want[i])
            continue
        offset = len(traj.tokens.prompt_ids)  # action_mask[k] is sequence token k + 1
        on = torch.nonzero(mask).flatten().numpy()
        response_mask = np.asarray(traj.tokens.response_mask)
        assert (response_mask[on + 1 - offset] == 1).all() and len(on) == response_mask.sum()
        np.testing.assert_allclose(adv[mask.bool()].numpy(), want[i][on + 1 - offset], atol=1e-6)
        assert not adv[~mask.bool()].any()
        computed[i][on + 1 - offset] = adv[mask.bool()].numpy()
    assert voids == 3  # the crashed step, the reset failure, the aborted generation

    service = LocalCurriculum(CurriculumState.from_config(CurriculumOptions(evolve=True).to_config()))
    for traj, spec in zip(trajs, specs):
        asyncio.run(record(service, traj, spec))
    assert success_by_env(service.state._pending.values()) == expected_curriculum(trajs)
    if gamma == 1.0 and micro_batch == 3:
        report("openrlhf", computed, success_by_env(service.state._pending.values()))


def single_turn_samples(lengths: list[int], rewards: list[float], gymverse: bool) -> list[Any]:
    """Single-turn samples of one env: replies of the given lengths after prompts of varying length."""
    rng = np.random.default_rng(0)
    samples = []
    for i, (n, r) in enumerate(zip(lengths, rewards)):
        prompt = [int(t) for t in rng.integers(5, 50, size=3 + i % 4)]
        label: dict[str, Any] = {"env_id": ENVS[0], "seed": i}
        if gymverse:
            label["episode"] = EpisodeRecord(ENVS[0], (r,), (n,), "terminated", 1, r > 0, f"e{i}", i).to_dict()
        out = {
            "prompt": "p",
            "label": json.dumps(label),
            "observation_tokens": prompt + [int(t) for t in rng.integers(5, 50, size=n)],
            "action_ranges": [(len(prompt), len(prompt) + n)],
            "reward": r,
            "scores": float(r > 0),
            "rollout_log_probs": None,
            "truncated": False,
            "extra_logs": {},
        }
        samples.append(to_sample(out))
    return samples


@pytest.mark.parametrize("gymverse", [True, False])
def test_single_env_single_turn_equals_openrlhfs_own_reinforce(patched: Any, gymverse: bool) -> None:
    """With one env, one turn per sample and equal reply lengths, PERPO's env normalization is exactly what
    OpenRLHF's own ``reinforce`` computes (cumulative return, then its whitening over action tokens); a sample
    that is not a GymVerse episode is one turn with its scalar reward (`EpisodeRecord.single_turn`)."""
    rewards = [1.0, 0.0, 0.5, 1.0, -0.2, 0.0, 0.7]
    samples = single_turn_samples([4] * 7, rewards, gymverse)
    maker = maker_for(make_args("reinforce", micro_batch=3))
    theirs = by_row(maker.compute_advantages_and_returns(experiences(maker, samples)))  # OpenRLHF's own method
    patched(GymVerseConfig(norm="env"))
    ours = by_row(maker.compute_advantages_and_returns(experiences(maker, samples)))
    for i in range(len(rewards)):
        mask = ours[i][0].bool()
        torch.testing.assert_close(ours[i][1][mask], theirs[i][1][mask].to(ours[i][1].dtype), atol=2e-6, rtol=0)
        assert not ours[i][1][~mask].any()


def test_what_differs_from_openrlhf_reinforce_is_token_weighted_whitening(patched: Any) -> None:
    """With unequal reply lengths OpenRLHF whitens with token-weighted statistics (a long reply weighs more);
    PERPO weighs each turn once. OpenRLHF's result is exactly the token-weighted version."""
    lengths, rewards = [2, 9, 3, 7, 1], [1.0, 0.0, 0.5, 1.0, -0.5]
    samples = single_turn_samples(lengths, rewards, gymverse=True)
    maker = maker_for(make_args("reinforce", micro_batch=2))
    theirs = by_row(maker.compute_advantages_and_returns(experiences(maker, samples)))
    patched(GymVerseConfig(norm="env"))
    ours = by_row(maker.compute_advantages_and_returns(experiences(maker, samples)))
    r, w = np.array(rewards), np.array(lengths, dtype=float)
    tok_mean = (r * w).sum() / w.sum()
    tok_std = np.sqrt(((r - tok_mean) ** 2 * w).sum() / w.sum())
    for i in range(len(rewards)):
        mask = ours[i][0].bool()
        np.testing.assert_allclose(theirs[i][1][mask].numpy(), (r[i] - tok_mean) / tok_std, atol=1e-5)
        np.testing.assert_allclose(ours[i][1][mask].numpy(), (r[i] - r.mean()) / r.std(), atol=1e-6)


def test_batch_scope_normalizes_over_all_envs(patched: Any) -> None:
    trajs = parity_trajectories()
    outs = [response(t, EpisodeSpec(t.env_id, t.seed), "p", eos=0, logprobs=False, truncated=False) for t in trajs]
    maker = maker_for(make_args("reinforce"))
    patched(GymVerseConfig(norm="batch"))
    rows = by_row(maker.compute_advantages_and_returns(experiences(maker, [to_sample(o) for o in outs])))
    values = torch.cat([rows[i][1][rows[i][0].bool()] for i in range(len(trajs))]).double()
    per_env = [
        rows[i][1][rows[i][0].bool()] for i, t in enumerate(trajs) if t.env_id == trajs[0].env_id and rows[i][0].any()
    ]
    assert abs(float(torch.cat(per_env).mean())) > 1e-3  # not normalized per env
    assert values.numel() > 0 and torch.isfinite(values).all()


def test_void_samples_are_not_trained_by_openrlhfs_loss(patched: Any) -> None:
    """A void sample (no action token) in a micro-batch: OpenRLHF's per-sample KL mean is 0/0 (the hook zeroes
    that log), and OpenRLHF's `PolicyLoss` (token-mean and sequence-mean) stays finite with no gradient on it."""
    trajs = parity_trajectories()
    outs = [response(t, EpisodeSpec(t.env_id, t.seed), "p", eos=0, logprobs=False, truncated=False) for t in trajs]
    maker = maker_for(make_args("reinforce", micro_batch=len(trajs)))
    batches = experiences(maker, [to_sample(o) for o in outs])
    assert torch.isnan(batches[0].info["kl"]).any()  # what OpenRLHF's make_experience logs for a void sample
    patched(GymVerseConfig(norm="env"))
    (exp,) = maker.compute_advantages_and_returns(batches)
    assert not torch.isnan(exp.info["kl"]).any()
    void = exp.action_mask.sum(dim=-1) == 0
    assert int(void.sum()) == 3
    for token_level in (True, False):
        log_probs = torch.zeros_like(exp.advantages, requires_grad=True)
        loss, *_ = PolicyLoss(token_level_loss=token_level)(
            log_probs, torch.zeros_like(exp.advantages), exp.advantages, action_mask=exp.action_mask
        )
        loss.backward()
        assert torch.isfinite(loss) and log_probs.grad is not None
        assert not log_probs.grad[void].any() and log_probs.grad[~void].any()


def test_a_batch_with_no_trained_episode_is_refused(patched: Any) -> None:
    trajs = [t for t in parity_trajectories() if not EpisodeRecord.of(t).trained]
    outs = [response(t, EpisodeSpec(t.env_id, t.seed), "p", eos=0, logprobs=False, truncated=False) for t in trajs]
    maker = maker_for(make_args("reinforce"))
    patched(GymVerseConfig(norm="env"))
    with pytest.raises(RuntimeError, match="every episode of this rollout batch failed"):
        maker.compute_advantages_and_returns(experiences(maker, [to_sample(o) for o in outs]))


@pytest.mark.parametrize(
    ("estimator", "n_samples"),
    [("reinforce", 1), ("reinforce_baseline", 2), ("rloo", 2), ("group_norm", 2), ("dr_grpo", 2), ("gae", 1)],
)
def test_norm_off_leaves_openrlhf_unchanged(patched: Any, estimator: Any, n_samples: Any) -> None:
    samples = single_turn_samples([3, 5, 2, 4, 6, 1, 2, 3], [0.1 * i for i in range(8)], gymverse=True)
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
    patched(GymVerseConfig(norm="off"))
    assert em.RemoteExperienceMaker.__dict__["compute_advantages_and_returns"] is not original_method
    out = maker.compute_advantages_and_returns(copy.deepcopy(batches))
    for x, y in zip(reference, out):
        torch.testing.assert_close(y.advantages, x.advantages, rtol=0, atol=0)
        torch.testing.assert_close(y.returns, x.returns, rtol=0, atol=0)
        assert y.info.keys() == x.info.keys()


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
