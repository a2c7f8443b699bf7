"""verl's own training run on CPU: ``TaskRunnerV1.run`` -> ``PPOTrainer.fit`` -> ``step`` with GymVerse's agent loop.

Everything is verl's real code except what needs a GPU (`verl_cpu_standins`: the vLLM server replica, the FSDP
actor worker group and the ``_setup`` lines that create them): the TransferQueue (``tq.init`` on a small local Ray
cluster), verl's ``AgentLoopWorkerTQ`` Ray actor running `GymVerseAgentLoop`, the router and ``LLMServerClient``,
the replay buffer, ``_agent_loop_postprocess``, the advantage step with ``gymverse_perpo``, ``_compute_metrics``,
``CheckpointEngineManager`` and checkpoint save/resume, with `GymVersePPOTrainer` built from verl's Hydra defaults
plus the README's overrides and the real Qwen3 chat template in thinking mode. `verl_cpu_run` records which verl
functions ran (in this process and in the Ray workers); the test asserts the list.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import verl_cpu_run
import verl_cpu_standins
from gymverse.curriculum import CHECKPOINT_FILE
from verl_cpu_run import CALL_LOG, Recorder, driver_calls, run_task_runner, worker_counts, worker_setup_hook
from verl_cpu_standins import CPUActorGroup, ScriptedLLMServer, make_cpu_setup

GUESS, NONOGRAM = "game:GuessTheNumber", "logic:Nonogram"


def scripted_policy(guess: Callable[[str], str]) -> Callable[[str], str]:
    """Solve GuessTheNumber with the oracle, answer every other env (Nonogram) with a losing move."""
    return lambda prompt: guess(prompt) if "between 1 and" in prompt else "\\boxed{row 1 1 1 1 1}"


@pytest.fixture
def traced_cluster(kit: Any, tmp_path: Path) -> Iterator[Path]:
    """A local Ray cluster of its own (small limits) whose workers record verl calls into one log file."""
    import ray

    if ray.is_initialized():  # the session's cluster: one cluster at a time
        ray.shutdown()
    log = tmp_path / "verl_calls.log"
    shipped = {__name__, verl_cpu_run.__name__, verl_cpu_standins.__name__, kit.guess_policy.__module__}
    for module in shipped:  # Ray workers cannot import test modules: their functions travel by value
        ray.cloudpickle.register_pickle_by_value(sys.modules[module])
    os.environ[CALL_LOG] = str(log)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 1024**2,
        namespace=f"gymverse-step-{uuid.uuid4().hex[:6]}",
        runtime_env={"worker_process_setup_hook": worker_setup_hook, "env_vars": {CALL_LOG: str(log)}},
    )
    try:
        yield log
    finally:
        os.environ.pop(CALL_LOG, None)
        ray.shutdown()


def run_config(kit: Any, tmp_path: Path, model: Path, steps: int, actor_name: str) -> Any:
    """The README's command with this machine's sizes (tiny model, 2 prompts x 2 samples, 1 storage unit)."""
    from gymverse_verl.dataset import main as gymverse_verl

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    if not (data / "train.parquet").exists():
        envs = f"{GUESS},{NONOGRAM}"
        assert gymverse_verl(["make-dataset", "--envs", envs, "--n", "4", "--out", str(data / "train.parquet")]) == 0
        val = ["make-dataset", "--envs", envs, "--n", "1", "--seed", "1", "--split", "val"]
        assert gymverse_verl([*val, "--out", str(data / "val.parquet")]) == 0
    return kit.compose(
        kit.with_overrides(
            kit.readme_overrides(),
            {
                "data.train_files": data / "train.parquet",
                "data.val_files": data / "val.parquet",
                "data.train_batch_size": 2,
                "data.max_prompt_length": 1024,
                "data.max_response_length": 512,
                "+data.apply_chat_template_kwargs.enable_thinking": True,  # Qwen3 in thinking mode
                "actor_rollout_ref.model.path": model,
                "actor_rollout_ref.actor.ppo_mini_batch_size": 1,
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 1,
                "actor_rollout_ref.rollout.n": 2,
                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 1,
                "actor_rollout_ref.rollout.agent.num_workers": 1,
                # GymVerse episodes carry their reward (reward_score), so verl never calls its reward workers
                # for them (AgentLoopWorker._compute_score); none are started here, which saves a process
                "reward.num_workers": 0,
                "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
                "transfer_queue.backend.SimpleStorage.total_storage_size": 1000,
                "trainer.n_gpus_per_node": 1,
                "trainer.total_training_steps": steps,
                "trainer.save_freq": 1,
                "trainer.logger": '["console"]',
                "trainer.default_local_dir": tmp_path / "ckpt",
                "trainer.resume_mode": "auto",
                "+gymverse.actor_name": actor_name,
                "+gymverse.patience": 1,
                # binary search needs up to 5 guesses at level 2 (1..20): the README's first cap of 4 would cut it
                "+gymverse.horizon": "[8,12]",
            },
        )
    )


@pytest.mark.timeout(900)  # two TaskRunner runs, each starting verl's Ray actors (TransferQueue, agent-loop worker)
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning", "ignore::FutureWarning")
def test_verl_trains_on_cpu_through_its_own_step(
    kit: Any, tmp_path: Path, traced_cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray
    import verl.trainer.ppo.v1.trainer_base as trainer_base
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    model = kit.model_folder("qwen3", tmp_path / "tiny-qwen3")
    thinking = lambda p: "<think>\nhalve the range\n</think>\n\n" + kit.guess_policy(p)  # noqa: E731
    server: Any = (
        ray.remote(ScriptedLLMServer)
        .options(num_cpus=0)
        .remote(str(model), kit.ScriptedServer, scripted_policy(thinking))
    )
    groups: list[CPUActorGroup] = []
    monkeypatch.setattr(trainer_base.PPOTrainer, "_setup", make_cpu_setup(server, groups))
    rec = Recorder(monkeypatch)
    actor_name = f"cur-{uuid.uuid4().hex[:8]}"

    config = run_config(kit, tmp_path, model, steps=2, actor_name=actor_name)
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    run_task_runner(config)

    run = groups[0]
    calls = traced_cluster.read_text().split()
    step = [
        "PPOTrainer.step",
        "PPOTrainer.prepare_step",
        "PPOTrainer._submit_batch_to_rollout",
        "PPOTrainer._step_once",
        "ReplayBuffer.sample",
        "PPOTrainerSync.on_sample_end",
        "PPOTrainer._balance_batch",
        "PPOTrainer._compute_old_log_prob",
        "PPOTrainer._compute_advantage",
        "verl.trainer.ppo.v1.utils.compute_advantage_for_multi_trajectories",
        "PPOTrainer._update_actor",
        "PPOTrainer._save_checkpoint",
        "PPOTrainerSync.on_step_end",
        "CheckpointEngineManager.update_weights",
    ]
    validate = ["PPOTrainer._validate", "ReplayBuffer.sample"]
    start = ["PPOTrainer._load_checkpoint", "CheckpointEngineManager.update_weights", "PPOTrainer.fit", *validate]
    metrics = ["PPOTrainer._compute_metrics"]
    assert driver_calls(calls) == [*start, *step, *metrics, *step, *validate, *metrics]
    # 2 validations x 2 val rows x 1 sample + 2 steps x 2 prompts x rollout.n=2, each through verl's worker path
    episodes = 2 * 2 + 2 * 2 * 2
    assert worker_counts(calls) == {
        "AgentLoopWorkerTQ._run_prompt": 2 + 2 + 2 + 2,
        "AgentLoopWorker._run_agent_loop": episodes,
        "AgentLoopWorkerTQ._agent_loop_postprocess": episodes,
        "AgentLoopWorker._compute_score": episodes,
        "LLMServerClient.generate": len(ray.get(server.calls.remote())),
    }
    assert len(ray.get(server.calls.remote())) > episodes  # multi-turn episodes

    by_step = {step: data for step, data in rec.logged}
    assert sorted(by_step) == [0, 1, 2]  # initial validation, then one record per training step
    assert by_step[0][f"val-core/{GUESS}/reward/mean@1"] == pytest.approx(1.0)
    assert by_step[0][f"val-core/{NONOGRAM}/reward/mean@1"] < 0  # format penalties, never solved
    for n in (1, 2):
        m = by_step[n]
        # the server's weights version reached verl's staleness metrics through extra_fields (defect 1)
        assert m["training/off_policy/trajectory_staleness/mean"] == 0
        assert m["training/off_policy/trajectory_spans/max"] == 1
        assert {"actor/pg_loss", "actor/entropy", "critic/advantages/mean", "timing_s/update_actor"} <= set(m)
        assert m.get(f"gymverse/{GUESS}/success", 1.0) == 1.0 and m.get(f"gymverse/{NONOGRAM}/success", 0.0) == 0.0
    promotions = sum(f"gymverse/{GUESS}/success" in by_step[n] for n in (1, 2))  # its all-success steps
    assert promotions >= 1 and by_step[2][f"gymverse/{GUESS}/complexity"] == 1 + promotions
    assert f"val-core/{GUESS}/reward/mean@1" in by_step[2]  # the last step validates

    # verl's checkpoints, with the curriculum next to them and no TransferQueue snapshot (sync mode)
    ckpt = tmp_path / "ckpt"
    for n in (1, 2):
        names = sorted(p.name for p in (ckpt / f"global_step_{n}").iterdir())
        assert names == sorted(["actor", "data.pt", CHECKPOINT_FILE])
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "2"
    # the CPU actor really trained: 2 steps x 2 mini-batches (4 rows / (ppo_mini_batch_size 1 x n 2))
    assert run.saved == [1, 2] and run.updates == 4
    assert not params_equal(run.model, type(run.model).from_pretrained(model))

    # resume: a new TaskRunner for 3 steps restores step 2 and trains only step 3, on prompts not trained before
    config = run_config(kit, tmp_path, model, steps=3, actor_name=actor_name)
    traced_cluster.write_text("")
    run_task_runner(config)
    calls = traced_cluster.read_text().split()
    resumed = groups[1]
    assert resumed.loaded == [2] and resumed.saved == [3] and resumed.updates == 2
    assert driver_calls(calls) == [*start, *step, *validate, *metrics]
    assert sorted(rec.trained) == [1, 2, 3] and all(len(v) == 2 for v in rec.trained.values())
    assert not set(rec.trained[3]) & (set(rec.trained[1]) | set(rec.trained[2])), rec.trained
    m = dict(rec.logged)[3]
    assert m[f"gymverse/{GUESS}/complexity"] >= 2  # the curriculum came back with the weights
    assert m["training/off_policy/trajectory_staleness/mean"] == 0  # rollouts on the restored weights version
    # prompts were rendered with the real Qwen3 template; the model's thinking reached the env untouched
    prompts = [c["prompt"] for c in ray.get(server.calls.remote())]
    assert all(p.endswith("<|im_start|>assistant\n") for p in prompts)
    assert any("<think>\nhalve the range\n</think>" in p for p in prompts)


def params_equal(a: Any, b: Any) -> bool:
    import torch

    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
