"""`GymVersePPOTrainer` on verl's real advantage step: agent-loop outputs stored the way verl's TransferQueue
agent-loop manager stores them, read back by verl's own ``PPOTrainer._compute_advantage``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import numpy as np
import pytest
import torch


def rollouts(kit: Any, tokenizer: Any, env_id: str, policy: Any, seeds: list[int], **cfg: Any) -> list[Any]:
    config = kit.make_config(**cfg)
    server = kit.ScriptedServer(tokenizer, policy=policy)

    async def main() -> list[Any]:
        loops = [kit.make_agent_loop(config, server, tokenizer) for _ in seeds]
        return list(await asyncio.gather(*(lp.run({}, **kit.row(env_id, s)) for lp, s in zip(loops, seeds))))

    return asyncio.run(main())


def expected_advantages(outs: list[Any]) -> list[np.ndarray]:
    """core's PERPO on the episodes' records and masks (what the verl path must reproduce)."""
    from gymverse.perpo import advantages
    from gymverse.rollout import EpisodeBatch, EpisodeRecord

    width = max(len(o.response_mask) for o in outs)
    mask = np.zeros((len(outs), width), dtype=np.int64)
    for b, o in enumerate(outs):
        mask[b, : len(o.response_mask)] = o.response_mask
    records = [EpisodeRecord.from_dict(o.extra_fields["gymverse"]) for o in outs]
    tokens = np.asarray(advantages(EpisodeBatch.of(records, mask)).tokens)
    return [tokens[b, : len(o.response_mask)] for b, o in enumerate(outs)]


@pytest.mark.usefixtures("ray_cluster")
def test_trainer_groups_by_env_and_steps_curriculum(kit: Any, tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import gymverse_verl.trainer as gv_trainer
    import verl.trainer.ppo.v1.trainer_base as trainer_base
    from gymverse.envs.game.guess_number import GuessTheNumber
    from gymverse.registry import register
    from gymverse_verl.settings import GymVerseSettings
    from gymverse_verl.trainer import GymVersePPOTrainer
    from omegaconf import OmegaConf
    from transfer_queue import KVBatchMeta
    from verl_cpu_standins import FakeTransferQueue

    register("tests:GuessTwin", GuessTheNumber, override=True)
    section = {"evolve": True, "actor_name": f"cur-{uuid.uuid4().hex[:8]}", "patience": 1}
    # the agent loops record every finished episode in the run's curriculum actor (before verl filters anything)
    solved = rollouts(kit, tokenizer, "game:GuessTheNumber", kit.guess_policy, [1, 1, 2, 2], **section)
    stuck = rollouts(
        kit, tokenizer, "tests:GuessTwin", lambda p: "\\boxed{2}" if "low" in p else "\\boxed{1}", [3, 3], **section
    )
    outs = solved + stuck

    fake = FakeTransferQueue()
    keys = []
    for i, o in enumerate(outs):
        uid = f"p{i // 2}"
        key = f"{uid}_{i % 2}_0"  # {uid}_{session}_{index}, as verl's agent-loop manager writes it
        keys.append(key)
        field = o.as_dict()
        field.update({"uid": uid, "session_id": i % 2, "data_source": o.extra_fields["gymverse"]["env_id"]})
        fake.rows[key] = field
    monkeypatch.setattr(trainer_base, "tq", fake)
    monkeypatch.setattr(gv_trainer, "tq", fake)

    def fake_step(self: Any, metrics: dict, timing_raw: dict) -> Any:  # verl's step minus the GPU stages
        return self._compute_advantage(KVBatchMeta(partition_id="train", keys=keys, tags=[{}] * len(keys)), metrics)

    monkeypatch.setattr(trainer_base.PPOTrainer, "step", fake_step)
    config = OmegaConf.create(
        {
            "algorithm": {"adv_estimator": "gymverse_perpo", "gamma": 1.0, "lam": 1.0, "use_kl_in_reward": False},
            "actor_rollout_ref": {"rollout": {"n": 2}},
            "gymverse": section,
        }
    )
    t = object.__new__(GymVersePPOTrainer)
    t.config, t.gymverse = config, GymVerseSettings.from_dict(section)
    metrics: dict[str, Any] = {}
    t.step(metrics, {})

    for key, o, want in zip(keys, outs, expected_advantages(outs)):
        got = fake.rows[key]["advantages"]
        assert got.shape[0] == len(o.response_ids)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
        assert torch.all(got[torch.tensor(o.response_mask) == 0] == 0)
    assert metrics["gymverse/game:GuessTheNumber/success"] == 1.0
    assert metrics["gymverse/tests:GuessTwin/success"] == 0.0
    # one curriculum update per step, from the step's episodes (each counted once)
    assert metrics["gymverse/game:GuessTheNumber/complexity"] == 2
    assert t._curriculum.state_dict()["controller"]["num_updates"] == 1
    assert t._curriculum.end_step().episodes == 0  # the next step starts empty
    t._curriculum.stop()


@pytest.mark.usefixtures("ray_cluster")
@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")  # torch, on verl's lazy imports
def test_curriculum_counts_rollouts_not_the_filtered_padded_batch(
    kit: Any, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verl's dynamic filtering drops all-success groups and pads the batch with copies of a row; the curriculum
    must still see every episode once (promotions at >= 0.8 happen) and never a padding row."""
    import verl.trainer.ppo.v1.trainer_base as trainer_base
    from gymverse.envs.game.guess_number import GuessTheNumber
    from gymverse.registry import register
    from verl.trainer.ppo.v1 import get_trainer_cls

    register("tests:GuessTwin", GuessTheNumber, override=True)
    name = f"cur-{uuid.uuid4().hex[:8]}"
    overrides = [o for o in kit.readme_overrides() if "gymverse.horizon" not in o]
    trainer = get_trainer_cls("gymverse_sync")(
        kit.compose([*overrides, f"+gymverse.actor_name={name}", "+gymverse.patience=1"])
    )
    section = {"evolve": True, "actor_name": name, "patience": 1}
    solved = rollouts(kit, tokenizer, "game:GuessTheNumber", kit.guess_policy, [1, 1], **section)
    stuck = rollouts(
        kit, tokenizer, "tests:GuessTwin", lambda p: "\\boxed{2}" if "low" in p else "\\boxed{1}", [3, 3], **section
    )
    assert all(o.extra_fields["gymverse"]["success"] for o in solved)
    assert not any(o.extra_fields["gymverse"]["success"] for o in stuck)

    trained: list[Any] = []

    def filtered_padded_step(self: Any, metrics: dict, timing_raw: dict) -> Any:
        # what verl's step trains after dynamic filtering (the all-success group is gone) and padding (a copy of a
        # row): the GymVerse trainer must not take the curriculum signal from it
        trained.extend([*stuck, stuck[0]])
        return None

    monkeypatch.setattr(trainer_base.PPOTrainer, "step", filtered_padded_step)
    metrics: dict[str, Any] = {}
    trainer.step(metrics, {})
    assert metrics["gymverse/game:GuessTheNumber/success"] == 1.0  # seen although its group was never trained
    assert metrics["gymverse/tests:GuessTwin/success"] == 0.0  # 0/2, the padding copy not counted
    assert metrics["gymverse/game:GuessTheNumber/complexity"] == 2  # promoted
    assert len(trained) == 3 and trainer._curriculum.state_dict()["controller"]["num_updates"] == 1
    assert trainer._curriculum.end_step().episodes == 0  # the 4 episodes were counted in the step, once
    trainer._curriculum.stop()
