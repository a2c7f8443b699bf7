"""The run the README tells users to launch, through verl's own config composition, `validate_config` and trainer
construction (no hand-made config, no ``object.__new__``), and the sync-mode guarantees that follow from it."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def readme_config(kit: Any) -> Any:
    return kit.compose(kit.readme_overrides())


def test_readme_command_composes_and_passes_verl_validation(readme_config: Any) -> None:
    from gymverse_verl import ADV_ESTIMATOR, TRAINER_MODE
    from gymverse_verl.settings import GymVerseSettings, check_verl_config
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    cfg = readme_config
    assert cfg.trainer.v1.trainer_mode == TRAINER_MODE and cfg.algorithm.adv_estimator == ADV_ESTIMATOR
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    check_verl_config(cfg)
    assert GymVerseSettings.from_config(cfg).curriculum.evolve is True


@pytest.mark.parametrize("mode", ["separate_async", "colocate_async", "sync"])
def test_modes_without_the_gymverse_trainer_are_refused_at_validation(kit: Any, mode: str) -> None:
    from gymverse_verl.settings import check_verl_config

    compose = kit.compose
    overrides = [o for o in kit.readme_overrides() if not o.startswith("trainer.v1.trainer_mode=")]
    cfg = compose([*overrides, f"trainer.v1.trainer_mode={mode}"])
    with pytest.raises(ValueError, match=rf"trainer_mode={mode} is not supported.*gymverse_sync"):
        check_verl_config(cfg)
    # plain GRPO on GymVerse envs without a curriculum needs nothing of the GymVerse trainer
    plain = [o for o in overrides if "gymverse." not in o and "adv_estimator" not in o]
    check_verl_config(compose([*plain, "algorithm.adv_estimator=grpo", f"trainer.v1.trainer_mode={mode}"]))


def test_kl_in_reward_with_perpo_is_refused_at_launch(kit: Any) -> None:
    """PERPO returns come from the env's turn rewards: a KL penalty folded into the reward would be dropped, so the
    trainer refuses to start (one line naming the setting); with GRPO, verl's KL-in-reward is left alone."""
    from gymverse_verl.settings import check_verl_config
    from verl.trainer.ppo.v1 import get_trainer_cls

    cfg = kit.compose(kit.with_overrides(kit.readme_overrides(), {"algorithm.use_kl_in_reward": True}))
    with pytest.raises(ValueError, match=r"^algorithm.use_kl_in_reward=true is not supported .*use_kl_loss=true$"):
        get_trainer_cls("gymverse_sync")(cfg)
    with pytest.raises(ValueError, match="use_kl_in_reward"):
        check_verl_config(cfg)  # what each agent-loop worker runs at start, too
    grpo = {"algorithm.use_kl_in_reward": True, "algorithm.adv_estimator": "grpo"}
    check_verl_config(kit.compose(kit.with_overrides(kit.readme_overrides(), grpo)))


