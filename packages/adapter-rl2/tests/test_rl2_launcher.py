"""The launcher, CLI, settings and dataset export, against RL2's real entry point and dataset reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gymverse.curriculum.options import CurriculumOptions
from gymverse.rollout import EpisodeSpec, episode_specs
from gymverse_rl2.cli import main as cli
from gymverse_rl2.cli import write_dataset
from gymverse_rl2.settings import Settings, split_argv
from gymverse_rl2.train import env_path, prepare

STAND_INS = str(Path(__file__).parent / "gpu_stand_ins")


def test_split_argv_takes_only_gymverse_options() -> None:
    settings, rest = split_argv(
        ["actor.model_name=Qwen/Qwen3-1.7B", "gymverse.perpo=true", "gymverse.patience=2", "+gymverse.eval_level=4"]
    )
    assert rest == ["actor.model_name=Qwen/Qwen3-1.7B"]
    assert settings == Settings(perpo=True, curriculum=CurriculumOptions(patience=2, eval_level=4))
    assert settings.curriculum.to_config()["controller"]["promote_patience"] == 2
    for bad, match in [
        ("gymverse.perpo=maybe", "true or false"),
        ("gymverse.unknown=1", "unknown GymVerse option"),
        ("gymverse.evolve_patience=2", "unknown GymVerse option"),  # one name per knob: the core's
        ("gymverse.perpo", "gymverse.<name>=<value>"),
        ("gymverse.patience=two", "not a"),
        ("gymverse.initial_level=12", "initial_level: complexity must be in 1..10"),
        ("gymverse.horizon=8,x", "horizon must be"),
    ]:
        with pytest.raises(ValueError, match=match):
            split_argv([bad])


def test_prepare_adds_the_env_file_unless_given() -> None:
    _, rest = prepare(["trainer.n_epochs=1"])
    assert rest[-1] == f"rollout.env_path={env_path()}"
    _, rest = prepare(["rollout.env_path=/x/mine.py"])
    assert rest == ["rollout.env_path=/x/mine.py"]


def test_cli_env_path_and_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["env-path"]) == 0
    path = capsys.readouterr().out.strip()
    assert path == env_path() and Path(path).is_file()
    out = tmp_path / "d.jsonl"
    assert cli(["make-dataset", "--envs", "game:GuessTheNumber,game:LightsOut", "--n", "3", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["extra_info"]["env_id"] for r in rows[:2]] == ["game:GuessTheNumber", "game:LightsOut"]
    assert [r["extra_info"]["seed"] for r in rows] == [0, 0, 1, 1, 2, 2]
    specs = episode_specs(["game:GuessTheNumber", "game:LightsOut"], 3)  # the core's row schema and seed scheme
    assert [EpisodeSpec.from_dict(r["extra_info"]) for r in rows] == specs
    assert cli(["make-dataset", "--envs", "game:Nope", "--n", "1", "--out", str(out)]) == 2
    assert "unknown env id" in capsys.readouterr().err


def test_rl2_dataset_reads_the_export(tmp_path: Path, tokenizer_dir: Path) -> None:
    from omegaconf import OmegaConf
    from RL2.datasets import RLDataset
    from transformers import AutoTokenizer

    out = tmp_path / "d.jsonl"
    write_dataset(["game:GuessTheNumber"], 2, str(out), seed=7, complexity=3)
    config = OmegaConf.create({"path": str(out), "prompts_per_rollout": 2, "responses_per_prompt": 2})
    dataset = RLDataset(config, AutoTokenizer.from_pretrained(str(tokenizer_dir)))
    batch = dataset.collate_fn([dataset[0], dataset[1]])
    assert len(batch) == 4 and "prompt" not in batch[0]
    assert batch[0]["extra_info"] == EpisodeSpec("game:GuessTheNumber", 7, 3).to_dict()


def test_launcher_runs_rl2_entry_point(tmp_path: Path, tokenizer_dir: Path) -> None:
    """`python -m gymverse_rl2.train` composes RL2's Hydra config and enters RL2's `main` (until NCCL on CPU)."""
    data = tmp_path / "d.jsonl"
    write_dataset(["game:GuessTheNumber"], 2, str(data))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([STAND_INS, *sys.path]),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29531",
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "CUDA_VISIBLE_DEVICES": "",
        "HYDRA_FULL_ERROR": "1",
    }
    argv = [
        f"actor.model_name={tokenizer_dir}",
        f"train_data.path={data}",
        "train_data.prompts_per_rollout=2",
        "actor.max_length_per_device=2048",
        "trainer.use_wandb=false",
        "gymverse.perpo=true",
        "gymverse.evolve=true",
    ]
    probe = (
        "import sys, gymverse_rl2.train as t\n"
        "try:\n    t.main(sys.argv[1:])\n"
        "finally:\n"
        "    import RL2.utils.algorithms as a, RL2.utils.checkpointing as c, RL2.workers.rollout as r\n"
        "    print('HOOKS', hasattr(a.compute_advantages, '__gymverse_original__'),"
        " hasattr(c.save_ckpt, '__wrapped__'), r.Rollout.rollout.__module__, flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, *argv], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0  # no GPU: RL2 stops at its NCCL process group
    assert "HOOKS True True gymverse_rl2.episodes" in out  # PERPO, checkpoint and rollout hooks in RL2's process
    assert 'RL2/trainer/ppo.py", line' in out and "in main" in out  # RL2's Hydra main ran
    assert "initialize_global_process_group" in out  # ... up to its NCCL init, the first GPU-only step
    assert "no GPUs found" in out
    assert "Could not override" not in out  # the gymverse.* options never reached Hydra


def test_launcher_rejects_bad_options() -> None:
    """Bad options and RL2 settings that would crash or break PERPO are refused at launch, one line each."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([STAND_INS, *sys.path])}
    base = ["actor.model_name=m", "train_data.path=d.jsonl", "train_data.prompts_per_rollout=2"]
    for argv, reason in [
        (["gymverse.perpo=sometimes"], "gymverse.perpo takes true or false"),
        (base, "actor.max_length_per_device is null"),  # RL2 would crash at its first actor update
        (
            [
                *base,
                "actor.max_length_per_device=64",
                "actor.kl.coef=0.1",
                "actor.kl.type=reward",
                "gymverse.perpo=true",
            ],
            "set actor.kl.type=loss",
        ),
        (
            [*base, "actor.max_length_per_device=64", "adv.estimator=gae", "gymverse.perpo=true"],
            "set adv.estimator=reinforce",
        ),
        (
            [*base, "actor.max_length_per_device=64", "+rollout.train.partial_rollout=true"],
            "set rollout.train.partial_rollout=false",
        ),  # RL2 head's partial rollouts: refused before any rollout
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "gymverse_rl2.train", *argv], capture_output=True, text=True, timeout=120, env=env
        )
        assert proc.returncode == 1, (argv, proc.stderr[-2000:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gymverse_rl2.train: ") and reason in lines[0], proc.stderr


def test_make_dataset_takes_an_evaluation_manifest_and_its_envs_run_in_the_pool(tmp_path: Path) -> None:
    import asyncio

    from gymverse.manifest import write_manifest
    from gymverse.rollout import open_session

    corpus = Path(__file__).parents[2] / "gymverse-eval" / "tests" / "gem_corpus"
    rows_in: list[dict[str, Any]] = [
        {"name": "gem:number_hunt", "ref": f"gem:{corpus / 'number_hunt.py'}", "verdict": "unverified"},
        {"name": "gem:host_report", "ref": f"gem:{corpus / 'host_report.py'}", "verdict": "incorrect",
         "flags": ["unsafe"]},
    ]  # fmt: skip
    manifest = write_manifest(tmp_path / "eval" / "manifest.json", "gem_corpus", rows_in)
    out = tmp_path / "d.jsonl"
    assert cli(["make-dataset", "--envs", str(manifest), "--n", "2", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["extra_info"]["env_id"] for r in rows] == [rows_in[0]["ref"]] * 2  # the unsafe env is not trained on

    async def first_turn() -> str:
        session = await open_session(rows[0]["extra_info"]["env_id"], seed=0)
        async with session:
            obs, _ = await session.reset()
            return str(obs)

    assert asyncio.run(first_turn()).startswith("I picked a number between 1 and")  # built by the pool from its ref
