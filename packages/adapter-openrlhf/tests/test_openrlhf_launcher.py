"""OpenRLHF's real launcher on CPU: ``python -m gymverse_openrlhf.train <train_ppo_ray flags> --gymverse.*``.

Two runs of the launcher in a subprocess (its own Ray cluster each): two rollout batches with a checkpoint per
step, then ``--ckpt.load_enable`` for exactly two new batches. Everything is OpenRLHF 0.11.2's own code
(``train_ppo_ray`` main and ``train``, `PPOTrainer` in its Ray actor, `SamplesGenerator`, `RolloutRayActor` and
its agent executor, `RemoteExperienceMaker`, `Experience`, `RayActorGroup`, `Actor`, `PolicyLoss`, checkpoint
states and dataloader resume) plus the adapter, except these cuts (``tests/launcher_harness``, loaded in every
process through ``sitecustomize``):

- vLLM's engine is the scripted stand-in of ``tests/gpu_stand_ins/vllm`` (a GuessTheNumber policy);
  OpenRLHF's `RolloutRayActor` runs around it.
- `PolicyModelActor` (DeepSpeed/CUDA/NCCL) is the CPU policy worker ``launcher_harness/cpu_policy_actor.py``:
  OpenRLHF's `Actor` and `PolicyLoss`, one AdamW step per experience; not `ActorPPOTrainer`'s epochs,
  micro-batches, clipping or LR schedule, nor DeepSpeed's checkpoint format.
- flash-attn's Triton cross-entropy fails to import, so OpenRLHF's own fallback computes the log-probs.
- Ray runs on 2 CPUs with 1 logical GPU (``--train.colocate_all``, so OpenRLHF's placement groups schedule).

Not run, by the run's design: OpenRLHF's ``compute_advantages_and_returns`` / ``compute_reward`` /
``get_cumulative_returns`` (replaced by GymVerse's per-turn PERPO, ``--gymverse.norm env``), and the reference
model, KL and critic (``--algo.kl.init_coef 0`` with the critic-free ``reinforce`` estimator).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "launcher_harness"
STAND_INS = HERE / "gpu_stand_ins"
sys.path.insert(0, str(HARNESS))
from cpu_run_harness import HARNESS_VAR, RAY_TMP_VAR, TRACE_VAR  # noqa: E402

ENV = "game:GuessTheNumber"
GAMMA = 0.9
RUN_MARKER = "GYMVERSE_OPENRLHF_TEST_RUN"  # in every process of a run (inherited), to find leftovers by pid

# ~1-2 min of subprocesses on 2 busy cores (mostly each process importing torch, DeepSpeed and OpenRLHF)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def build_model(tokenizer: Any, path: Path) -> Path:
    """A tiny random Llama with the test tokenizer (ChatML template) saved as an HF checkpoint."""
    from gymverse.testing import random_causal_lm

    model = random_causal_lm(tokenizer, max_position_embeddings=2048, tie_word_embeddings=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def launcher_flags(model: Path, data: Path, ckpt: Path) -> list[str]:
    """OpenRLHF ``train_ppo_ray`` flags for a two-batch run on one (logical) GPU, plus the GymVerse flags."""
    return [
        *("--actor.model_name_or_path", str(model)),
        *("--data.prompt_dataset", str(data), "--data.input_key", "prompt", "--data.label_key", "label"),
        "--data.apply_chat_template",
        *("--data.max_len", "1024", "--rollout.max_new_tokens", "32"),
        *("--algo.advantage.estimator", "reinforce", "--algo.advantage.gamma", str(GAMMA)),
        *("--algo.kl.init_coef", "0"),
        *("--vllm.num_engines", "1", "--vllm.tensor_parallel_size", "1", "--train.colocate_all"),
        *("--actor.num_nodes", "1", "--actor.num_gpus_per_node", "1"),
        *("--ref.num_gpus_per_node", "1", "--critic.num_gpus_per_node", "1", "--reward.num_gpus_per_node", "1"),
        *("--rollout.batch_size", "2", "--rollout.n_samples_per_prompt", "2", "--rollout.micro_batch_size", "2"),
        *("--train.batch_size", "4", "--train.micro_batch_size", "2", "--train.seed", "0"),
        *("--ds.attn_implementation", "eager", "--actor.adam.lr", "1e-3"),
        *("--ckpt.path", str(ckpt / "checkpoints"), "--ckpt.output_dir", str(ckpt / "final")),
        *("--ckpt.save_steps", "1"),
        *("--gymverse.norm", "env", "--gymverse.evolve", "--gymverse.promote_at", "0.75", "--gymverse.patience", "1"),
    ]


def _pids_of_run(marker: str) -> list[int]:
    """Processes whose environment carries this run's marker (the launcher, Ray's daemons and workers)."""
    needle = f"{RUN_MARKER}={marker}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def _kill_run(marker: str) -> None:
    for pid in _pids_of_run(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def run_launcher(flags: list[str], trace: Path, log: Path, ray_tmp: str, marker: str) -> None:
    """``python -m gymverse_openrlhf.train`` under the CPU harness; fails with the log's tail if it fails."""
    trace.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(STAND_INS), str(HARNESS)]),
            HARNESS_VAR: "1",
            TRACE_VAR: str(trace),
            RAY_TMP_VAR: ray_tmp,
            RUN_MARKER: marker,
            "HF_HOME": str(trace.parent / "hf"),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "1",
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
            "PYTHONWARNINGS": "ignore",
        }
    )
    with open(log, "w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "gymverse_openrlhf.train", *flags],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=480,
            start_new_session=True,
        )
    if proc.returncode != 0:
        text = log.read_text()
        errors = list(dict.fromkeys(line.strip() for line in text.splitlines() if "Error: " in line))[-3:]
        raise AssertionError(
            f"launcher exited with {proc.returncode}: {' | '.join(errors)}\nlog ({log}) tail:\n{text[-4000:]}"
        )