@pytest.mark.usefixtures("ray_cluster")
@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")  # torch, on verl's lazy imports
def test_gymverse_trainer_is_verls_sync_path_and_resume_replays_nothing(
    readme_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import verl.trainer.ppo.v1.trainer_base as trainer_base
    from gymverse.curriculum import CHECKPOINT_FILE
    from gymverse_verl.trainer import GymVersePPOTrainer
    from omegaconf import OmegaConf
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
    from verl_cpu_standins import MarkerActorGroup

    cfg = OmegaConf.merge(readme_config, {"trainer": {"default_local_dir": str(tmp_path), "resume_mode": "auto"}})
    tq_calls: list[str] = []
    for name in ("save_checkpoint", "load_checkpoint", "kv_list", "kv_batch_get", "kv_clear"):
        monkeypatch.setattr(trainer_base.tq, name, lambda *a, _n=name, **k: tq_calls.append(_n), raising=False)

    trainer = get_trainer_cls(cfg.trainer.v1.trainer_mode)(cfg)  # what main_ppo's TaskRunnerV1 does
    assert isinstance(trainer, GymVersePPOTrainer)
    # every mode check in verl sees the synchronous trainer
    assert trainer.trainer_mode == "sync"
    assert type(trainer.replay_buffer) is ReplayBuffer and trainer.replay_buffer.trainer_mode == "sync"
    assert trainer.replay_buffer.gen_batch_size == cfg.data.train_batch_size  # async mode forces 1
    assert trainer.parameter_sync_step == cfg.trainer.v1.sync.get("parameter_sync_step", 1)

    trainer.actor_rollout_wg = MarkerActorGroup()
    trainer.train_dataloader = StatefulDataLoader(list(range(16)), batch_size=4)
    batches = iter(trainer.train_dataloader)
    trained = [next(batches), next(batches)]  # two steps' prompts consumed, then a checkpoint at step 2
    trainer.global_steps = 2
    trainer._save_checkpoint()
    step_dir = tmp_path / "global_step_2"
    assert sorted(p.name for p in step_dir.iterdir()) == sorted(["actor", "data.pt", CHECKPOINT_FILE])
    assert "save_checkpoint" not in tq_calls  # no TransferQueue snapshot: nothing to replay later

    resumed = get_trainer_cls(cfg.trainer.v1.trainer_mode)(cfg)
    resumed.actor_rollout_wg = MarkerActorGroup()
    resumed.train_dataloader = StatefulDataLoader(list(range(16)), batch_size=4)
    resumed._load_checkpoint()
    assert resumed.global_steps == 2 and resumed.actor_rollout_wg.loaded == ["2"]
    assert resumed._reissue_inflight_prompts() == 0
    assert tq_calls == []  # no TransferQueue state restored or re-issued
    after = list(resumed.train_dataloader)
    seen = [int(x) for b in trained for x in b]
    assert not {int(x) for b in after for x in b} & set(seen), "a prompt trained before the checkpoint came back"
    assert sorted(seen + [int(x) for b in after for x in b]) == list(range(16))


@pytest.mark.timeout(600)
def test_main_ppo_on_cpu_stops_at_verls_gpu_resource_check(kit: Any, tmp_path: Path) -> None:
    """``python -m verl.trainer.main_ppo`` with the README's overrides, a tiny local model and GymVerse data: on CPU
    verl itself gets through Hydra composition, ``validate_config``, its own Ray cluster, the TaskRunner actor
    (which loads the GymVerse plugin), ``tq.init``, the GymVerse trainer's construction, tokenizer and dataloaders,
    then stops where verl 0.9.1 requires GPUs: ``ResourcePoolManager.create_resource_pool`` always asks for GPU
    bundles (``use_gpu=True``, verl/single_controller/ray/base.py:210) and ``_check_resource_available``
    (base.py:226-243) raises. The README documents this cut (section "What runs on CPU")."""
    import subprocess

    import ray
    from gymverse_verl.dataset import main as gymverse_verl

    if ray.is_initialized():  # main_ppo starts its own cluster: one cluster at a time
        ray.shutdown()
    envs = "game:GuessTheNumber,logic:Nonogram"
    for split, n in (("train", "4"), ("val", "1")):
        out = str(tmp_path / f"{split}.parquet")
        assert gymverse_verl(["make-dataset", "--envs", envs, "--n", n, "--split", split, "--out", out]) == 0
    overrides = kit.with_overrides(
        kit.readme_overrides(),
        {
            "data.train_files": tmp_path / "train.parquet",
            "data.val_files": tmp_path / "val.parquet",
            "data.train_batch_size": 2,
            "actor_rollout_ref.model.path": kit.model_folder("qwen3", tmp_path / "model"),
            "actor_rollout_ref.actor.ppo_mini_batch_size": 2,
            "trainer.n_gpus_per_node": 1,
            "trainer.total_training_steps": 2,
            "trainer.logger": '["console"]',
            "trainer.default_local_dir": tmp_path / "ckpt",
            "data.dataloader_num_workers": 0,
            "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
            "ray_kwargs.ray_init.num_cpus": 2,
            "+ray_kwargs.ray_init.include_dashboard": False,
            "+ray_kwargs.ray_init.object_store_memory": 200 * 1024**2,
            "+gymverse.actor_name": f"cur-{uuid.uuid4().hex[:8]}",
        },
    )
    env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "PYTHONWARNINGS": "ignore"}
    run = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", *overrides],
        capture_output=True,
        text=True,
        timeout=540,
        env=env,
        cwd=tmp_path,
    )
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "Total available GPUs 0 is less than total desired GPUs 1" in out, out[-4000:]
    # how far verl got on CPU: its TaskRunner built the GymVerse trainer, its data and the TransferQueue
    assert "create_resource_pool" in out and "_check_resource_available" in out
    assert "train and validate dataloader initialized, train dataset size: 8, val dataset size: 2" in out
