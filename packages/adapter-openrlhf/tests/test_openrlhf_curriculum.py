"""The curriculum on Ray (run-scoped actor, per-tag checkpoints, strict resume) and the launcher's refusals."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import ray
from gymverse.curriculum import CurriculumOptions
from gymverse.curriculum.service import CHECKPOINT_FILE
from gymverse.rollout.dataset import EpisodeSpec
from gymverse_openrlhf import curriculum, train
from gymverse_openrlhf.agent_func import AgentExecutor
from gymverse_openrlhf.cli import initial_observation
from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig, split_argv, with_openrlhf
from gymverse_openrlhf.patch import (
    JOB_CONFIG_VAR,
    SETUP_HOOK,
    patch_experience_maker,
    patch_launcher,
    runtime_env,
    unwrap,
)
from openrlhf.trainer.ppo_utils import experience_maker as em
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
from openrlhf.trainer.ray import launcher

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


def evolving(tmp_path: Any, **knobs: Any) -> GymVerseConfig:
    return GymVerseConfig("env", curriculum=CurriculumOptions(evolve=True, **knobs), ckpt_path=str(tmp_path))


def episode(tokenizer: Any, engine_cls: Any, sampling_params: Any, seed: int, level: int) -> Any:
    import gymverse

    env = gymverse.make(ENV, complexity=level)
    env.reset(seed=seed)
    actions = []
    while not env.done:
        actions.append(env.solve())
        env.step(actions[-1])
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": initial_observation(ENV, seed, None)}], tokenize=False, add_generation_prompt=True
    )
    return asyncio.run(
        AgentExecutor().execute(
            prompt=prompt,
            label=json.dumps(EpisodeSpec(ENV, seed).to_dict()),
            sampling_params=sampling_params,
            max_length=4096,
            hf_tokenizer=tokenizer,
            llm_engine=engine_cls(tokenizer, actions),
        )
    )


@ray.remote
class FakeDeepSpeedActor:
    """What OpenRLHF's policy actor does on ``save_checkpoint``: the tag's folder, then DeepSpeed's ``latest``."""

    def __init__(self, ckpt_path: str) -> None:
        self.folder = os.path.join(ckpt_path, "_actor")

    def save_checkpoint(
        self, tag: str, client_states: Any = None, metric_value: Any = None, metric_key: Any = None
    ) -> None:
        folder = self.folder
        os.makedirs(os.path.join(folder, tag), exist_ok=True)
        with open(os.path.join(folder, tag, "mp_rank_00_model_states.pt"), "w") as fh:
            fh.write("weights")
        with open(os.path.join(folder, "latest"), "w") as fh:
            fh.write(tag)