def read_trace(trace: Path) -> list[tuple[str, int, float]]:
    """Every traced call: (module.qualname, pid, time)."""
    rows = []
    for path in glob.glob(str(trace / "trace-*.txt")):
        for line in Path(path).read_text().splitlines():
            name, pid, when = line.split()
            rows.append((name, int(pid), float(when)))
    return sorted(rows, key=lambda r: r[2])


def read_batches(trace: Path) -> list[list[dict[str, Any]]]:
    """The saved experiences of every rollout batch, in time order."""
    import torch

    saved = [torch.load(p, weights_only=False) for p in glob.glob(str(trace / "experiences-*.pt"))]
    return [s["experiences"] for s in sorted(saved, key=lambda s: s["time"])]


def action_turn_ends(mask: Any) -> list[int]:
    """Exclusive ends of the runs of action tokens in one row (the episode's replies)."""
    row = [int(v) for v in mask.tolist()]
    return [i + 1 for i, v in enumerate(row) if v and (i + 1 == len(row) or not row[i + 1])]


def check_perpo(batch: list[dict[str, Any]]) -> int:
    """Every advantage of a rollout batch equals core PERPO (`gymverse.perpo.advantages`) on the episode records
    the agents returned in the labels; returns the number of episodes whose turns got different advantages."""
    import torch
    from gymverse.perpo import advantages
    from gymverse.rollout.batch import EpisodeBatch, EpisodeRecord

    width = max(int(e["action_mask"].shape[1]) for e in batch)
    masks, records = [], []
    for exp in batch:
        for label, reward, mask in zip(exp["labels"], exp["rewards"], exp["action_mask"]):
            record = EpisodeRecord.from_dict(json.loads(label)["episode"])
            turn_ends = action_turn_ends(mask)
            assert len(turn_ends) == len(record.turn_rewards), (turn_ends, record)  # one reward per reply
            assert float(reward) == pytest.approx(sum(record.turn_rewards), abs=1e-6)  # the scalar reward is their sum
            masks.append(torch.nn.functional.pad(mask.long(), (0, width - mask.shape[0])))
            records.append(replace(record, turn_ends=tuple(turn_ends)))
    expected = advantages(EpisodeBatch.of(records, torch.stack(masks)), gamma=GAMMA, eps=1e-9)
    assert expected.tokens is not None
    got = torch.cat([torch.nn.functional.pad(e["advantages"], (0, width - e["advantages"].shape[1])) for e in batch])
    mask = torch.stack(masks).bool()
    assert torch.allclose(got[mask].double(), expected.tokens[mask].double(), atol=1e-5), (got, expected)
    assert not got[~mask].any()  # prompt and env tokens carry no advantage
    per_turn = 0
    for row, record in zip(got, records):
        values = {round(float(row[end - 1]), 6) for end in record.turn_ends}
        per_turn += len(values) > 1
    return per_turn


