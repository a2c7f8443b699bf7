"""The cross-adapter parity batch (`gymverse.testing.parity`) through RL2 0.0.2's real rollout and advantage path.

The parity episodes are replayed in place of `run_episode` inside the adapter's own `play` (curriculum and
session handling stay real) under RL2's real ``Rollout.__call__`` (wrapped by the adapter; its per-sample
``Rollout.rollout`` is the adapter's), which filters and packs RL2's batch; then RL2's ``compute_advantages`` as
patched by the adapter. Only the SGLang engine (memory-release request) is stood in (`cpu_rollout`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import gymverse.testing.vectest  # noqa: F401  (registers the vectest: envs)
import gymverse_rl2.episodes as episodes
import numpy as np
import pytest
import torch
from gymverse.curriculum import CurriculumState
from gymverse.curriculum.options import CurriculumOptions
from gymverse.rollout import ByteTokenizer, EpisodeRecord, EpisodeSpec
from gymverse.testing.parity import expected_advantages, expected_curriculum, parity_trajectories, report
from gymverse.trajectory import Trajectory
from gymverse_rl2.patch import install, perpo_advantages, uninstall
from gymverse_rl2.settings import Settings
from gymverse_rl2.train import launch_settings
from rl2_harness import cpu_rollout, rl2_config


@pytest.fixture(scope="module")
def parity() -> list[Trajectory]:
    return parity_trajectories()


@pytest.fixture
def rolled(
    parity: list[Trajectory], dist_group: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, list[bool]]]]:
    import RL2.trainer.ppo as ppo

    by_seed = {t.seed: t for t in parity}

    async def replay(session: Any, generate: Any, **kwargs: Any) -> Trajectory:
        return by_seed[kwargs["seed"]]

    monkeypatch.setattr(episodes, "run_episode", replay)
    recorded: dict[str, list[bool]] = {}
    end_step = CurriculumState.end_step

    def spy(self: CurriculumState) -> Any:
        for out in self._pending.values():
            recorded.setdefault(out.env_id, []).append(out.success)
        return end_step(self)

    monkeypatch.setattr(CurriculumState, "end_step", spy)
    config = rl2_config(
        [
            "actor.model_name=unused",
            f"train_data.prompts_per_rollout={len(parity) // 2}",
            "train_data.responses_per_prompt=2",
            "actor.max_length_per_device=4096",
            "rollout.dynamic_filtering=false",
        ]
    )
    loop = asyncio.new_event_loop()  # RL2 0.0.2 runs rollouts on `asyncio.get_event_loop()`
    asyncio.set_event_loop(loop)
    install(launch_settings(config, Settings(perpo=True, curriculum=CurriculumOptions(evolve=True))))
    try:
        rollout = cpu_rollout(config, ByteTokenizer(), monkeypatch)
        data = [{"extra_info": EpisodeSpec(t.env_id, t.seed).to_dict()} for t in parity]
        tensor_dict, cu_seqs = rollout(data, True, 1)
        ppo.compute_advantages(config.adv, tensor_dict, cu_seqs, 1)  # the adapter's PERPO hook on RL2's own
        yield tensor_dict, cu_seqs, recorded
    finally:
        uninstall()
        asyncio.set_event_loop(None)
        loop.close()


def test_parity_batch_through_rl2(
    parity: list[Trajectory], rolled: tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, list[bool]]]
) -> None:
    tensor_dict, cu_seqs, recorded = rolled
    assert cu_seqs.tolist() == list(range(len(parity) + 1))  # one RL2 row per episode, in dataset order
    want = expected_advantages(parity)
    adv = tensor_dict["advantages"]
    computed = []
    for b, traj in enumerate(parity):
        assert traj.tokens is not None
        start = len(traj.tokens.prompt_ids) - 1  # RL2 shifts tokens by one (states[:-1], actions[1:])
        got = adv[b, start : start + len(want[b])].double().numpy()
        computed.append(got)
        np.testing.assert_allclose(got, want[b], atol=1e-6, err_msg=traj.episode_id)
        assert float(adv[b].abs().sum()) == pytest.approx(float(np.abs(want[b]).sum()), abs=1e-5)
        if not EpisodeRecord.of(traj).trained:  # void: no trained token in RL2's action mask
            assert int(tensor_dict["action_mask"][b].sum()) == 0, traj.stop_reason
    assert float(adv.abs().sum()) > 0
    assert {e: sorted(v) for e, v in recorded.items()} == {e: sorted(v) for e, v in expected_curriculum(parity).items()}
    report("rl2", computed, recorded)  # .ci/compare_parity.py compares the four adapters


def test_trajectory_split_over_rows_gets_the_same_advantages(
    parity: list[Trajectory], rolled: tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, list[bool]]]
) -> None:
    """RL2 head splits a trajectory into several rows when its prompt stops being a prefix: the turn ends come
    from the rows laid end to end (`turn_ends_from_mask`), so advantages are the same."""
    tensor_dict, cu_seqs, _ = rolled
    records = [EpisodeRecord.of(t) for t in parity]
    width = tensor_dict["action_mask"].shape[1]
    half = (width + 1) // 2
    split = {k: torch.zeros((2 * len(parity), half), dtype=v.dtype) for k, v in tensor_dict.items()}
    for k, v in tensor_dict.items():
        padded = torch.cat([v, torch.zeros((v.shape[0], 2 * half - width), dtype=v.dtype)], 1)
        split[k] = padded.reshape(2 * len(parity), half)
    two = perpo_advantages(split, torch.arange(0, 2 * len(parity) + 1, 2), records)
    one = perpo_advantages(tensor_dict, cu_seqs, records)
    assert torch.allclose(two.reshape(len(parity), 2 * half)[:, :width], one, atol=1e-6)
    assert torch.allclose(one, tensor_dict["advantages"], atol=1e-6)
    for a, b in itertools.pairwise(range(0, 2 * len(parity) + 1, 2)):
        assert two[a:b].shape == (2, half)
