"""PERPO through verl's own advantage step: the cross-adapter parity batch, and the estimator's contract."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
import torch


def verl_rows(kit: Any, tokenizer: Any, trajectories: list[Any], curriculum: Any, monkeypatch: Any) -> tuple[Any, list]:
    """The trajectories as verl stores them: the adapter's agent loop finishes each one (curriculum record +
    ``AgentLoopOutput``), verl's own ``AgentLoopWorkerTQ._agent_loop_postprocess`` writes it (as the TransferQueue
    rows it builds with ``list_of_dict_to_tensordict``). Returns the store and the keys."""
    import verl.trainer.ppo.v1.agent_loop_tq as agent_loop_tq
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from verl_cpu_standins import FakeTransferQueue

    store = FakeTransferQueue()
    monkeypatch.setattr(agent_loop_tq, "tq", store)
    worker_cls = AgentLoopWorkerTQ.__ray_metadata__.modified_class.__mro__[1]  # the class under @ray.remote
    worker = object.__new__(worker_cls)  # the worker's state its postprocess reads (text-only, no reward model)
    worker.processor, worker.tokenizer, worker.reward_loop_worker_handles = None, tokenizer, None
    worker.distillation_enabled = False

    async def main() -> list[str]:
        loop = kit.make_agent_loop(kit.make_config(), None, tokenizer)  # built in the worker's running event loop
        keys = []
        for i, traj in enumerate(trajectories):
            fields = {"global_steps": 1, "min_global_steps": 1, "max_global_steps": 1}  # what verl's server returns
            out = await loop.finish(traj, curriculum, False, server_fields=fields)
            row = kit.row(traj.env_id, traj.seed)
            kwargs = {"uid": f"u{i}", "session_id": 0, "global_steps": 1, **row}
            await worker._agent_loop_postprocess(out, False, **kwargs)
            keys.append(f"u{i}_0_0")
        return keys

    return store, asyncio.run(main())


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_parity_batch_through_agent_loop_postprocess_and_verls_advantage_step(
    kit: Any, tokenizer: Any, monkeypatch: pytest.MonkeyPatch, gamma: float
) -> None:
    """core's parity batch (wins, failures, horizon and length cuts, a crashed step, a reset failure, an aborted
    generation; two env ids) through the adapter's agent-loop output, verl's TransferQueue postprocess, the GymVerse
    trainer's ``_compute_advantage`` (-> verl's ``PPOTrainer._compute_advantage`` -> DataProto ->
    ``compute_advantage_for_multi_trajectories`` -> ``compute_advantage(adv_estimator=gymverse_perpo)``): the
    per-token advantages verl writes back equal core's `expected_advantages`, void rows train nothing, and the
    curriculum recorded exactly `expected_curriculum`."""
    import verl.trainer.ppo.v1.trainer_base as trainer_base
    from gymverse.curriculum import CurriculumOptions, CurriculumState, LocalCurriculum, success_by_env
    from gymverse.failures import VOID_STOPS
    from gymverse.testing.parity import expected_advantages, expected_curriculum, parity_trajectories, report
    from gymverse_verl import trainer as gv_trainer
    from gymverse_verl.settings import GymVerseSettings
    from gymverse_verl.trainer import GymVersePPOTrainer
    from omegaconf import OmegaConf
    from transfer_queue import KVBatchMeta

    trajs = parity_trajectories()
    state = CurriculumState.from_config(CurriculumOptions(evolve=True).to_config())
    store, keys = verl_rows(kit, tokenizer, trajs, LocalCurriculum(state), monkeypatch)
    recorded = dict(success_by_env(state._pending.values()))
    assert recorded == expected_curriculum(trajs)

    monkeypatch.setattr(trainer_base, "tq", store)
    monkeypatch.setattr(gv_trainer, "tq", store)
    t = object.__new__(GymVersePPOTrainer)  # verl's trainer state that its advantage step reads
    t.config = OmegaConf.create(
        {
            "algorithm": {"adv_estimator": "gymverse_perpo", "gamma": gamma, "lam": 1.0, "use_kl_in_reward": False},
            "actor_rollout_ref": {"rollout": {"n": 1}},
        }
    )
    t.gymverse = GymVerseSettings()
    t._compute_advantage(KVBatchMeta(partition_id="train", keys=keys, tags=[{}] * len(keys)), {})

    computed = []
    for key, traj, want in zip(keys, trajs, expected_advantages(trajs, gamma=gamma), strict=True):
        row = store.rows[key]
        got, mask = row["advantages"].numpy(), row["response_mask"].numpy()
        computed.append(got[: len(want)])
        assert got.shape == mask.shape == (max(1, len(want)),)  # a reset failure keeps one masked filler token
        np.testing.assert_allclose(got[: len(want)], want, rtol=0, atol=1e-6, err_msg=traj.stop_reason)
        assert not got[len(want) :].any()
        void = traj.stop_reason in VOID_STOPS
        assert (not mask.any()) == void and (not row["loss_mask"].numpy().any()) == void, traj.stop_reason
        if not void:
            assert got[mask == 1].any() and not got[mask == 0].any()
    if gamma == 1.0:
        report("verl", computed, recorded)  # .ci/compare_parity.py compares the four adapters


def batch_data() -> dict[str, Any]:
    """Four rows: two GymVerse episodes of one env (one with a turn past the mask's end), a void one, and a row
    that is not a GymVerse episode (no record)."""
    from gymverse.rollout import EpisodeRecord

    masks = [[1, 1, 0, 1, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]]
    records = [
        EpisodeRecord("game:A", (0.0, 1.0), (2, 4), episode_id="e0"),
        EpisodeRecord("game:A", (0.5, 1.0), (6, 9), "length", episode_id="e1"),  # 2nd turn cut by the length cap
        EpisodeRecord("game:A", (0.3,), (2,), "env_error", episode_id="e2"),
        None,
    ]
    scores = torch.zeros(4, 6)
    scores[3, 2] = 0.7
    return {"masks": torch.tensor(masks), "records": records, "uids": ["u0", "u0", "u2", "u3"], "scores": scores}


def verl_data(d: dict[str, Any]) -> Any:
    from verl import DataProto

    return DataProto.from_dict(
        tensors={"token_level_rewards": d["scores"].clone(), "response_mask": d["masks"].clone()},
        non_tensors={"uid": np.array(d["uids"], dtype=object)},
    )


def test_estimator_is_core_perpo_on_the_rows_episode_batch() -> None:
    """verl's ``compute_advantage`` with ``gymverse_perpo`` = `gymverse.perpo.advantages` of the `EpisodeBatch`
    built from the records and verl's mask; a row without a record is one turn with its summed reward."""
    from gymverse.perpo import advantages
    from gymverse.rollout import EpisodeBatch, EpisodeRecord
    from gymverse_verl.advantage import Rows, episode_rows
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage

    d = batch_data()
    extra = [{"gymverse": r.to_dict(), "global_steps": 1} if r else {"turn_scores": []} for r in d["records"]]
    rows = Rows.read(d["uids"], extra)
    assert rows.records[:3] == d["records"][:3] and rows.records[3] is None
    with episode_rows(rows):
        out = compute_advantage(verl_data(d), adv_estimator="gymverse_perpo", gamma=0.9, config=AlgoConfig(gamma=0.9))
    single = EpisodeRecord.single_turn("uid:u3", 0.7, 6)
    want = advantages(EpisodeBatch.of([*d["records"][:3], single], d["masks"]), gamma=0.9)
    torch.testing.assert_close(out.batch["advantages"], torch.as_tensor(want.tokens).float())
    torch.testing.assert_close(out.batch["returns"], torch.as_tensor(want.token_returns).float())
    assert out.batch["advantages"].dtype == torch.float32
    assert not out.batch["advantages"][2].any() and not out.batch["advantages"][d["masks"] == 0].any()
    assert out.batch["returns"][0, 0] == pytest.approx(0.0 + 0.9 * 1.0)


def test_estimator_refuses_to_guess() -> None:
    from gymverse_verl.advantage import Rows, episode_rows
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage

    d = batch_data()
    with pytest.raises(RuntimeError, match="trainer_mode=gymverse_sync"):
        compute_advantage(verl_data(d), adv_estimator="gymverse_perpo", config=AlgoConfig())
    shuffled = Rows(list(reversed(d["uids"])), d["records"])
    with episode_rows(shuffled), pytest.raises(RuntimeError, match="uid mismatch"):
        compute_advantage(verl_data(d), adv_estimator="gymverse_perpo", config=AlgoConfig())
    short = Rows(d["uids"][:3], d["records"][:3])
    with episode_rows(short), pytest.raises(RuntimeError, match="uid mismatch"):
        compute_advantage(verl_data(d), adv_estimator="gymverse_perpo", config=AlgoConfig())
    with pytest.raises(ValueError, match="episode record"):
        Rows.read(["u0"], [{"gymverse": {"env_id": "game:A", "turn_rewards": [1.0]}}])  # no turn_ends