def levels(batches: list[list[dict[str, Any]]]) -> list[int]:
    """The curriculum level every episode of each batch ran at (one per batch; mixed levels fail)."""
    out = []
    for batch in batches:
        seen = {int(v) for e in batch for v in e["info"]["gymverse_complexity"]}
        assert len(seen) == 1, seen
        out.append(seen.pop())
    return out


def first(trace: list[tuple[str, int, float]], name: str) -> tuple[str, int, float]:
    """The first record of `name` (a clear failure when it never ran)."""
    hits = [row for row in trace if row[0] == name]
    assert hits, f"{name} never ran"
    return hits[0]


#: OpenRLHF functions the run must go through (module.qualname; ``__main__``'s recorded under its module).
OPENRLHF_RAN = (
    "openrlhf.cli.train_ppo_ray.<module>",
    "openrlhf.cli.train_ppo_ray.train",
    "openrlhf.utils.config.hierarchize",
    "openrlhf.utils.utils.get_strategy",
    "openrlhf.utils.utils.get_tokenizer",
    "openrlhf.utils.deepspeed.deepspeed.DeepspeedStrategy.__init__",
    "openrlhf.trainer.ray.vllm_engine.create_vllm_engines",
    "openrlhf.trainer.ray.vllm_engine._load_agent_executor",
    "openrlhf.trainer.ray.vllm_engine.RolloutRayActor.__init__",
    "openrlhf.trainer.ray.vllm_engine.RolloutRayActor.generate_responses",
    "openrlhf.trainer.ray.vllm_engine.RolloutRayActor.generate",
    "openrlhf.trainer.ray.vllm_engine.RolloutRayActor.update_weight",
    "openrlhf.trainer.ray.launcher.RayActorGroup.__init__",
    "openrlhf.trainer.ray.launcher.RayActorGroup.async_init_model_from_pretrained",
    "openrlhf.trainer.ray.launcher.RayActorGroup.async_run_method_batch",
    "openrlhf.trainer.ray.launcher.RayActorGroup.async_save_model",
    "openrlhf.trainer.ray.launcher.BaseDistributedActor.__init__",
    "openrlhf.trainer.ray.launcher.BaseModelActor.execute_batch",
    "openrlhf.trainer.ppo_trainer.PPOTrainer.__init__",
    "openrlhf.trainer.ppo_trainer.PPOTrainer.get_max_steps",
    "openrlhf.trainer.ppo_trainer.PPOTrainer.fit",
    "openrlhf.trainer.ppo_trainer.prepare_datasets",
    "openrlhf.trainer.ppo_trainer.BasePPOTrainer.init_checkpoint_states",
    "openrlhf.trainer.ppo_trainer.BasePPOTrainer.train_step",
    "openrlhf.trainer.ppo_trainer.BasePPOTrainer.ppo_train",
    "openrlhf.trainer.ppo_trainer.BasePPOTrainer.broadcast_to_vllm",
    "openrlhf.trainer.ppo_trainer.BasePPOTrainer.save_logs_and_checkpoints",
    "openrlhf.datasets.utils.blending_datasets",
    "openrlhf.datasets.prompts_dataset.PromptDataset.__init__",
    "openrlhf.trainer.ppo_utils.samples_generator.SamplesGenerator.generate_samples",
    "openrlhf.trainer.ppo_utils.samples_generator.SamplesGenerator._generate_vllm",
    "openrlhf.trainer.ppo_utils.samples_generator.SamplesGenerator._dispatch_prompts_to_vllm",
    "openrlhf.trainer.ppo_utils.samples_generator.SamplesGenerator._process_response_into_experience",
    "openrlhf.trainer.ppo_utils.experience_maker.RemoteExperienceMaker.make_experience_batch",
    "openrlhf.trainer.ppo_utils.experience_maker.RemoteExperienceMaker.split_rollout_samples",
    "openrlhf.trainer.ppo_utils.experience_maker.RemoteExperienceMaker.make_experience",
    "openrlhf.trainer.ppo_utils.experience.Experience.concat_experiences",
    "openrlhf.trainer.ppo_utils.length_penalty.apply_length_penalties",
    "openrlhf.models.actor.Actor.__init__",
    "openrlhf.models.actor.Actor.forward",
    "openrlhf.models.utils.log_probs_from_logits",
    "openrlhf.models.loss.PolicyLoss.forward",
    "openrlhf.utils.deepspeed.deepspeed.DeepspeedStrategy._write_ckpt_metric",
)
#: Adapter functions the run must go through.
ADAPTER_RAN = (
    "gymverse_openrlhf.train.main",
    "gymverse_openrlhf.train.main.<locals>.checked.<locals>.after_parse",
    "gymverse_openrlhf.train.start",
    "gymverse_openrlhf.patch.install",
    "gymverse_openrlhf.curriculum.create_actor",
    "gymverse_openrlhf.executor.AgentExecutor.execute",
    "gymverse_openrlhf.executor.response",
    "gymverse_openrlhf.advantages.gymverse_advantages",
    "gymverse_openrlhf.advantages.episode_batch",
    "gymverse_openrlhf.advantages.make_patched.<locals>.compute_advantages_and_returns",
    "gymverse_openrlhf.patch.patch_launcher.<locals>.make.<locals>.async_run_method",
)
#: OpenRLHF's advantage code that GymVerse's PERPO replaces: traced, and must not run.
REPLACED = (
    "openrlhf.trainer.ppo_utils.experience_maker.RemoteExperienceMaker.get_cumulative_returns",
    "openrlhf.trainer.ppo_utils.experience_maker.RemoteExperienceMaker.get_advantages_and_returns",
    "openrlhf.models.utils.compute_reward",
)