def test_levels_flow_from_success_to_reset_and_into_each_checkpoint_tag(
    ray_cluster: Any, tokenizer: Any, engine_cls: Any, sampling_params: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    cfg = evolving(tmp_path, patience=1)
    monkeypatch.setenv(ENV_VAR, cfg.to_json())
    curriculum._service.clear()
    curriculum.create_actor(cfg)  # what the launcher does; it keeps no handle (the actor is detached)
    gc.collect()
    outs = [episode(tokenizer, engine_cls, sampling_params, 20 + i, 1) for i in range(3)]
    assert [o["extra_logs"]["gymverse_complexity"] for o in outs] == [1, 1, 1]
    service = curriculum.get_service()
    assert service.state_dict()["controller"]["num_updates"] == 0  # recorded, the step not closed yet

    # the trainer's advantage step closes the step: 3/3 >= 0.8 with patience 1 -> level 2
    samples = [SamplesGenerator._process_response_into_experience(None, o, max_len=4096) for o in outs]
    args = SimpleNamespace(
        algo=SimpleNamespace(advantage=SimpleNamespace(estimator="reinforce", gamma=1.0, lambd=1.0, no_std_norm=False)),
        rollout=SimpleNamespace(n_samples_per_prompt=1, micro_batch_size=2),
        reward=SimpleNamespace(clip_range=(-10.0, 10.0), overlong_buffer_len=None, stop_properly_penalty_coef=None),
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
        unwrap(em.RemoteExperienceMaker, "compute_advantages_and_returns")
    assert service.levels() == {ENV: 2}

    # the next reset runs at level 2: the stale level-1 observation in the dataset prompt is swapped out
    out = episode(tokenizer, engine_cls, sampling_params, 20, 2)
    assert out["extra_logs"]["gymverse_complexity"] == 2 and out["scores"] == 1.0
    text = tokenizer.decode(out["observation_tokens"])
    old, new = initial_observation(ENV, 20, None), initial_observation(ENV, 20, 2)
    assert old != new and new in text and old not in text

    # OpenRLHF's trainer saves a tag through RayActorGroup.async_run_method: the curriculum lands in that tag's
    # folder once the model actors have saved it
    group = object.__new__(launcher.RayActorGroup)
    group._actor_handlers = [FakeDeepSpeedActor.remote(str(tmp_path))]  # type: ignore[attr-defined]
    patch_launcher(launcher, cfg)
    try:
        ray.get(group.async_run_method("save_checkpoint", tag="global_step5", client_states={}))
        service.end_step()  # the level-2 win above promotes again (patience 1), then a "best" checkpoint
        ray.get(group.async_run_method(method_name="save_checkpoint", tag="best_global_step6"))
    finally:
        unwrap(launcher.RayActorGroup, "async_run_method")
    for tag, level in (("global_step5", 2), ("best_global_step6", 3)):  # each tag holds its own levels
        saved = json.loads((tmp_path / "_actor" / tag / CHECKPOINT_FILE).read_text())
        assert saved["tag"] == tag and saved["controller"]["envs"][ENV]["level"] == level
    assert curriculum.resumed_folder(str(tmp_path)) == str(tmp_path / "_actor" / "best_global_step6")

    # a resumed run restores the tag OpenRLHF resumes (DeepSpeed's latest, here pointed back at the older tag),
    # not the newest levels; a tag without the file is refused
    (tmp_path / "_actor" / "latest").write_text("global_step5")
    curriculum._service.clear()
    resumed = curriculum.create_actor(evolving(tmp_path, patience=1), curriculum.resumed_folder(str(tmp_path)))
    assert resumed.episode_config(ENV).complexity == 2
    (tmp_path / "_actor" / "global_step7").mkdir()
    (tmp_path / "_actor" / "latest").write_text("global_step7")
    with pytest.raises(FileNotFoundError, match=f"global_step7 has no {CHECKPOINT_FILE}"):
        curriculum.create_actor(evolving(tmp_path), curriculum.resumed_folder(str(tmp_path)))
    fresh = curriculum.create_actor(evolving(tmp_path))
    assert fresh.levels() == {}
    fresh.stop()
    curriculum._service.clear()


def test_missing_actor_is_a_clear_error(ray_cluster: Any) -> None:
    curriculum._service.clear()
    with pytest.raises(RuntimeError, match=r"gymverse_openrlhf\.train"):
        curriculum.get_service()


DRIVER = textwrap.dedent(
    """
    import sys, ray
    from gymverse.curriculum import CurriculumOptions
    from gymverse.curriculum.state import EpisodeOutcome
    from gymverse_openrlhf import train
    from gymverse_openrlhf.config import GymVerseConfig

    ray.init(address=sys.argv[1], log_to_driver=False)
    train.start(GymVerseConfig(curriculum=CurriculumOptions(evolve=True, patience=1)))

    @ray.remote(num_cpus=0)
    class Agent:  # like OpenRLHF's RolloutRayActor: created by the run's driver, finds the curriculum by name
        def play(self, wins):
            from gymverse_openrlhf.curriculum import actor_name, get_service
            service = get_service()
            service.record([EpisodeOutcome(f"{actor_name()}-{i}", "game:GuessTheNumber", True) for i in range(wins)])
            return actor_name()

    agent = Agent.remote()
    from gymverse_openrlhf.curriculum import actor_name, get_service
    assert ray.get(agent.play.remote(int(sys.argv[2]))) == actor_name()
    get_service().end_step()
    print("levels", actor_name(), get_service().levels(), flush=True)
    sys.stdin.readline()
    print("levels", actor_name(), get_service().levels(), flush=True)
    get_service().stop()
    """
)


def test_two_concurrent_runs_on_one_cluster_keep_separate_levels(ray_cluster: Any) -> None:
    """Two launchers (Ray jobs) on one cluster: each run's agents find its own curriculum actor; the second run
    starting fresh does not replace the first run's (the names carry the job id)."""
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", ENV_VAR: ""}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, address, str(wins)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        for wins in (3, 0)  # run A promotes GuessTheNumber; run B (started while A runs) records nothing
    ]
    try:
        first = [proc.stdout.readline().split(" ", 2) for proc in runs if proc.stdout is not None]
        (_, name_a, levels_a), (_, name_b, levels_b) = first
        assert name_a != name_b and name_a.startswith(curriculum.BASE_NAME)
        assert levels_a.strip() == "{'game:GuessTheNumber': 2}" and levels_b.strip() == "{}"
        later = [proc.communicate("\n", timeout=60)[0].split(" ", 2) for proc in runs]
        assert [line[2].strip() for line in later] == [levels_a.strip(), "{}"]  # A kept its level after B started
        assert [proc.returncode for proc in runs] == [0, 0]
    finally:
        for proc in runs:
            proc.kill()


def test_launcher_refuses_modes_that_break_the_curriculum_or_perpo(tmp_path: Any, monkeypatch: Any) -> None:
    """OpenRLHF's real parser reads the command line; the launcher refuses before anything starts."""
    from transformers import LlamaConfig

    LlamaConfig(max_position_embeddings=512).save_pretrained(tmp_path / "model")
    base = ["--actor.model_name_or_path", str(tmp_path / "model"), "--ckpt.path", str(tmp_path / "ckpt")]
    perpo = ["--gymverse.norm", "env", "--algo.advantage.estimator", "reinforce", "--algo.kl.init_coef", "0"]
    cases = [
        ([*perpo, "--gymverse.evolve", "--train.async_enable"], r"--train\.async_enable: .*synchronous rollouts"),
        ([*perpo, "--train.async_enable", "--train.partial_rollout_enable"], r"--train\.partial_rollout_enable: "),
        (["--gymverse.evolve", "--train.async_enable"], r"--train\.async_enable: "),
        (
            ["--gymverse.norm", "env", "--algo.advantage.estimator", "group_norm"],
            r"--algo\.advantage\.estimator group_norm: .* reinforce",
        ),
        (["--gymverse.norm", "env", "--algo.advantage.estimator", "reinforce"], r"--algo\.kl\.init_coef 0\.01 without"),
        ([*perpo, "--data.max_len", "1024"], r"--data\.max_len 1024 .* max_position_embeddings 512"),
    ]
    monkeypatch.delenv(ENV_VAR, raising=False)
    for flags, message in cases:
        monkeypatch.setattr(sys, "argv", ["x"])
        with pytest.raises(SystemExit, match=f"^gymverse: {message}"):
            train.main([*base, *flags])
        assert ENV_VAR not in os.environ  # refused before anything of the run started
    with pytest.raises(SystemExit, match=r"unknown GymVerse option\(s\) \['--gymverse\.evolve_patience'\]"):
        split_argv(["--gymverse.evolve_patience", "2"])
    with pytest.raises(SystemExit, match=r"or --gymverse\.norm"):
        split_argv(["--gymverse.norm", "grpo"])
    with pytest.raises(SystemExit, match="patience must be >= 1"):
        split_argv(["--gymverse.patience", "0"])


def test_readme_launch_line_passes_openrlhfs_parser_and_the_refusals(tmp_path: Any, monkeypatch: Any) -> None:
    """The README's added lines (with OpenRLHF's default KL coefficient) reach `start` with the config the workers
    get: the pool sized from OpenRLHF's batch settings, the checkpoint folder, the curriculum knobs."""
    from transformers import LlamaConfig

    LlamaConfig(max_position_embeddings=4096).save_pretrained(tmp_path / "model")
    readme = ["--data.prompt_dataset", "p.jsonl", "--data.input_key", "prompt", "--data.label_key", "label"]
    readme += ["--data.apply_chat_template", "--algo.advantage.estimator", "reinforce", "--algo.kl.use_loss"]
    readme += ["--gymverse.norm", "env", "--gymverse.evolve"]
    lab = ["--actor.model_name_or_path", str(tmp_path / "model"), "--ckpt.path", str(tmp_path / "ck")]
    lab += ["--rollout.batch_size", "32", "--rollout.n_samples_per_prompt", "4", "--ckpt.load_enable"]
    seen: list[Any] = []

    def fake_start(cfg: GymVerseConfig, load: bool = False) -> None:
        seen.append((cfg, load))
        raise SystemExit("started")

    monkeypatch.setattr(train, "start", fake_start)
    monkeypatch.setattr(sys, "argv", ["x"])
    with pytest.raises(SystemExit, match=r"^started$"):
        train.main([*lab, *readme])
    ((cfg, load),) = seen
    assert load and cfg.norm == "env" and cfg.curriculum == CurriculumOptions(evolve=True)
    assert cfg.pool_size == 128 and cfg.ckpt_path == str(tmp_path / "ck")


def test_flags_map_onto_curriculum_options_and_openrlhf_batch_settings(tmp_path: Any) -> None:
    cfg, rest = split_argv(
        [
            "--a",
            "1",
            "--gymverse.norm",
            "env",
            "--gymverse.evolve",
            "--gymverse.patience=2",
            "--gymverse.horizon",
            "4,8",
            "--b",
            "--gymverse.eval_level",
            "3",
        ]
    )
    assert rest == ["--a", "1", "--b"]
    assert cfg.curriculum == CurriculumOptions(evolve=True, patience=2, horizon="4,8", eval_level=3)
    assert GymVerseConfig.from_json(cfg.to_json()) == cfg
    rollout = SimpleNamespace(batch_size=128, n_samples_per_prompt=8, vllm_generate_batch_size=None)
    args = SimpleNamespace(rollout=rollout, eval=SimpleNamespace(dataset=None), ckpt=SimpleNamespace(path="ck"))
    sized = with_openrlhf(cfg, args)
    assert sized.pool_size == 1024 and sized.ckpt_path == os.path.abspath("ck")
    rollout.vllm_generate_batch_size = 256
    assert with_openrlhf(cfg, args).pool_size == 2048


def test_submitted_job_runtime_env_is_completed_not_overridden() -> None:
    cfg = GymVerseConfig(norm="env")
    ours = runtime_env(cfg, {})
    assert ours["worker_process_setup_hook"] == SETUP_HOOK and ours["env_vars"][ENV_VAR] == cfg.to_json()
    job = {"runtime_env": {"env_vars": {"NCCL_DEBUG": "INFO"}, "pip": ["x"]}}
    merged = runtime_env(cfg, {JOB_CONFIG_VAR: json.dumps(job)})
    assert "NCCL_DEBUG" not in merged["env_vars"]  # the job's value stays in charge
    assert merged["env_vars"][ENV_VAR] == cfg.to_json() and merged["worker_process_setup_hook"] == SETUP_HOOK
    for job_env in ({"worker_process_setup_hook": "lab.setup"}, {"env_vars": {ENV_VAR: "{}"}}):
        with pytest.raises(RuntimeError, match=f"sets worker_process_setup_hook or {ENV_VAR}: drop them"):
            runtime_env(cfg, {JOB_CONFIG_VAR: json.dumps({"runtime_env": job_env})})
