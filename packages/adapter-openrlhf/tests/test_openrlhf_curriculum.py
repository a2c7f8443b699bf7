"""Complexity evolution through the named Ray actor: read at reset, updated from reported success, persisted."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import warnings
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import ray
from gymverse_openrlhf import curriculum
from gymverse_openrlhf.agent_func import AgentExecutor
from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig, split_argv
from gymverse_openrlhf.labels import dataset_rows, initial_observation
from gymverse_openrlhf.patch import (
    JOB_CONFIG_VAR,
    driver_runtime_env,
    patch_experience_maker,
    patch_trainer,
    runtime_env,
    unpatch_experience_maker,
    unpatch_trainer,
)
from gymverse_openrlhf.train import prepare
from openrlhf.trainer.ppo_utils import experience_maker as em
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

ENV = "game:GuessTheNumber"


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield
    with warnings.catch_warnings():
        # Ray's shutdown leaves its Popen handles for the garbage collector ("subprocess is still running")
        warnings.simplefilter("ignore", ResourceWarning)
        ray.shutdown()
        gc.collect()


def episode(tokenizer: Any, engine_cls: Any, sampling_params: Any, row: dict[str, str], actions: list[str]) -> Any:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": row["prompt"]}], tokenize=False, add_generation_prompt=True
    )
    engine = engine_cls(tokenizer, actions)
    return asyncio.run(
        AgentExecutor().execute(
            prompt=prompt,
            label=row["label"],
            sampling_params=sampling_params,
            max_length=4096,
            hf_tokenizer=tokenizer,
            llm_engine=engine,
        )
    )


def oracle_actions(level: int, seed: int) -> list[str]:
    import gymverse

    env = gymverse.make(ENV, complexity=level)
    env.reset(seed=seed)
    actions = []
    while not env.done:
        actions.append(env.solve())
        env.step(actions[-1])
    return actions


def test_levels_flow_from_success_to_reset_and_checkpoint(
    ray_cluster: Any, tokenizer: Any, engine_cls: Any, sampling_params: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    cfg = GymVerseConfig(norm="env", evolve=True, patience=1, ckpt_path=str(tmp_path))
    monkeypatch.setenv(ENV_VAR, cfg.to_json())
    curriculum.reset_handle()
    curriculum.create_actor(cfg)  # what the launcher does; it keeps no handle (the actor is detached)
    gc.collect()
    rows = list(dataset_rows([ENV], 3, seed=20))  # built at the env's default level (1)

    outs = [episode(tokenizer, engine_cls, sampling_params, r, oracle_actions(1, 20 + i)) for i, r in enumerate(rows)]
    assert [o["extra_logs"]["gymverse_complexity"] for o in outs] == [1, 1, 1]
    assert all(o["scores"] == 1.0 for o in outs)
    service = curriculum.get_service()
    assert service.state_dict()["controller"]["num_updates"] == 0  # recorded, the step not closed yet

    # the trainer's advantage step closes the step: 3/3 >= 0.8 with patience 1 -> level 2
    samples = [SamplesGenerator._process_response_into_experience(None, o, max_len=4096) for o in outs]
    args = SimpleNamespace(
        algo=SimpleNamespace(advantage=SimpleNamespace(estimator="reinforce", gamma=1.0, lambd=1.0, no_std_norm=False)),
        rollout=SimpleNamespace(n_samples_per_prompt=1, micro_batch_size=2),
        reward=SimpleNamespace(clip_range=(-10.0, 10.0)),
        train=SimpleNamespace(dynamic_batch_enable=False),
    )
    maker = em.RemoteExperienceMaker(
        None, None, None, None, FixedKLController(0.0), SimpleNamespace(args=args), tokenizer
    )
    batches = maker.split_rollout_samples(samples)
    for exp in batches:
        exp.kl = exp.action_mask.float() * 0
    patch_experience_maker(em, cfg)
    try:
        maker.compute_advantages_and_returns(batches)
    finally:
        unpatch_experience_maker(em)
    assert service.levels() == {ENV: 2}

    # the next reset runs at level 2: the stale level-1 observation in the dataset prompt is swapped out
    out = episode(tokenizer, engine_cls, sampling_params, rows[0], oracle_actions(2, 20))
    assert out["extra_logs"]["gymverse_complexity"] == 2
    assert out["scores"] == 1.0
    text = tokenizer.decode(out["observation_tokens"])
    old, new = initial_observation(ENV, 20, None), initial_observation(ENV, 20, 2)
    assert old != new
    assert new in text
    assert old not in text

    # OpenRLHF's own checkpoint step saves the state next to its checkpoints (patched BasePPOTrainer)
    from openrlhf.trainer import ppo_trainer

    patch_trainer(ppo_trainer, cfg)
    trainer = SimpleNamespace(
        args=SimpleNamespace(logger=SimpleNamespace(logging_steps=1), ckpt=SimpleNamespace(save_steps=5, path="x")),
        wandb_logger=None,
        tensorboard_logger=None,
        best_eval_metric_key="",
        best_eval_metric_value=float("-inf"),
        _latest_eval_metric_value=None,
        actor_model_group=SimpleNamespace(async_run_method=lambda **kw: []),
        critic_model_group=None,
    )
    # the class Ray runs for the PPOTrainer actor holds its own copy of the method (Ray's tracing wrappers)
    actor_cls = ppo_trainer.PPOTrainer.__ray_metadata__.modified_class
    save = actor_cls.save_logs_and_checkpoints
    try:
        assert getattr(save, "_gymverse", False)
        save(trainer, 3, {})
        assert not os.path.exists(curriculum.state_path(str(tmp_path)))  # not a checkpoint step
        save(trainer, 5, {})
    finally:
        unpatch_trainer(ppo_trainer)
    assert not getattr(actor_cls.save_logs_and_checkpoints, "_gymverse", False)
    with open(curriculum.state_path(str(tmp_path))) as fh:
        saved = json.load(fh)
    assert saved["global_step"] == 5
    assert saved["controller"]["envs"][ENV]["level"] == 2

    # a resumed run (--ckpt.load_enable) restarts the actor from that file; a fresh run starts over
    curriculum.reset_handle()
    resumed = curriculum.create_actor(GymVerseConfig(evolve=True, patience=1, ckpt_path=str(tmp_path), load=True))
    assert resumed.episode_config(ENV).complexity == 2
    fresh = curriculum.create_actor(GymVerseConfig(evolve=True, patience=1, ckpt_path=str(tmp_path)))
    assert fresh.levels() == {}
    fresh.stop()
    curriculum.reset_handle()


def test_missing_actor_is_a_clear_error(ray_cluster: Any) -> None:
    curriculum.reset_handle()
    with pytest.raises(RuntimeError, match=r"gymverse_openrlhf\.train"):
        curriculum.get_service()


def test_launcher_splits_flags_and_passes_openrlhf_args_through(tmp_path: Any) -> None:
    argv = [
        "--actor.model_name_or_path",
        "m",
        "--gymverse.norm",
        "env",
        "--ckpt.path",
        str(tmp_path),
        "--gymverse.evolve",
        "--gymverse.patience=2",
        "--ckpt.load_enable",
    ]
    cfg, rest = prepare(argv)
    assert cfg == GymVerseConfig(norm="env", evolve=True, patience=2, ckpt_path=str(tmp_path), load=True)
    assert rest[:5] == ["--actor.model_name_or_path", "m", "--ckpt.path", str(tmp_path), "--ckpt.load_enable"]
    assert rest[5] == "--train.agent_func_path" and rest[6].endswith("agent_func.py")
    env = runtime_env(cfg)
    assert env["worker_process_setup_hook"] == "gymverse_openrlhf.patch.setup_worker"
    assert GymVerseConfig.from_json(env["env_vars"][ENV_VAR]) == cfg
    # GymVerse off: the command line reaches OpenRLHF untouched
    default_ckpt = os.path.abspath("./ckpt/checkpoints_ppo_ray")
    assert prepare(["--a", "1"]) == (GymVerseConfig(ckpt_path=default_ckpt), ["--a", "1"])
    with pytest.raises(SystemExit, match=r"--gymverse\.nrom"):
        split_argv(["--gymverse.nrom", "env"])
    with pytest.raises(SystemExit):
        split_argv(["--gymverse.norm", "grpo"])


def test_submitted_job_runtime_env_is_completed_not_overridden() -> None:
    cfg = GymVerseConfig(norm="env")
    ours = runtime_env(cfg)
    assert driver_runtime_env(cfg, {}) == ours
    job = {"runtime_env": {"env_vars": {"NCCL_DEBUG": "INFO"}, "pip": ["x"]}}
    merged = driver_runtime_env(cfg, {JOB_CONFIG_VAR: json.dumps(job)})
    assert "NCCL_DEBUG" not in merged["env_vars"]  # the job's value stays in charge
    assert merged["env_vars"][ENV_VAR] == cfg.to_json()
    assert merged["worker_process_setup_hook"] == ours["worker_process_setup_hook"]
    same = {"runtime_env": ours}
    assert driver_runtime_env(cfg, {JOB_CONFIG_VAR: json.dumps(same)}) == {"env_vars": {}}
    other_hook = {"runtime_env": {"worker_process_setup_hook": "lab.setup"}}
    with pytest.raises(RuntimeError, match=r"worker_process_setup_hook='lab\.setup'"):
        driver_runtime_env(cfg, {JOB_CONFIG_VAR: json.dumps(other_hook)})
    other_cfg = {"runtime_env": runtime_env(GymVerseConfig(norm="batch"))}
    with pytest.raises(RuntimeError, match="differs"):
        driver_runtime_env(cfg, {JOB_CONFIG_VAR: json.dumps(other_cfg)})


def test_launcher_start_leaves_a_detached_curriculum_that_survives_and_resumes(
    ray_cluster: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    """The real launcher `start()` keeps no handle: the named actor must outlive it and resume from the checkpoint."""
    from gymverse_openrlhf import train
    from openrlhf.trainer import ppo_trainer

    monkeypatch.delenv(ENV_VAR, raising=False)
    cfg, rest = prepare(["--gymverse.evolve", "--gymverse.patience", "1", "--ckpt.path", str(tmp_path)])
    assert cfg.evolve
    assert "--train.agent_func_path" in rest  # OpenRLHF's main gets our agent
    curriculum.reset_handle()
    try:
        train.start(cfg)  # what `python -m gymverse_openrlhf.train` runs before OpenRLHF's main
        curriculum.reset_handle()
        gc.collect()  # every driver-side handle is gone; a non-detached actor would be collected here
        service = curriculum.get_service()
        from gymverse.curriculum.service import DEFAULT_NAMESPACE

        assert ray.get_actor(curriculum.CURRICULUM_ACTOR, namespace=DEFAULT_NAMESPACE) is not None
        assert service.episode_config(ENV).complexity == cfg.initial_level
        from gymverse.curriculum.state import EpisodeOutcome

        service.record([EpisodeOutcome(f"e{i}", ENV, True) for i in range(3)])
        service.end_step()  # 3/3 successes, patience 1 -> promoted
        assert service.levels() == {ENV: cfg.initial_level + 1}
        service.save(curriculum.state_path(str(tmp_path)))
        service.stop()
        curriculum.reset_handle()

        resumed_cfg, _ = prepare(
            ["--gymverse.evolve", "--gymverse.patience", "1", "--ckpt.path", str(tmp_path), "--ckpt.load_enable"]
        )
        assert resumed_cfg.load
        train.start(resumed_cfg)
        curriculum.reset_handle()
        gc.collect()
        assert curriculum.get_service().episode_config(ENV).complexity == cfg.initial_level + 1
    finally:
        curriculum.get_service().stop()
        curriculum.reset_handle()
        unpatch_trainer(ppo_trainer)
        unpatch_experience_maker(em)