def check_run(trace: list[tuple[str, int, float]], batches: list[list[dict[str, Any]]]) -> None:
    """What every run must show: the functions, their processes, real experiences with per-turn PERPO."""
    names = {name for name, _, _ in trace}
    assert not [n for n in OPENRLHF_RAN if n not in names], [n for n in OPENRLHF_RAN if n not in names]
    assert not [n for n in ADAPTER_RAN if n not in names], [n for n in ADAPTER_RAN if n not in names]
    assert not names.intersection(REPLACED), names.intersection(REPLACED)
    # launcher, trainer actor, rollout (vLLM) actor and policy worker are four processes
    where = {
        first(trace, n)[1]
        for n in (
            "openrlhf.cli.train_ppo_ray.train",
            "openrlhf.trainer.ppo_trainer.PPOTrainer.fit",
            "openrlhf.trainer.ray.vllm_engine.RolloutRayActor.generate_responses",
            "openrlhf.models.loss.PolicyLoss.forward",
        )
    }
    assert len(where) == 4, where
    assert len({pid for _, pid, _ in trace}) >= 4
    assert len(batches) == 2, f"expected 2 rollout batches, got {len(batches)}"
    for batch in batches:
        assert sum(len(e["labels"]) for e in batch) == 4  # 2 prompts x 2 samples
        for exp in batch:  # every agent read its level and recorded its episode: the curriculum actor answered
            assert not exp["info"]["gymverse_error"].any() and exp["info"]["gymverse_success"].all()
    assert sum(check_perpo(batch) for batch in batches) > 0  # the format penalty's turn differs from the rest


def check_no_leftovers(marker: str) -> None:
    """No process of the run outlives the launcher (Ray's daemons and workers included)."""
    deadline = time.time() + 30
    while _pids_of_run(marker) and time.time() < deadline:
        time.sleep(0.5)
    assert not _pids_of_run(marker), [Path(f"/proc/{p}/cmdline").read_bytes()[:120] for p in _pids_of_run(marker)]


def synced_before_rollout(trace: list[tuple[str, int, float]]) -> bool:
    """Whether the trainer pushed weights to vLLM before its first rollout (what OpenRLHF does on a resume)."""
    broadcast = first(trace, "openrlhf.trainer.ppo_trainer.BasePPOTrainer.broadcast_to_vllm")[2]
    return broadcast < first(trace, "openrlhf.trainer.ppo_utils.samples_generator.SamplesGenerator.generate_samples")[2]


def test_real_launcher_two_batches_checkpoint_and_resume(tokenizer: Any, tmp_path: Path) -> None:
    """Run 1: two batches at levels 1 and 2, a checkpoint per step; run 2 resumes for two new batches at 3, 4."""
    from gymverse_openrlhf.cli import make_dataset

    model = build_model(tokenizer, tmp_path / "model")
    data = tmp_path / "prompts.jsonl"
    make_dataset([ENV], 4, str(data))
    ckpt = tmp_path / "ckpt"
    ray_tmp = tempfile.mkdtemp(prefix="gvray-", dir="/tmp")
    run_marker = uuid.uuid4().hex
    flags = launcher_flags(model, data, ckpt)
    try:
        run_launcher(flags, tmp_path / "trace1", tmp_path / "run1.log", ray_tmp, run_marker)
        check_no_leftovers(run_marker)
        trace1, batches1 = read_trace(tmp_path / "trace1"), read_batches(tmp_path / "trace1")
        check_run(trace1, batches1)
        assert levels(batches1) == [1, 2]  # promoted after batch 1 (all solved, patience 1)
        assert not synced_before_rollout(trace1)

        # The launcher dropped its curriculum handle before any episode ran; the detached actor served them all.
        released = first(trace1, "harness.curriculum_handle_released")
        assert released[1] == first(trace1, "openrlhf.cli.train_ppo_ray.train")[1]
        assert released[2] < first(trace1, "gymverse_openrlhf.executor.AgentExecutor.execute")[2]

        actor_dir = ckpt / "checkpoints" / "_actor"
        assert sorted(p.name for p in actor_dir.iterdir()) == ["global_step1", "global_step2", "latest"]
        assert (actor_dir / "latest").read_text() == "global_step2"
        for tag, level in (("global_step1", 2), ("global_step2", 3)):  # each tag holds the levels it resumes with
            state = json.loads((actor_dir / tag / "gymverse_curriculum.json").read_text())
            assert (state["tag"], state["controller"]["envs"][ENV]["level"]) == (tag, level)

        run_launcher(
            [*flags, "--ckpt.load_enable", "--train.num_episodes", "2"],
            tmp_path / "trace2",
            tmp_path / "run2.log",
            ray_tmp,
            run_marker,
        )
        check_no_leftovers(run_marker)
        trace2, batches2 = read_trace(tmp_path / "trace2"), read_batches(tmp_path / "trace2")
        check_run(trace2, batches2)  # exactly two new batches
        assert levels(batches2) == [3, 4]  # the restored level, then promoted again
        assert synced_before_rollout(trace2)  # OpenRLHF restored global_step 2 from the actor's checkpoint states
        assert sorted(p.name for p in actor_dir.iterdir()) == [f"global_step{i}" for i in (1, 2, 3, 4)] + ["latest"]
        state = json.loads((actor_dir / "global_step4" / "gymverse_curriculum.json").read_text())
        assert (state["tag"], state["controller"]["envs"][ENV]["level"]) == ("global_step4", 5)
    finally:
        _kill_run(run_marker)
        shutil.rmtree(ray_tmp, ignore_errors=True)
